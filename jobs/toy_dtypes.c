/* Job kind `toy_dtypes`: the handout's benchmarking_mixed_precision (a),
 * answered by running the toy model (model/toy.h) one training step (zero
 * grad, forward + backward, AdamW) under a backend and precision, and
 * reporting the dtype the toy recorded for each tensor as it ran:
 *
 *   param    the fc1 / fc2 weights as their matrix products read them
 *   fc1_out  fc1's output          ln_out   LayerNorm's output
 *   logits   fc2's output          loss     the mean squared error
 *   grads    parameter gradients   master   the weights AdamW updates
 *
 * Each as two metric columns, X_bits (32 or 16) and X_dtype, a code:
 * 0 = fp32, 1 = bf16, 2 = fp16 (a 16-bit column alone would not tell bf16
 * from fp16). The row's message says the same in words ("param=fp16
 * fc1_out=fp32 ..."). Also the loss before and after the step, which show
 * the step ran. The CPU engine computes in fp32 only: validate() refuses a
 * cpu job with another precision before any job starts. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "harness/kind.h"
#include "jobs/common.h"
#include "model/rng.h"
#include "model/toy.h"

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "bf16", "fp16", NULL};

enum { HIDDEN = 10 };   /* the handout's ToyModel */

typedef struct toy_settings {
  run_settings run;
  const char *backend;
  const char *precision;
  int seed;
  int in_features;
  int out_features;
  int batch;
} toy_settings;

static const param_def params[] = {
    COMMON_PARAMS(toy_settings),
    {"run", "backend", STRING_FIELD(toy_settings, backend), 0, 0, backends,
     NULL, NULL, "compute engine: cpu (fp32 only) or cuda (one GPU)"},
    {"run", "precision", STRING_FIELD(toy_settings, precision), 0, 0,
     precisions, NULL, "fp32",
     "matrix-product inputs: fp32, or bf16 / fp16 under the project's mixed "
     "precision policy (README)"},
    {"run", "seed", INT_FIELD(toy_settings, seed), 0, 2147483647, NULL, NULL,
     "336", "seed of the initial weights and of the random batch"},
    {"model", "in_features", INT_FIELD(toy_settings, in_features), 1,
     1 << 20, NULL, NULL, NULL,
     "the toy's input features (hidden is the handout's 10)"},
    {"model", "out_features", INT_FIELD(toy_settings, out_features), 1,
     1 << 20, NULL, NULL, NULL, "the toy's output features"},
    {"model", "batch", INT_FIELD(toy_settings, batch), 1, 1 << 20, NULL, NULL,
     NULL, "rows of the random batch"},
};

/* Columns X_bits then X_dtype, X in toy_probe's order (probe_col). */
static const char *const metrics[] = {
    "param_bits",  "param_dtype",  "fc1_out_bits", "fc1_out_dtype",
    "ln_out_bits", "ln_out_dtype", "logits_bits",  "logits_dtype",
    "loss_bits",   "loss_dtype",   "grads_bits",   "grads_dtype",
    "master_bits", "master_dtype", "loss_first",   "loss_after_step",
    NULL};

static int validate(const void *settings, char *err, size_t n) {
  const toy_settings *s = settings;
  return cpu_precision_error(s->backend, s->precision, "cpu", "cuda", err,
                             n)
             ? BLAME(toy_settings, precision)
             : 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

/* The metrics' X, in toy_probe's order. */
static const char *const probe_col[TOY_NPROBES] = {
    "param", "fc1_out", "ln_out", "logits", "loss", "grads", "master"};

/* The project's names for the CSV (kernels.h's dtype_name says f32). */
static const char *word(int dt) {
  switch (dt) {
  case DT_F32: return "fp32";
  case DT_BF16: return "bf16";
  case DT_F16: return "fp16";
  case -1: return "not-reached";
  }
  return "mixed";
}

static int step(toy *t, const float *x, const float *tg, int rows,
                float *loss) {
  adamw_config o = adamw_defaults();
  TRY(toy_zero_grad(t));
  TRY(toy_forward_backward(t, x, tg, rows, loss));
  TRY(toy_adamw_step(t, &o));
  return 0;
}

static int run(const void *settings, result *r) {
  const toy_settings *s = settings;
  int in = s->in_features, out = s->out_features, rows = s->batch;
  rng batch = batch_rng(s->seed);
  engine *e = NULL;
  toy *t = NULL;
  float *x = malloc(sizeof *x * (size_t)rows * in);
  float *tg = malloc(sizeof *tg * (size_t)rows * out);
  float loss0 = NAN, loss1 = NAN;
  int rc = 0;
  if (!x || !tg) {
    rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of host memory for the batch");
    goto done;
  }
  /* The batch, reproducible from the seed. */
  for (size_t i = 0; i < (size_t)rows * in; i++) x[i] = (float)(2 * rng_uniform(&batch) - 1);
  for (size_t i = 0; i < (size_t)rows * out; i++) tg[i] = (float)(2 * rng_uniform(&batch) - 1);
  if ((rc = engine_open(s->backend, 1, &e)) < 0) goto fail;
  if ((rc = toy_create(&t, e, in, HIDDEN, out, rows,
                       dtype_of_precision(s->precision))) < 0)
    goto fail;
  if ((rc = toy_init(t, (uint64_t)s->seed)) < 0) goto fail;
  /* The step whose dtypes are reported, then one more for the loss after. */
  if ((rc = step(t, x, tg, rows, &loss0)) < 0) goto fail;
  if ((rc = step(t, x, tg, rows, &loss1)) < 0) goto fail;

  char msg[sizeof r->message] = "";
  for (int p = 0; p < TOY_NPROBES; p++) {
    int dt = toy_probe_dtype(t, (toy_probe)p);
    char col[32];
    snprintf(col, sizeof col, "%s_bits", probe_col[p]);
    result_set(r, col, dt >= 0 ? 8.0 * (double)dtype_size((dtype)dt) : NAN);
    snprintf(col, sizeof col, "%s_dtype", probe_col[p]);
    result_set(r, col, dt >= 0 ? (double)dt : NAN);
    snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s%s=%s",
             p ? " " : "", probe_col[p], word(dt));
  }
  snprintf(r->message, sizeof r->message, "%s", msg);
  result_set(r, "loss_first", loss0);
  result_set(r, "loss_after_step", loss1);
  goto done;
fail:
  err_trace(__FILE__, __LINE__);
done:
  if (t) toy_destroy(t);
  if (e) engine_destroy(e);
  free(x);
  free(tg);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_toy_dtypes = {
    .name = "toy_dtypes",
    .summary = "the dtype of each tensor of the handout's toy model in one "
               "training step, recorded as it runs: X_bits 32/16, X_dtype "
               "0 = fp32, 1 = bf16, 2 = fp16",
    .gpu_backend = "cuda",
    .one_rank = true,
    KIND_TABLES(toy_settings, validate),
};
