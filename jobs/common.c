/* What several job kinds share (jobs/common.h). */
#include "config.h"
#include "jobs/common.h"

#include "common/check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_settings_parse(const model_settings *m, model_config *c, char *err,
                         size_t n) {
  return model_config_parse(m->size, m->vocab, c, err, n);
}

int cpu_precision_error(const char *backend, const char *precision,
                        const char *cpu_name, const char *gpu_name,
                        char *err, size_t n) {
  if (strcmp(backend, cpu_name) != 0 || strcmp(precision, "fp32") == 0)
    return 0;
  snprintf(err, n, "precision = \"%s\" needs the %s backend (allowed with "
           "backend %s: fp32)", precision, gpu_name, cpu_name);
  return 1;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
int path_error(const char *fusion, const char *attention, char *err,
               size_t n) {
  if (strcmp(attention, "flash") != 0 || strcmp(fusion, "fused") == 0)
    return 0;
  snprintf(err, n, "attention = \"flash\" runs on the fused path "
           "(allowed with fusion \"%s\": materialized)", fusion);
  return 1;
}

int flash_dhead_error(bool gpu, const char *attention, const model_config *c,
                      char *err, size_t n) {
  int d = c->d_model / c->heads;
  if (!gpu || strcmp(attention, "flash") != 0 || attn_flash_gpu_dhead(d))
    return 0;
  char dhs[32];
  snprintf(err, n, "attention = \"flash\" on the GPU with d_head = d_model / "
           "heads = %d (allowed: materialized; flash for head dims %s)", d,
           attn_flash_gpu_dheads_text(dhs));
  return 1;
}

int ckpt_keep_attention_error(bool keep, int checkpoint_layers,
                              const char *attention, char *err, size_t n) {
  if (!keep || (checkpoint_layers > 0 && strcmp(attention, "flash") == 0))
    return 0;
  snprintf(err, n, "checkpoint_keep_attention = true keeps flash "
           "attention's output through the reruns of checkpoint groups "
           "(allowed with checkpoint_layers %d and attention \"%s\": "
           "false)", checkpoint_layers, attention);
  return 1;
}

#ifndef KIND_DECLARATION_ONLY

rng batch_rng(int seed) {
  return (rng){.state = (uint64_t)seed * 2 + 1};
}

void random_tokens(rng *r, int32_t *ids, int32_t *tgt, size_t n, int vocab) {
  for (size_t i = 0; i < n; i++) {
    ids[i] = (int32_t)(rng_next(r) % (uint64_t)vocab);
    tgt[i] = (int32_t)(rng_next(r) % (uint64_t)vocab);
  }
}

int engine_open(const char *backend, int threads, engine **e) {
  int rc = strcmp(backend, "cuda") == 0 ? engine_cuda_create(e, 0)
                                        : engine_cpu_create(e, threads);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  return rc;
}

int engine_for_rank(comm *c, int threads, engine **e, int *cpu_threads) {
  *cpu_threads = 0;
  if (comm_device(c) >= 0) return engine_cuda_create(e, comm_device(c));
  *cpu_threads = cpu_threads_per_rank(threads, comm_local_size(c));
  return engine_cpu_create(e, *cpu_threads);
}

int rank_batch_open(rank_batch *rb, comm *c, int b, int T, int vocab,
                    int seed) {
  memset(rb, 0, sizeof *rb);
  rb->b = b;
  rb->T = T;
  rb->vocab = vocab;
  rb->B = b * comm_size(c);
  rb->r = batch_rng(seed);
  size_t n = (size_t)rb->B * (size_t)T;
  rb->all_ids = malloc(n * sizeof *rb->all_ids);
  rb->all_tgt = malloc(n * sizeof *rb->all_tgt);
  if (!rb->all_ids || !rb->all_tgt) {
    rank_batch_close(rb);
    FAIL(ERR_OOM, "out of host memory for the batch");
  }
  size_t off = (size_t)comm_rank(c) * (size_t)b * (size_t)T;
  rb->ids = rb->all_ids + off;
  rb->tgt = rb->all_tgt + off;
  return 0;
}

void rank_batch_next(rank_batch *rb) {
  random_tokens(&rb->r, rb->all_ids, rb->all_tgt, (size_t)rb->B * rb->T,
                rb->vocab);
}

void rank_batch_close(rank_batch *rb) {
  free(rb->all_ids);
  free(rb->all_tgt);
  rb->all_ids = rb->all_tgt = NULL;
}

int dp_rank_open(dp_rank *d, comm *c, const loop_settings *loop,
                 int rank_batch, int T, int vocab, int nseries) {
  memset(d, 0, sizeof *d);
  d->c = c;
  d->rank = comm_rank(c);
  d->world = comm_size(c);
  d->steps = loop->steps;
  d->series = calloc((size_t)loop->steps * (size_t)nseries, sizeof *d->series);
  if (!d->series) FAIL(ERR_OOM, "out of host memory for the samples");
  TRY(rank_batch_open(&d->rb, c, rank_batch, T, vocab, loop->seed));
  TRY(engine_for_rank(c, loop->threads, &d->e, &d->cpu_threads));
  return 0;
}

void dp_rank_close(dp_rank *d) {
  if (d->e) engine_destroy(d->e);
  d->e = NULL;
  rank_batch_close(&d->rb);
  free(d->series);
  d->series = NULL;
}

void dp_peak(dp_rank *d, enum dp_moment m) {
  double now = mib((double)eng_peak_bytes(d->e));
  if (m == DP_SET_UP) d->mem_init = now;
  else if (d->stepped) return;
  else if (m == DP_BEFORE_OPT) d->mem_before = now;
  else {
    d->mem_after = now;
    d->stepped = 1;
  }
}

void dp_memory_results(result *r, const dp_rank *d) {
  result_set(r, "mem_init_mib", d->mem_init);
  result_set(r, "mem_before_opt_mib", d->mem_before);
  result_set(r, "mem_after_opt_mib", d->mem_after);
  result_set(r, "activations_mib",
             tag_mib(d->e, "activations") + tag_mib(d->e, "inputs"));
}

double tag_mib(engine *e, const char *tag) {
  size_t used = 0;
  if (eng_tag_bytes(e, tag, &used, NULL) != 0) return 0;
  return mib((double)used);
}

int cpu_threads_per_rank(int threads, int local) {
  if (threads > 0) return threads;
  int n = engine_cpu_default_threads() / (local > 1 ? local : 1);
  return n > 0 ? n : 1;
}

static int cmp_double(const void *a, const void *b) {
  double p = *(const double *)a, q = *(const double *)b;
  return (p > q) - (p < q);
}

sample_stats stats_of(const double *v, int n) {
  sample_stats s = {NAN, NAN, NAN, NAN, NAN};
  double sum = 0, ss = 0;
  for (int i = 0; i < n; i++) sum += v[i];
  s.mean = sum / n;
  for (int i = 0; i < n; i++) ss += (v[i] - s.mean) * (v[i] - s.mean);
  if (n > 1) s.std = sqrt(ss / (n - 1));
  double *sorted = malloc(sizeof *sorted * (size_t)n);
  if (!sorted) return s;
  memcpy(sorted, v, sizeof *sorted * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  s.min = sorted[0];
  s.max = sorted[n - 1];
  free(sorted);
  return s;
}

double set_mean_std(result *r, const char *name, const double *v, int n) {
  sample_stats st = stats_of(v, n);
  char col[64];
  snprintf(col, sizeof col, "%s_mean", name);
  result_set(r, col, st.mean);
  snprintf(col, sizeof col, "%s_std", name);
  result_set(r, col, st.std);
  return st.mean;
}

double train_step_results(result *r, engine *e, const model *m,
                          double tokens, const double *step_ms,
                          const double *loss, int n) {
  result_set(r, "params", (double)model_nparams(m));
  result_set(r, "tokens_per_step", tokens);
  double mean = set_mean_std(r, "step_ms", step_ms, n);
  result_set(r, "step_ms_median", stats_of(step_ms, n).median);
  result_set(r, "loss_first", loss[0]);
  result_set(r, "loss_last", loss[n - 1]);
  result_set(r, "engine_peak_mib", mib((double)eng_peak_bytes(e)));
  result_samples(r, "step_ms", step_ms, n);
  result_samples(r, "loss", loss, n);
  return mean;
}

int monitor_try_begin(engine *e) {
  if (eng_monitor_begin(e) == 0) return 1;
  err_clear();
  return 0;
}

void monitor_set(result *r, const eng_monitor *mon) {
  if (mon->samples <= 0) return;
  result_set(r, "gpu_sm_mhz", mon->sm_mhz);
  result_set(r, "gpu_power_w", mon->power_w);
  result_set(r, "gpu_power_capped", mon->power_capped);
}

int monitored_steps(engine *e, int steps, int (*step)(void *ctx, int k),
                    void *ctx, result *r) {
  int on = monitor_try_begin(e), rc = 0;
  for (int k = 0; k < steps && rc == 0; k++) rc = step(ctx, k);
  eng_monitor mon = {0};
  if (on) {   /* stopped whatever happened */
    int re = eng_monitor_end(e, &mon);
    if (rc == 0) rc = re;
  }
  TRY(rc);
  /* a rank without readings sends what any reading beats */
  double g[3] = {mon.samples ? -mon.sm_mhz : -1e30,
                 mon.samples ? mon.power_w : -1,
                 mon.samples ? mon.power_capped : -1};
  TRY(comm_world_max(g, 3));
  eng_monitor all = {g[0] > -1e29, -g[0], g[1], g[2]};
  monitor_set(r, &all);
  return 0;
}

int family_message(engine *e, int (*step)(void *ctx, int k), void *ctx,
                   int rank, int cpu_threads, const char *what, result *r) {
  char fam[600];
  TRY(eng_profile(e, 1));
  TRY(step(ctx, -1));
  TRY(eng_profile_report(e, fam, sizeof fam));   /* which stops it */
  char threads[48] = "";
  if (cpu_threads)
    snprintf(threads, sizeof threads, " (CPU threads per rank: %d)",
             cpu_threads);
  if (rank == 0)
    snprintf(r->message, sizeof r->message,
             "rank 0%s%s, ms per step by kernel family: %s", threads, what,
             fam);
  return 0;
}

/* n random values of dtype dt in engine memory: +-[0.1, 1) drawn in fp32 on
 * the host, in chunks through an fp32 staging buffer, cast by the engine. */
int random_tensor(engine *e, void *dst, size_t n, dtype dt,
                         rng *r) {
  const size_t chunk = (size_t)1 << 22;
  float *h = malloc(sizeof(float) * (n < chunk ? n : chunk));
  CHECK_ALLOC(h, sizeof(float) * (n < chunk ? n : chunk));
  void *stage = NULL;
  int rc = 0;
  if (dt != DT_F32 &&
      (rc = eng_alloc(e, sizeof(float) * (n < chunk ? n : chunk), "staging",
                      &stage)) < 0) {
    free(h);
    TRY(rc);
  }
  for (size_t i0 = 0; i0 < n && rc == 0; i0 += chunk) {
    size_t m = n - i0 < chunk ? n - i0 : chunk;
    for (size_t i = 0; i < m; i++) {
      double u = 0.1 + 0.9 * (double)(rng_next(r) >> 11) * 0x1.0p-53;
      h[i] = (float)(rng_next(r) & 1 ? u : -u);
    }
    if (dt == DT_F32) {
      rc = eng_upload(e, (float *)dst + i0, h, m * sizeof(float));
    } else if ((rc = eng_upload(e, stage, h, m * sizeof(float))) == 0) {
      rc = k_cast(e, stage, DT_F32, (char *)dst + i0 * dtype_size(dt), dt, m);
      if (rc == 0) rc = eng_sync(e);   /* the stage is refilled next */
    }
  }
  eng_free(e, stage);
  free(h);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  return rc;
}

int run_on_engine(const char *backend,
                  int (*measure)(engine *e, const void *settings, result *r),
                  const void *settings, result *r) {
  engine *e = NULL;
  TRY(engine_open(backend, 0, &e));
  int rc = measure(e, settings, r);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  engine_destroy(e);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */
