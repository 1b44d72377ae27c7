/* Job kind `attention`: time one attention layer's forward and backward on
 * one rank (the handout's pytorch_attention, flash_benchmarking and the
 * 2025 leaderboard shape).
 *
 * Shapes: q, k, v, o, dO [batch * heads, seq, d_head] in the job's precision
 * (bf16 / fp16 are the tensors' own dtype here, with fp32 accumulation
 * inside the kernels; fp32 is true fp32; tf32 and 3xtf32 are fp32 tensors
 * whose products run on TF32 tensor cores, kernels.h f32_products), L
 * [batch * heads, seq] fp32, and
 * for impl materialized the probabilities P [batch * heads, seq, seq] kept
 * for backward (tag "attn.P"). Inputs are seeded random values, never zero,
 * drawn once per job; scale = 1/sqrt(d_head).
 *
 * Timing: `warmup` untimed forward+backward passes, then three loops of
 * `passes` each, every loop closed by eng_sync before the host clock is
 * read (the handout's "time 100 forward passes" with synchronize): forward
 * only; backward only (after one more forward, so P / L are those of these
 * inputs); forward+backward. With min_loop_ms > 0 a loop shorter than that
 * runs again with its passes scaled up to reach it (a tenth to spare),
 * until one does: microsecond kernels are then timed over a loop as long
 * as triton.testing.do_bench's rather than a few launches' jitter.
 * Columns *_ms_per_pass are the counted loop's time / its passes, and
 * *_passes those passes.
 * mem_before_bwd_mib is the engine's exact accounting (every eng_alloc,
 * workspace included) after the forward that precedes the backward loop;
 * peak_mib the engine's peak over the job; device_mib the device's memory
 * as its driver counts it (empty on the CPU engine), the limit those two
 * are held against.
 *
 * FLOP convention (FlashAttention-2's): forward 2 products of 2 Tq Tk Dh
 * FLOPs each = 4 Tq Tk Dh per head; backward 5 products = 10 Tq Tk Dh
 * (recomputing S is not counted); causal counts half of that. TFLOP/s are
 * these over the measured time, for either impl alike.
 *
 * Out of memory anywhere (inputs, P, the engine's scratch) makes the row
 * "oom" with the allocation named in its message. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "common/clock.h"
#include "harness/kind.h"
#include "jobs/common.h"
#include "model/rng.h"
#include "kernels/kernels.h"

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const impls[] = {"materialized", "flash", NULL};
static const char *const precisions[] = {"fp32", "tf32", "3xtf32", "bf16",
                                         "fp16", NULL};

typedef struct attention_settings {
  run_settings run;
  const char *backend;
  const char *precision;
  int passes;
  double min_loop_ms;
  int warmup;
  int seed;
  const char *impl;
  int batch;
  int heads;
  int seq;
  int d_head;
  bool causal;
} attention_settings;

static const param_def params[] = {
    COMMON_PARAMS(attention_settings),
    {"run", "backend", STRING_FIELD(attention_settings, backend), 0, 0,
     backends, NULL, NULL,
     "compute engine: cpu (the reference) or cuda (one GPU)"},
    {"run", "precision", STRING_FIELD(attention_settings, precision), 0, 0,
     precisions, NULL, "fp32",
     "dtype of q, k, v, o and the gradients: fp32 (true fp32), tf32 / 3xtf32 "
     "(fp32 tensors, products on TF32 tensor cores: TF32's precision / "
     "fp32's from three TF32 ones), bf16 or fp16 (fp32 accumulation; CPU: "
     "fp32 only)"},
    {"run", "passes", INT_FIELD(attention_settings, passes), 1, 1000000, NULL,
     NULL, NULL,
     "passes in each timed loop (forward, backward, forward+backward)"},
    {"run", "min_loop_ms", FLOAT_FIELD(attention_settings, min_loop_ms), 0,
     600000, NULL, NULL, "0",
     "shortest timed loop: more passes than `passes` until a loop lasts "
     "this long (0: exactly `passes`)"},
    {"run", "warmup", INT_FIELD(attention_settings, warmup), 0, 100000, NULL,
     NULL, "5", "untimed forward+backward passes first"},
    {"run", "seed", INT_FIELD(attention_settings, seed), 0, 2147483647, NULL,
     NULL, "336", "seed of the random inputs"},
    {"attention", "impl", STRING_FIELD(attention_settings, impl), 0, 0, impls,
     NULL, NULL,
     "materialized: scores and probabilities in memory (the reference's "
     "way); flash: FlashAttention-2, tiled with an online softmax"},
    {"attention", "batch", INT_FIELD(attention_settings, batch), 1, 1 << 20,
     NULL, NULL, NULL, "sequences"},
    {"attention", "heads", INT_FIELD(attention_settings, heads), 1, 1 << 16,
     NULL, NULL, NULL, "heads per sequence"},
    {"attention", "seq", INT_FIELD(attention_settings, seq), 1, 1 << 22, NULL,
     NULL, NULL, "sequence length (queries = keys)"},
    {"attention", "d_head", INT_FIELD(attention_settings, d_head), 1, 1024,
     NULL, NULL, NULL, "head dimension"},
    {"attention", "causal", BOOL_FIELD(attention_settings, causal), 0, 1, NULL,
     NULL, NULL, "query i sees keys j <= i only"},
};

static const char *const metrics[] = {
    "fwd_ms_per_pass",  "bwd_ms_per_pass",    "fwd_bwd_ms_per_pass",
    "fwd_tflops",       "bwd_tflops",         "fwd_bwd_tflops",
    "mem_before_bwd_mib", "peak_mib",         "device_mib",
    "fwd_passes",       "bwd_passes",         "fwd_bwd_passes",
    /* each counted loop's mean SM clock (NVML; cuda): the power a pass
     * draws sets it, and published rates are often at a locked clock */
    "fwd_sm_mhz",       "bwd_sm_mhz",         "fwd_bwd_sm_mhz", NULL,
};

