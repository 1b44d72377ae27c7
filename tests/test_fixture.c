/* The model against PyTorch: tests/data/fixture_tiny.safetensors holds the
 * reference model (tests/make_fixture.py, float64) on the tiny config
 * (vocab 64, d_model 32, d_ff 48, 2 layers, 4 heads) with random norm gains:
 * its weights, one batch (input_ids, targets [2, 12]), the logits, the loss
 * and the gradient of every parameter ("grad.<name>"). We load the weights,
 * rounded to fp32, into our model on the CPU engine, run forward and
 * backward, and compare.
 *
 * Tolerance: each tensor ours vs the reference within 1e-4 of the tensor's
 * largest absolute value (max |ours - ref| <= 1e-4 * max |ref|), and the
 * loss within 1e-5 relative. fp32 has a 6e-8 unit roundoff; rounding the
 * weights to fp32 and the O(d) sums of a two-layer model leave errors of a
 * few 1e-6 relative to the tensor's scale, so 1e-4 is loose enough for any
 * order of summation and tight enough that a wrong term (a missing gain, a
 * wrong RoPE angle, a transposed weight) fails by orders of magnitude.
 *
 * Exit 0 when every check passes, 1 when one fails, 99 when the fixture is
 * missing or unreadable ($top_srcdir/tests/data/, top_srcdir from the
 * environment as `make check` sets it, else "."). */
#include "config.h"
#include "tests/testlib.h"
#include "model/model.h"
#include "model/safetensors.h"

#include "common/check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>




static const double tol_tensor = 1e-4, tol_loss = 1e-5;

/* max |a - b| against tol * max |b|. */
static void compare(const char *what, const float *ours, const double *ref,
                    size_t n) {
  double worst = 0, scale = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    scale = fmax(scale, fabs(ref[i]));
    double d = fabs(ours[i] - ref[i]);
    if (d > worst || isnan(d)) {
      worst = isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  check(worst <= tol_tensor * scale && scale > 0,
        "%s: max |ours - torch| %.3e <= %.0e * max |torch| %.3e (worst [%zu]: "
        "%.8f vs %.8f)", what, worst, tol_tensor, scale, at,
        n ? ours[at] : 0.0f, n ? ref[at] : 0.0);
}

int main(void) {
  const char *top = getenv("top_srcdir");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/data/fixture_tiny.safetensors",
           top && top[0] ? top : ".");
  if (access(path, R_OK) != 0) {
    fprintf(stderr, "test_fixture: %s is missing (generate it with "
            "tests/make_fixture.py)\n", path);
    return 99;
  }
  st_file *f;
  hard(st_open(&f, path), "open the fixture");
  printf("fixture: %s, %d tensors, made by %s with torch %s\n", path,
         f->ntensors, st_meta(f, "generator") ? st_meta(f, "generator") : "?",
         st_meta(f, "torch") ? st_meta(f, "torch") : "?");

  const st_tensor *ti = st_find(f, "input_ids");
  if (ti == NULL || ti->ndim != 2) {
    fprintf(stderr, "test_fixture: no input_ids [B, T] in %s\n", path);
    return 99;
  }
  const int B = (int)ti->shape[0], T = (int)ti->shape[1];
  model_config c;
  model_config_by_name("tiny", &c);
  engine *e;
  model *m;
  hard(engine_cpu_create(&e, 0), "engine_cpu_create");
  hard(model_create(&m, e, &c, B, T, DT_F32), "model_create");

  int nv;
  const tensor_view *v = model_views(m, &nv);
  for (int i = 0; i < nv; i++) {
    float *w;
    size_t n;
    hard(st_read_f32(f, v[i].name, &w, &n), "read a parameter");
    if (n != v[i].numel) {
      fprintf(stderr, "test_fixture: %s has %zu values, the model %zu\n",
              v[i].name, n, v[i].numel);
      return 99;
    }
    hard(model_set_params(m, v[i].offset, w, n), "model_set_params");
    hard(eng_sync(e), "sync");
    free(w);
  }
  int32_t *ids, *tg;
  size_t n;
  hard(st_read_i32(f, "input_ids", &ids, &n), "read input_ids");
  hard(st_read_i32(f, "targets", &tg, &n), "read targets");

  float loss;
  hard(model_zero_grad(m), "zero_grad");
  hard(model_forward(m, ids, tg, B, T, &loss), "forward");

  size_t nl = (size_t)B * T * c.vocab;
  float *logits = malloc(nl * sizeof *logits);
  double *ref, *ref_loss;
  hard(logits ? 0 : ERR_OOM, "malloc");
  hard(eng_download(e, logits, model_logits(m), nl * sizeof *logits),
       "download");
  hard(eng_sync(e), "sync");
  hard(st_read_f64(f, "logits", &ref, &n), "read logits");
  check(n == nl, "logits: %zu values, [%d, %d, %d]", n, B, T, c.vocab);
  if (n == nl) compare("logits", logits, ref, n);
  free(ref);
  hard(st_read_f64(f, "loss", &ref_loss, &n), "read loss");
  check(n == 1 && fabs(loss - ref_loss[0]) <= tol_loss * fabs(ref_loss[0]),
        "loss %.7f vs torch %.7f (within %.0e relative)", loss, ref_loss[0],
        tol_loss);
  free(ref_loss);

  hard(model_backward(m), "backward");
  float *g = malloc(model_nparams(m) * sizeof *g);
  hard(g ? 0 : ERR_OOM, "malloc");
  hard(eng_download(e, g, model_grads(m), model_nparams(m) * sizeof *g),
       "download");
  hard(eng_sync(e), "sync");
  for (int i = 0; i < nv; i++) {
    char name[128];
    snprintf(name, sizeof name, "grad.%s", v[i].name);
    hard(st_read_f64(f, name, &ref, &n), "read a gradient");
    check(n == v[i].numel, "%s: %zu values", name, n);
    if (n == v[i].numel) compare(name, g + v[i].offset, ref, n);
    free(ref);
  }
  free(g);

  /* The same weights as PyTorch writes a float32 state_dict
   * (safetensors.torch.save_file): st_load_model must take it as a
   * checkpoint, and the model must then give the reference logits. */
  snprintf(path, sizeof path, "%s/tests/data/fixture_tiny_state_dict.safetensors",
           top && top[0] ? top : ".");
  if (access(path, R_OK) != 0) {
    fprintf(stderr, "test_fixture: %s is missing (tests/make_fixture.py)\n", path);
    return 99;
  }
  model *m2;
  hard(model_create(&m2, e, &c, B, T, DT_F32), "model_create");
  int rc = st_load_model(m2, path);
  check(rc == 0, "PyTorch's float32 state_dict loads as a checkpoint%s%s",
        rc ? ": " : "", rc ? err_msg() : "");
  if (rc == 0) {
    hard(model_forward(m2, ids, tg, B, T, &loss), "forward");
    hard(eng_download(e, logits, model_logits(m2), nl * sizeof *logits),
         "download");
    hard(eng_sync(e), "sync");
    hard(st_read_f64(f, "logits", &ref, &n), "read logits");
    compare("logits from the loaded state_dict", logits, ref, n);
    free(ref);
  }
  model_destroy(m2);

  free(logits);
  free(ids);
  free(tg);
  model_destroy(m);
  engine_destroy(e);
  st_close(f);
  return tl_finish();
}
