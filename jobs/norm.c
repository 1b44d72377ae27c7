/* Job kind `norm`: time one normalisation layer's forward and backward on
 * one rank (the 2024 edition's pytorch_layernorm, rmsnorm_forward_
 * benchmarking and rmsnorm_benchmarking: 50,000 rows, last dimension
 * 1024..8192).
 *
 *   rmsnorm    y = x / sqrt(mean(x^2) + eps) * g       (the model's norm)
 *   layernorm  y = (x - mean(x)) / sqrt(var(x) + eps) * w + b
 *
 * Both are one kernel each way on either engine (kernels/ops.def), fp32,
 * keeping the per-row statistics (rstd; LayerNorm's mean too) for
 * backward, which writes dx and adds the parameters' gradients. Inputs are
 * seeded random values, never zero, drawn once per job.
 *
 * Timing, as the attention kind's: `warmup` untimed forward+backward
 * passes, then two loops of `passes` each, every loop closed by eng_sync
 * before the host clock is read: forward only; forward+backward.
 * fwd_gbps counts the forward's compulsory traffic (x read, y written:
 * 8 bytes an element) over its time. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/clock.h"
#include "harness/kind.h"
#include "jobs/common.h"
#include "kernels/kernels.h"
#include "model/rng.h"

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const impls[] = {"rmsnorm", "layernorm", NULL};

typedef struct norm_settings {
  run_settings run;
  const char *backend;
  int passes;
  int warmup;
  int seed;
  const char *impl;
  int rows;
  int cols;
} norm_settings;

static const param_def params[] = {
    COMMON_PARAMS(norm_settings),
    {"run", "backend", STRING_FIELD(norm_settings, backend), 0, 0, backends,
     NULL, NULL, "compute engine: cpu (the reference) or cuda (one GPU)"},
    {"run", "passes", INT_FIELD(norm_settings, passes), 1, 1000000, NULL,
     NULL, "1000", "passes in each timed loop (forward; forward+backward)"},
    {"run", "warmup", INT_FIELD(norm_settings, warmup), 0, 100000, NULL, NULL,
     "10", "untimed forward+backward passes first"},
    {"run", "seed", INT_FIELD(norm_settings, seed), 0, 2147483647, NULL, NULL,
     "336", "seed of the random inputs"},
    {"norm", "impl", STRING_FIELD(norm_settings, impl), 0, 0, impls, NULL,
     NULL, "rmsnorm (the model's) or layernorm (with bias)"},
    {"norm", "rows", INT_FIELD(norm_settings, rows), 1, 1 << 24, NULL, NULL,
     "50000", "rows normalised (the 2024 handout's 50,000)"},
    {"norm", "cols", INT_FIELD(norm_settings, cols), 1, 1 << 20, NULL, NULL,
     NULL, "the last dimension, normalised over"},
};

static const char *const metrics[] = {"fwd_ms_per_pass", "fwd_bwd_ms_per_pass",
                                      "fwd_gbps", "peak_mib", NULL};

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

typedef struct bufs {
  float *x, *y, *dy, *dx, *w, *b, *dw, *db, *mean, *rstd;
} bufs;

static int fwd(engine *e, int layer, const bufs *u, int n, int d) {
  if (layer)
    return k_layernorm_fwd(e, u->x, u->w, u->b, u->y, u->mean, u->rstd, n, d,
                           1e-5f);
  return k_rmsnorm_fwd(e, u->x, u->w, u->y, u->rstd, n, d, 1e-5f);
}

static int bwd(engine *e, int layer, const bufs *u, int n, int d) {
  if (layer)
    return k_layernorm_bwd(e, u->dy, u->x, u->w, u->mean, u->rstd, u->dx,
                           u->dw, u->db, n, d);
  return k_rmsnorm_bwd(e, u->dy, u->x, u->w, u->rstd, u->dx, u->dw, n, d);
}

static int measure(engine *e, const void *settings, result *r) {
  const norm_settings *s = settings;
  int layer = strcmp(s->impl, "layernorm") == 0, n = s->rows, d = s->cols;
  size_t nd = (size_t)n * d;
  bufs u = {0};
  rng inputs = batch_rng(s->seed);
  float **big[] = {&u.x, &u.y, &u.dy, &u.dx};
  for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
    TRY(eng_alloc(e, nd * sizeof(float), "norm.rows", (void **)big[i]));
  float **small[] = {&u.w, &u.b, &u.dw, &u.db};
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
    TRY(eng_alloc(e, (size_t)d * sizeof(float), "norm.params",
                  (void **)small[i]));
  TRY(eng_alloc(e, (size_t)n * sizeof(float), "norm.stats", (void **)&u.mean));
  TRY(eng_alloc(e, (size_t)n * sizeof(float), "norm.stats", (void **)&u.rstd));
  TRY(random_tensor(e, u.x, nd, DT_F32, &inputs));
  TRY(random_tensor(e, u.dy, nd, DT_F32, &inputs));
  TRY(random_tensor(e, u.w, (size_t)d, DT_F32, &inputs));
  TRY(random_tensor(e, u.b, (size_t)d, DT_F32, &inputs));

  for (int i = 0; i < s->warmup; i++) {
    TRY(fwd(e, layer, &u, n, d));
    TRY(bwd(e, layer, &u, n, d));
  }
  TRY(eng_sync(e));
  double t0 = clock_now_s();
  for (int i = 0; i < s->passes; i++) TRY(fwd(e, layer, &u, n, d));
  TRY(eng_sync(e));
  double t_fwd = clock_now_s() - t0;
  t0 = clock_now_s();
  for (int i = 0; i < s->passes; i++) {
    TRY(fwd(e, layer, &u, n, d));
    TRY(bwd(e, layer, &u, n, d));
  }
  TRY(eng_sync(e));
  double t_both = clock_now_s() - t0;
  double ms_f = t_fwd * 1e3 / s->passes;
  result_set(r, "fwd_ms_per_pass", ms_f);
  result_set(r, "fwd_bwd_ms_per_pass", t_both * 1e3 / s->passes);
  result_set(r, "fwd_gbps", 8.0 * (double)nd / (ms_f * 1e-3) / 1e9);
  result_set(r, "peak_mib", (double)eng_peak_bytes(e) / 1048576.0);
  return 0;
}

static int run(const void *settings, result *r) {
  return run_on_engine(((const norm_settings *)settings)->backend, measure, settings,
                       r);
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_norm = {
    .name = "norm",
    .summary = "time one RMSNorm or LayerNorm layer's forward and backward "
               "over many rows, CPU or one GPU",
    .gpu_backend = "cuda",
    .one_rank = true,
    KIND_TABLES(norm_settings, NULL),
};