static int validate(const void *settings, char *err, size_t n) {
  const attention_settings *s = settings;
  if (cpu_precision_error(s->backend, s->precision, "cpu", "cuda", err, n))
    return BLAME(attention_settings, precision);
  int d = s->d_head;
  if (strcmp(s->backend, "cuda") == 0 && strcmp(s->impl, "flash") == 0 &&
      !attn_flash_gpu_dhead(d)) {
    char dhs[32];
    snprintf(err, n, "d_head = %d: the GPU's flash kernels are built for "
             "other head dims (allowed: %s; any with impl = \"materialized\")",
             d, attn_flash_gpu_dheads_text(dhs));
    return BLAME(attention_settings, d_head);
  }
  if ((long long)s->batch * s->heads > 65535) {
    snprintf(err, n, "batch * heads = %lld (allowed: at most 65535)",
             (long long)s->batch * s->heads);
    return BLAME(attention_settings, heads);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

typedef struct bufs {
  void *q, *k, *v, *o, *dout, *dq, *dk, *dv, *P;
  float *lse;
} bufs;

typedef struct shape {
  attn_impl impl;
  int bh, t, d, causal;
  float scale;
  dtype dt;
} shape;

static int fwd(engine *e, const shape *s, bufs *b) {
  TRY(k_attention_fwd(e, s->impl, b->q, b->k, b->v, b->o, b->lse, b->P,
                      s->bh, s->t, s->t, s->d, s->causal, s->scale, s->dt));
  return 0;
}

static int bwd(engine *e, const shape *s, bufs *b) {
  TRY(k_attention_bwd(e, s->impl, b->q, b->k, b->v, b->o, b->dout, b->lse,
                      b->P, b->dq, b->dk, b->dv, s->bh, s->t, s->t, s->d,
                      s->causal, s->scale, s->dt));
  return 0;
}

enum { LOOP_FWD, LOOP_BWD, LOOP_BOTH };

/* One timed loop of *n passes (forward, backward or both), closed by a
 * synchronisation; while it lasts less than min_ms, again with *n scaled
 * to reach it. On return *n is the counted loop's passes, *secs its time,
 * *mhz the GPU's mean SM clock over it (NAN: not read). */
static int timed_loop(engine *e, const shape *s, bufs *b, int what,
                      double min_ms, int *n, double *secs, double *mhz) {
  const int most = 1000000;   /* `passes`' own limit */
  for (;;) {
    int on = monitor_try_begin(e), rc = 0;
    double t0 = clock_now_s();
    for (int i = 0; i < *n && rc == 0; i++) {
      if (what != LOOP_BWD) rc = fwd(e, s, b);
      if (rc == 0 && what != LOOP_FWD) rc = bwd(e, s, b);
    }
    if (rc == 0) rc = eng_sync(e);
    *secs = clock_now_s() - t0;
    eng_monitor mon = {0};
    if (on) {   /* stopped whatever happened */
      int re = eng_monitor_end(e, &mon);
      if (rc == 0) rc = re;
    }
    TRY(rc);
    *mhz = mon.samples > 0 ? mon.sm_mhz : NAN;
    if (*secs * 1e3 >= min_ms || *n >= most) return 0;
    double want = ceil(*n * 1.1 * min_ms / fmax(*secs * 1e3, 1e-3));
    *n = want >= most ? most : want > *n ? (int)want : *n + 1;
  }
}

static int measure(engine *e, const void *settings, result *r) {
  const attention_settings *a = settings;
  shape s;
  if (attn_impl_parse(a->impl, &s.impl) < 0)
    FAIL(ERR_FAIL, "attention: unknown impl \"%s\"", a->impl);
  s.bh = a->batch * a->heads;
  s.t = a->seq;
  s.d = a->d_head;
  s.causal = a->causal;
  s.scale = 1.0f / sqrtf((float)s.d);
  s.dt = dtype_of_precision(a->precision);
  TRY(eng_f32_products(e, f32_products_of_precision(a->precision)));
  int passes = a->passes, warmup = a->warmup;
  size_t n = (size_t)s.bh * s.t * s.d, es = dtype_size(s.dt);
  bufs b = {0};
  rng inputs = batch_rng(a->seed);
  TRY(eng_alloc(e, n * es, "attn.q", &b.q));
  TRY(eng_alloc(e, n * es, "attn.k", &b.k));
  TRY(eng_alloc(e, n * es, "attn.v", &b.v));
  TRY(eng_alloc(e, n * es, "attn.o", &b.o));
  TRY(eng_alloc(e, (size_t)s.bh * s.t * sizeof(float), "attn.lse",
                (void **)&b.lse));
  if (s.impl == ATTN_MATERIALIZED)
    TRY(eng_alloc(e, (size_t)s.bh * s.t * s.t * es, "attn.P", &b.P));
  TRY(eng_alloc(e, n * es, "attn.dout", &b.dout));
  TRY(eng_alloc(e, n * es, "attn.dq", &b.dq));
  TRY(eng_alloc(e, n * es, "attn.dk", &b.dk));
  TRY(eng_alloc(e, n * es, "attn.dv", &b.dv));
  TRY(random_tensor(e, b.q, n, s.dt, &inputs));
  TRY(random_tensor(e, b.k, n, s.dt, &inputs));
  TRY(random_tensor(e, b.v, n, s.dt, &inputs));
  TRY(random_tensor(e, b.dout, n, s.dt, &inputs));

  for (int i = 0; i < warmup; i++) {
    TRY(fwd(e, &s, &b));
    TRY(bwd(e, &s, &b));
  }
  TRY(eng_sync(e));
  int n_f = passes, n_b = passes, n_fb = passes;
  double t_fwd, t_bwd, t_both, mhz[3];
  TRY(timed_loop(e, &s, &b, LOOP_FWD, a->min_loop_ms, &n_f, &t_fwd, &mhz[0]));
  TRY(fwd(e, &s, &b));
  TRY(eng_sync(e));
  double mem_before_bwd = (double)eng_bytes_in_use(e);
  TRY(timed_loop(e, &s, &b, LOOP_BWD, a->min_loop_ms, &n_b, &t_bwd, &mhz[1]));
  TRY(timed_loop(e, &s, &b, LOOP_BOTH, a->min_loop_ms, &n_fb, &t_both, &mhz[2]));

  double pairs = (double)s.bh * s.t * s.t * (s.causal ? 0.5 : 1.0);
  double f_fwd = 4.0 * pairs * s.d, f_bwd = 10.0 * pairs * s.d;
  double ms_f = t_fwd * 1e3 / n_f, ms_b = t_bwd * 1e3 / n_b,
         ms_fb = t_both * 1e3 / n_fb;
  result_set(r, "fwd_ms_per_pass", ms_f);
  result_set(r, "bwd_ms_per_pass", ms_b);
  result_set(r, "fwd_bwd_ms_per_pass", ms_fb);
  result_set(r, "fwd_passes", n_f);
  result_set(r, "bwd_passes", n_b);
  result_set(r, "fwd_bwd_passes", n_fb);
  static const char *const mhz_col[3] = {"fwd_sm_mhz", "bwd_sm_mhz",
                                         "fwd_bwd_sm_mhz"};
  for (int i = 0; i < 3; i++)
    if (!isnan(mhz[i])) result_set(r, mhz_col[i], mhz[i]);
  result_set(r, "fwd_tflops", f_fwd / (ms_f * 1e-3) / 1e12);
  result_set(r, "bwd_tflops", f_bwd / (ms_b * 1e-3) / 1e12);
  result_set(r, "fwd_bwd_tflops", (f_fwd + f_bwd) / (ms_fb * 1e-3) / 1e12);
  result_set(r, "mem_before_bwd_mib", mem_before_bwd / 1048576.0);
  result_set(r, "peak_mib", (double)eng_peak_bytes(e) / 1048576.0);
  size_t total = 0;
  TRY(eng_mem_total(e, &total));
  if (total > 0) result_set(r, "device_mib", (double)total / 1048576.0);
  return 0;
}

static int run(const void *settings, result *r) {
  return run_on_engine(((const attention_settings *)settings)->backend, measure, settings,
                       r);
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_attention = {
    .name = "attention",
    .summary = "time one attention layer's forward and backward: "
               "materialised or FlashAttention-2, CPU or one GPU",
    .gpu_backend = "cuda",
    .one_rank = true,
    KIND_TABLES(attention_settings, validate),
};
