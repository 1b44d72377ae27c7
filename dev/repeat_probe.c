/* Does one GPU training step repeat bit for bit? test_fsdp's small LM
 * (vocab 211, d_model 32, 2 heads, d_ff 48, 3 layers, 12 x 8 tokens),
 * fused path, each precision and attention: R fresh models from one seed
 * take STEPS - 1 AdamW steps, then forward + backward; each view's
 * last gradient is compared
 * with the first run's, and the loss. Prints the views that differ.
 *   dev/repeat_probe [R]    (build: see dev/Makefile, repeat_probe) */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "kernels/kernels.h"
#include "model/model.h"

enum { B = 12, T = 8, STEPS = 3 };

static void die(int rc, const char *what) {
  if (rc) {
    fprintf(stderr, "%s: %s\n", what, err_msg());
    exit(1);
  }
}

static uint64_t s = 88172645463325252ull;
static uint64_t rnd(void) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

int main(int argc, char **argv) {
  int R = argc > 1 ? atoi(argv[1]) : 10;
  model_config cfg;
  model_config_by_name("nano", &cfg);
  cfg.vocab = 211;
  cfg.d_model = 32;
  cfg.d_ff = 48;
  cfg.layers = 3;
  cfg.heads = 2;
  int32_t ids[STEPS * B * T], tgt[STEPS * B * T];
  for (int i = 0; i < STEPS * B * T; i++) {
    ids[i] = (int32_t)(rnd() % 211);
    tgt[i] = (int32_t)(rnd() % 211);
  }
  engine *e;
  die(engine_cuda_create(&e, 0), "engine");
  dtype precs[] = {DT_F32, DT_BF16, DT_F16};
  attn_impl atts[] = {ATTN_FLASH, ATTN_MATERIALIZED};
  for (int p = 0; p < 3; p++)
    for (int a = 0; a < 2; a++)
      for (int ck = 0; ck <= 1; ck++) {
        model_options o = {.compute = precs[p], .fused = 1, .attention = atts[a],
                           .f32 = F32_EXACT, .ckpt_layers = ck};
        float *g0 = NULL, *g = NULL, loss0 = 0;
        size_t n = 0;
        int nv = 0, differ = 0;
        const tensor_view *v = NULL;
        for (int r = 0; r < R; r++) {
          model *m;
          die(model_create_ex(&m, e, &cfg, B, T, &o), "create");
          die(model_init(m, 4321), "init");
          float loss;
          adamw_config hp = adamw_defaults();
          for (int st = 0; st < STEPS; st++) {
            die(model_zero_grad(m), "zero");
            die(model_forward(m, ids + st * B * T, tgt + st * B * T, B, T, &loss), "forward");
            die(model_backward(m), "backward");
            if (st < STEPS - 1) die(model_adamw_step(m, &hp), "adamw");
          }
          n = model_nparams(m);
          if (!g0) {
            g0 = malloc(n * sizeof(float));
            g = malloc(n * sizeof(float));
          }
          die(eng_download(e, r ? g : g0, model_grads(m), n * sizeof(float)),
              "download");
          die(eng_sync(e), "sync");
          v = model_views(m, &nv);
          if (r == 0) loss0 = loss;
          else {
            if (loss != loss0) printf("  run %d: loss %.9g vs %.9g\n", r, loss, loss0);
            for (int k = 0; k < nv; k++) {
              double mx = 0;
              size_t cnt = 0;
              for (size_t i = v[k].offset; i < v[k].offset + v[k].numel; i++)
                if (g[i] != g0[i]) {
                  cnt++;
                  double d = fabs((double)g[i] - g0[i]);
                  if (d > mx) mx = d;
                }
              if (cnt) {
                differ = 1;
                printf("  run %d: %s: %zu of %zu differ, max %.3g\n", r,
                       v[k].name, cnt, v[k].numel, mx);
              }
            }
          }
          model_destroy(m);
        }
        printf("%s %s ckpt %d: %s\n", dtype_name(precs[p]),
               atts[a] == ATTN_FLASH ? "flash" : "materialised", ck,
               differ ? "DIFFERS" : "repeats bit for bit");
        free(g0);
        free(g);
      }
  engine_destroy(e);
  return 0;
}
