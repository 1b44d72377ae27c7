/* model_helpers.h: shared model fixtures of the model tests. */
#include "config.h"
#include "tests/model_helpers.h"
#include "model/safetensors.h"
#include "tests/testlib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float *host_floats(engine *e, const float *p, size_t n) {
  float *h = tl_malloc(n * sizeof *h);
  hard(eng_download(e, h, p, n * sizeof *h), "eng_download");
  hard(eng_sync(e), "eng_sync");
  return h;
}

static float *weights(model *m) {
  return host_floats(model_engine(m), model_params(m), model_nparams(m));
}

model *initial_model(engine *e, const model_config *c, int B, int T,
                     uint64_t seed, float **w) {
  model *m;
  hard(model_create(&m, e, c, B, T, DT_F32), "model_create");
  hard(model_init(m, seed), "model_init");
  *w = weights(m);
  return m;
}

static int forms_agree(model *after, engine *after_bwd, model *in_bwd,
                       int B, int T, int steps, dtype wt, int head_fp32);

int adamw_forms_agree(model *after, model *in_bwd, int B, int T, int steps) {
  return forms_agree(after, NULL, in_bwd, B, T, steps, DT_F32, 0);
}

int adamw_forms_agree_on(model *after, engine *after_bwd, model *in_bwd,
                         int B, int T, int steps) {
  return forms_agree(after, after_bwd, in_bwd, B, T, steps, DT_F32, 0);
}

int adamw_forms_agree_lt(model *after, model *in_bwd, int B, int T,
                         int steps, dtype wt, int head_fp32) {
  return forms_agree(after, NULL, in_bwd, B, T, steps, wt, head_fp32);
}

void round_weight_grads(model *m, dtype wt, int head_fp32) {
  engine *e = model_engine(m);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  float *g = model_grads(m);
  void *tmp;
  hard(eng_alloc(e, model_nparams(m) * dtype_size(wt), "test", &tmp),
       "eng_alloc");
  for (int i = 1; i < nv; i++) {
    if (v[i].ndim != 2 || (i == nv - 1 && head_fp32)) continue;
    hard(k_cast(e, g + v[i].offset, DT_F32, tmp, wt, v[i].numel), "k_cast");
    hard(k_cast(e, tmp, wt, g + v[i].offset, DT_F32, v[i].numel), "k_cast");
  }
  hard(eng_sync(e), "eng_sync");
  eng_free(e, tmp);
}

static int forms_agree(model *after, engine *after_bwd, model *in_bwd,
                       int B, int T, int steps, dtype wt, int head_fp32) {
  model *m[2] = {after, in_bwd};
  int vocab = model_get_config(after)->vocab, same = 1;
  size_t n = model_nparams(after);
  adamw_config a = adamw_defaults();
  int32_t *ids = tl_malloc(2 * (size_t)B * T * sizeof *ids), *tg = ids + B * T;
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < B * T; i++) {
      ids[i] = (int32_t)(next_u64() % (uint64_t)vocab);
      tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
    }
    float loss[2];
    for (int k = 0; k < 2; k++) {
      hard(model_zero_grad(m[k]), "zero_grad");
      hard(model_forward(m[k], ids, tg, B, T, &loss[k]), "forward");
      if (k == 0) {
        hard(after_bwd ? model_backward_on(m[k], after_bwd)
                       : model_backward(m[k]),
             "backward");
        if (wt != DT_F32) round_weight_grads(m[k], wt, head_fp32);
        hard(model_adamw_step(m[k], &a), "adamw");
      } else {
        hard(model_backward_adamw(m[k], &a), "backward_adamw");
      }
    }
    float *p0 = weights(m[0]), *p1 = weights(m[1]);
    same &= memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0 &&
            memcmp(p0, p1, n * sizeof *p0) == 0;
    free(p0);
    free(p1);
  }
  free(ids);
  return same;
}

int training_agrees(model *a, model *b, int B, int T, int steps,
                    const char **what) {
  model *m[2] = {a, b};
  int vocab = model_get_config(a)->vocab;
  size_t n = model_nparams(a);
  adamw_config o = adamw_defaults();
  int32_t *ids = tl_malloc(2 * (size_t)B * T * sizeof *ids), *tg = ids + B * T;
  *what = "";
  for (int s = 0; s < steps && !**what; s++) {
    for (int i = 0; i < B * T; i++) {
      ids[i] = (int32_t)(next_u64() % (uint64_t)vocab);
      tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
    }
    float loss[2], *h[2];
    for (int k = 0; k < 2; k++) {
      hard(model_zero_grad(m[k]), "zero_grad");
      hard(model_forward(m[k], ids, tg, B, T, &loss[k]), "forward");
      hard(model_backward(m[k]), "backward");
    }
    if (memcmp(&loss[0], &loss[1], sizeof loss[0]) != 0) *what = "loss";
    for (int k = 0; k < 2; k++)
      h[k] = host_floats(model_engine(m[k]), model_grads(m[k]), n);
    if (!**what && memcmp(h[0], h[1], n * sizeof *h[0]) != 0)
      *what = "gradients";
    for (int k = 0; k < 2; k++) {
      free(h[k]);
      hard(model_adamw_step(m[k], &o), "adamw");
      h[k] = weights(m[k]);
    }
    if (!**what && memcmp(h[0], h[1], n * sizeof *h[0]) != 0)
      *what = "weights";
    for (int k = 0; k < 2; k++) free(h[k]);
  }
  free(ids);
  return !**what;
}

float *other_checkpoint(engine *e, const model_config *c, int B, int T,
                        const char *prog, char *dir, size_t ndir, char *path,
                        size_t npath) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, ndir, "%s/%s.XXXXXX", tmp && tmp[0] ? tmp : "/tmp", prog);
  if (mkdtemp(dir) == NULL) {
    fprintf(stderr, "%s: mkdtemp %s: %s\n", prog, dir, strerror(errno));
    exit(99);
  }
  snprintf(path, npath, "%s/other.safetensors", dir);
  float *w;
  model *src = initial_model(e, c, B, T, 4242, &w);
  int nv;
  const tensor_view *v = model_views(src, &nv);
  for (int i = 0; i < nv; i++)
    if (v[i].ndim == 1)
      for (size_t j = 0; j < v[i].numel; j++)
        w[v[i].offset + j] = 1.0f + frand(0.3f);
  hard(model_set_params(src, 0, w, model_nparams(src)), "model_set_params");
  hard(st_save_model(src, path), "st_save_model");
  model_destroy(src);
  return w;
}
