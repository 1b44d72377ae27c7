/* Job kind `lm`: time the Transformer LM of model.md on one rank
 * (the handout's benchmarking_script).
 *
 * Each step runs on a fresh random batch (seeded): forward with the mean
 * cross-entropy; for forward_backward also zero_grad + backward; for
 * train_step also one AdamW step. Every phase ends with eng_sync before its
 * clock is read, so a phase's time is its own work, as torch.cuda.synchronize
 * does in the handout. `warmup` steps run first and are not timed; the means
 * and standard deviations are over the `steps` timed steps, whose samples go
 * to the experiment's .samples.jsonl. The model is sized by name (model.md's
 * table, plus tiny / nano) or by explicit dimensions "D/F/L/H".
 * With cuda_graphs, forward's and backward's kernels run as CUDA graphs
 * (model.h, model_graph_replays): the first step runs them directly, the
 * second records them, later steps replay; graph_replays counts the
 * replayed calls, so warm-up 1 or more times replays only.
 * Out of memory anywhere (model_create, a step) makes the row "oom". */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/check.h"
#include "common/clock.h"
#include "harness/kind.h"
#include "jobs/common.h"
#include "model/rng.h"
#include "kernels/kernels.h"
#include "model/model.h"

static const char *const backends[] = {"cpu", "cuda", NULL};
static const char *const modes[] = {"forward", "forward_backward",
                                    "train_step", NULL};
static const char *const precisions[] = {"fp32", "tf32", "3xtf32", "bf16",
                                         "fp16", NULL};
static const char *const optimizers[] = {"after_backward", "in_backward",
                                         "in_products", NULL};
static const char *const norms[] = {"rmsnorm", "layernorm", NULL};
static const char *const weight_grad_types[] = {"fp32", "compute", NULL};

typedef struct lm_settings {
  run_settings run;
  const char *backend;
  const char *mode;
  const char *precision;
  const char *fusion;
  const char *attention;
  bool cuda_graphs;
  bool kernel_profile;
  const char *optimizer;
  const char *weight_grads;
  bool adamw_overlap;
  bool keep_norms;
  int adamw_blocks;
  int gemm_sm_reserve;
  int checkpoint_layers;
  bool checkpoint_keep_attention;
  int head_chunk;
  loop_settings loop;
  model_settings model;
  int batch;
  const char *norm;
} lm_settings;

static const param_def params[] = {
    COMMON_PARAMS(lm_settings),
    {"run", "backend", STRING_FIELD(lm_settings, backend), 0, 0, backends,
     NULL, NULL, "compute engine: cpu (the reference) or cuda (one GPU)"},
    {"run", "mode", STRING_FIELD(lm_settings, mode), 0, 0, modes, NULL, NULL,
     "what a timed step does: forward; + backward; + AdamW step"},
    {"run", "precision", STRING_FIELD(lm_settings, precision), 0, 0,
     precisions, NULL, "fp32",
     "matrix-product inputs: fp32 (true fp32), tf32 (fp32 with TF32 "
     "tensor cores), 3xtf32 (fp32-accurate products from three TF32 ones), "
     "bf16 or fp16 (fp32 accumulation, fp32 master weights; CPU: fp32 "
     "only)"},
    PATH_PARAMS(lm_settings),
    {"run", "cuda_graphs", BOOL_FIELD(lm_settings, cuda_graphs), 0, 0, NULL,
     NULL, "false",
     "true: forward's and backward's kernels are recorded once as CUDA "
     "graphs and replayed each step (saves launch time; cuda only)"},
    {"run", "kernel_profile", BOOL_FIELD(lm_settings, kernel_profile), 0, 0,
     NULL, NULL, "false",
     "true: after timing, one forward and one training step are profiled "
     "kernel by kernel (CUPTI, as Nsight Systems): every kernel's name, "
     "calls and time by range, in NAME.samples.jsonl, and the time no "
     "kernel ran between the first and the last (cuda only)"},
    {"run", "optimizer", STRING_FIELD(lm_settings, optimizer), 0, 0,
     optimizers, NULL, "after_backward",
     "train_step's AdamW: after_backward (one pass over every parameter "
     "once backward is done), in_backward (each tensor's update the "
     "moment its gradient is final, beside backward; the same weights; "
     "backward's time then includes it; not with fp16's loss scaling) or "
     "in_products (in_backward, but each weight matrix updated inside the "
     "product that makes its gradient, which is never stored; fused path; "
     "cuda: bf16)"},
    {"run", "weight_grads", STRING_FIELD(lm_settings, weight_grads), 0, 0,
     weight_grad_types, NULL, "fp32",
     "optimizer in_backward on the fused path: the weight matrices' "
     "gradients stored in fp32, or in the products' input dtype (compute: "
     "bf16 rounds them as PyTorch's autocast does; half the bytes the "
     "products write and AdamW reads; fp32 precisions: the same as fp32)"},
    {"run", "adamw_overlap", BOOL_FIELD(lm_settings, adamw_overlap), 0, 0,
     NULL, NULL, "true",
     "optimizer in_backward or in_products: true runs the updates beside "
     "backward on a low-priority stream; false on backward's own stream, "
     "each as its gradient is final (the same memory and weights, no "
     "overlap: what a GPU at its power cap may prefer)"},
    {"run", "keep_norms", BOOL_FIELD(lm_settings, keep_norms), 0, 0, NULL,
     NULL, "false",
     "optimizer in_backward or in_products on the fused path: true keeps "
     "the norms' 16-bit outputs and the fp32 residual after attention "
     "for backward (8 x d_model bytes a token a layer more; with "
     "checkpoint_layers, a group's); false rebuilds them in backward (two "
     "norm passes and a d_model^2 product a layer more). AdamW after "
     "backward and op by op keep them either way"},
    {"run", "adamw_blocks", INT_FIELD(lm_settings, adamw_blocks), 0, 1 << 20,
     NULL, NULL, "0",
     "optimizer in_backward or in_products: thread blocks the updates "
     "beside backward may hold (one per SM on Hopper); 0: as many as they "
     "need"},
    {"run", "gemm_sm_reserve", INT_FIELD(lm_settings, gemm_sm_reserve), 0,
     1024, NULL, "SMs", "0",
     "optimizer in_backward or in_products: backward's matrix products "
     "are shaped for the GPU's SMs minus this many, left to the updates "
     "beside them (cuda only); 0: the whole GPU"},
    {"run", "checkpoint_layers", INT_FIELD(lm_settings, checkpoint_layers),
     0, 1 << 20, NULL, "layers", "0",
     "activation checkpointing (fused path): 0 keeps every layer's "
     "activations for backward; k keeps them for one group of k layers at "
     "a time plus each later group's input, and backward reruns each "
     "group's forward but the last's (the same gradients)"},
    CKPT_KEEP_ATTENTION_PARAM(lm_settings),
    HEAD_CHUNK_PARAM(lm_settings),
    LOOP_PARAMS(lm_settings, loop),
    MODEL_PARAMS(lm_settings, model),
    {"model", "batch", INT_FIELD(lm_settings, batch), 1, 1 << 20, NULL, NULL,
     NULL, "sequences per step"},
    {"model", "norm", STRING_FIELD(lm_settings, norm), 0, 0, norms, NULL,
     "rmsnorm",
     "every norm of the model: rmsnorm (model.md's) or layernorm "
     "(torch.nn.LayerNorm: a weight and a bias each; op-by-op path only)"},
};

static const char *const metrics[] = {
    "params",       "tokens_per_step", "fwd_ms_mean",  "fwd_ms_std",
    "bwd_ms_mean",  "bwd_ms_std",      "opt_ms_mean",  "opt_ms_std",
    "step_ms_mean", "step_ms_std",
    /* what PyTorch's anchors report (reports/anchors/torch_lm.py): a few
     * slow steps (where a GPU at its power cap swings its clock down)
     * move the mean, not the median */
    "step_ms_median", "tokens_per_s", "loss_first",
    "loss_last",    "engine_peak_mib", "peak_rss_mib", "loss_scale",
    "skipped_steps", "graph_replays",
    /* kernel_profile: GPU time in kernels of one forward / training step,
     * the products' share of it, and attention's parts in forward; the
     * time from its first kernel's start to its last one's end, and how
     * much of that no kernel ran (launch gaps, waits on the host) */
    "kp_fwd_ms", "kp_fwd_gemm_share", "kp_step_ms", "kp_step_gemm_share",
    "kp_softmax_ms", "kp_attn_matmul_ms", "kp_fwd_span_ms", "kp_fwd_idle_ms",
    "kp_step_span_ms", "kp_step_idle_ms",
    /* over the timed steps (cuda, where NVML is): the SM clock's and the
     * power's means and the share of readings the power cap throttled */
    MONITOR_METRICS, NULL,
};

/* The optimizer steps during backward (in_backward or in_products). */
static int in_backward(const lm_settings *s) {
  return strcmp(s->optimizer, "after_backward") != 0;
}

/* The model's config: its size, vocabulary and norm; 0, or 1 with a
 * wrong size, 2 with a wrong norm ("what is wrong (allowed: ...)" in err). */
static int config_of(const lm_settings *s, model_config *c, char *err,
                     size_t n) {
  if (model_settings_parse(&s->model, c, err, n) != 0) return 1;
  if (model_norm_parse(s->norm, &c->norm) != 0) {
    snprintf(err, n, "norm = \"%s\" is not a norm (allowed: rmsnorm, "
             "layernorm)", s->norm);
    return 2;
  }
  return 0;
}

static int validate(const void *settings, char *err, size_t n) {
  const lm_settings *s = settings;
  model_config c;
  int bad = config_of(s, &c, err, n);
  if (bad == 1) return BLAME(lm_settings, model.size);
  if (bad == 2) return BLAME(lm_settings, norm);
  if (c.norm == NORM_LAYER && strcmp(s->fusion, "fused") == 0) {
    snprintf(err, n, "norm = \"layernorm\" runs on the op-by-op path: the "
             "fused path's kernels fuse RMSNorm (allowed with fusion "
             "\"fused\": rmsnorm)");
    return BLAME(lm_settings, norm);
  }
  if (cpu_precision_error(s->backend, s->precision, "cpu", "cuda", err, n))
    return BLAME(lm_settings, precision);
  if (path_error(s->fusion, s->attention, err, n) ||
      flash_dhead_error(strcmp(s->backend, "cuda") == 0, s->attention, &c, err, n))
    return BLAME(lm_settings, attention);
  if (in_backward(s)) {
    if (strcmp(s->mode, "train_step") != 0) {
      snprintf(err, n, "optimizer = \"%s\" needs mode \"train_step\" "
               "(allowed with mode %s: after_backward)", s->optimizer,
               s->mode);
      return BLAME(lm_settings, optimizer);
    }
    if (strcmp(s->precision, "fp16") == 0) {
      snprintf(err, n, "optimizer = \"%s\" with fp16: its loss scaling "
               "skips a step when any gradient is not finite, known only "
               "after backward (allowed with fp16: after_backward)",
               s->optimizer);
      return BLAME(lm_settings, optimizer);
    }
  }
  if (strcmp(s->optimizer, "in_products") == 0) {
    if (strcmp(s->fusion, "fused") != 0) {
      snprintf(err, n, "optimizer = \"in_products\" updates inside the "
               "fused path's products (allowed with fusion %s: "
               "after_backward, in_backward)", s->fusion);
      return BLAME(lm_settings, optimizer);
    }
    if (strcmp(s->backend, "cuda") == 0 && strcmp(s->precision, "bf16") != 0) {
      snprintf(err, n, "optimizer = \"in_products\" on cuda runs its "
               "products on bf16 tensor cores (allowed with precision %s: "
               "after_backward, in_backward)", s->precision);
      return BLAME(lm_settings, optimizer);
    }
  }
  if (s->checkpoint_layers && strcmp(s->fusion, "fused") != 0) {
    snprintf(err, n, "checkpoint_layers = %d reruns the fused path's layers "
             "(allowed with fusion %s: 0)", s->checkpoint_layers, s->fusion);
    return BLAME(lm_settings, checkpoint_layers);
  }
  if (ckpt_keep_attention_error(s->checkpoint_keep_attention,
                                s->checkpoint_layers, s->attention, err, n))
    return BLAME(lm_settings, checkpoint_keep_attention);
  if (s->head_chunk && (strcmp(s->fusion, "fused") != 0 ||
                        strcmp(s->optimizer, "in_products") == 0)) {
    snprintf(err, n, "head_chunk = %d makes the fused path's head in chunks, "
             "whose weight gradient the optimizer in the products cannot "
             "wait for (allowed with fusion %s and optimizer %s: 0)",
             s->head_chunk, s->fusion, s->optimizer);
    return BLAME(lm_settings, head_chunk);
  }
  if (strcmp(s->weight_grads, "fp32") != 0 &&
      (strcmp(s->optimizer, "in_backward") != 0 ||
       strcmp(s->fusion, "fused") != 0)) {
    snprintf(err, n, "weight_grads = \"%s\" stores the gradients that the "
             "fused path's updates in backward read, each layer's only until "
             "its update (allowed with optimizer %s and fusion %s: fp32)",
             s->weight_grads, s->optimizer, s->fusion);
    return BLAME(lm_settings, weight_grads);
  }
  if (!s->adamw_overlap && (!in_backward(s) || s->adamw_blocks ||
                            s->gemm_sm_reserve)) {
    snprintf(err, n, "adamw_overlap = false runs the optimizer in "
             "backward's updates on backward's stream (allowed with "
             "optimizer %s, adamw_blocks %d and gemm_sm_reserve %d: true)",
             s->optimizer, s->adamw_blocks, s->gemm_sm_reserve);
    return BLAME(lm_settings, adamw_overlap);
  }
  if (s->adamw_blocks && !in_backward(s)) {
    snprintf(err, n, "adamw_blocks = %d caps the optimizer in backward "
             "(allowed with optimizer %s: 0)", s->adamw_blocks, s->optimizer);
    return BLAME(lm_settings, adamw_blocks);
  }
  if (s->gemm_sm_reserve && !in_backward(s)) {
    snprintf(err, n, "gemm_sm_reserve = %d leaves SMs to the optimizer in "
             "backward (allowed with optimizer %s: 0)", s->gemm_sm_reserve,
             s->optimizer);
    return BLAME(lm_settings, gemm_sm_reserve);
  }
  if (s->gemm_sm_reserve && strcmp(s->backend, "cuda") != 0) {
    snprintf(err, n, "gemm_sm_reserve = %d needs the cuda backend (allowed "
             "with backend %s: 0)", s->gemm_sm_reserve, s->backend);
    return BLAME(lm_settings, gemm_sm_reserve);
  }
  if (s->kernel_profile && strcmp(s->backend, "cuda") != 0) {
    snprintf(err, n, "kernel_profile = true needs the cuda backend (allowed "
             "with backend %s: false)", s->backend);
    return BLAME(lm_settings, kernel_profile);
  }
  if (s->cuda_graphs && strcmp(s->backend, "cuda") != 0) {
    snprintf(err, n, "cuda_graphs = true needs the cuda backend (allowed "
             "with backend %s: false)", s->backend);
    return BLAME(lm_settings, cuda_graphs);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

static model_options options(const lm_settings *s) {
  model_options o = {0};   /* every option this kind does not set: off */
  o.compute = dtype_of_precision(s->precision);
  o.f32 = f32_products_of_precision(s->precision);
  o.fused = strcmp(s->fusion, "fused") == 0;
  o.attention = strcmp(s->attention, "flash") == 0 ? ATTN_FLASH
                                                   : ATTN_MATERIALIZED;
  o.graphs = s->cuda_graphs;
  /* AdamW in backward on the fused path: each layer's gradients live only
   * until its update (two layer-sized slots, not every gradient) */
  o.grad_slots = o.fused && in_backward(s);
  o.adamw_in_products = strcmp(s->optimizer, "in_products") == 0;
  o.grad_lt = strcmp(s->weight_grads, "compute") == 0;
  o.adamw_serial = !s->adamw_overlap;
  o.keep_norms = s->keep_norms;
  o.adamw_blocks = s->adamw_blocks;
  o.sm_reserve = s->gemm_sm_reserve;
  o.ckpt_layers = s->checkpoint_layers;
  o.ckpt_keep_attn = s->checkpoint_keep_attention;
  o.head_chunk = s->head_chunk;
  return o;
}

typedef struct timings {
  double *fwd, *bwd, *opt, *step, *loss;
} timings;

/* One step; its phases' clock times go to marks[0..3] (forward's start,
 * then the ends of forward, backward, optimizer) when marks is not NULL.
 * in_bwd: train_step's AdamW runs inside backward (model_backward_adamw),
 * whose phase then includes it; the optimizer's own phase is empty. */
static int one_step(model *m, engine *e, const char *mode, int in_bwd,
                    int32_t *ids,
                    int32_t *tgt, int b, int t, int vocab, rng *r,
                    timings *tm, int k, double *marks) {
  random_tokens(r, ids, tgt, (size_t)b * t, vocab);
  float loss = 0;
  double t0 = clock_now_s();
  TRY(model_forward(m, ids, tgt, b, t, &loss));
  TRY(eng_sync(e));
  double t1 = clock_now_s(), t2 = t1, t3 = t1;
  int train = strcmp(mode, "train_step") == 0;
  adamw_config o = adamw_defaults();
  if (strcmp(mode, "forward") != 0) {
    TRY(model_zero_grad(m));
    if (train && in_bwd)
      TRY(model_backward_adamw(m, &o));
    else
      TRY(model_backward(m));
    TRY(eng_sync(e));
    t2 = t3 = clock_now_s();
  }
  if (train && !in_bwd) {
    TRY(model_adamw_step(m, &o));
    TRY(eng_sync(e));
    t3 = clock_now_s();
  }
  if (marks) {
    marks[0] = t0;
    marks[1] = t1;
    marks[2] = t2;
    marks[3] = t3;
  }
  if (tm && k >= 0) {
    tm->fwd[k] = (t1 - t0) * 1e3;
    tm->bwd[k] = (t2 - t1) * 1e3;
    tm->opt[k] = (t3 - t2) * 1e3;
    tm->step[k] = (t3 - t0) * 1e3;
    tm->loss[k] = loss;
  }
  return 0;
}

/* ---- the kernel-level profile (the writeup's nsys_profile) ----------------- */

/* A matrix product's kernel: cuBLAS's (nvjet, gemm, cutlass, xmma). */
static int is_gemm(const char *name) {
  static const char *const marks[] = {"gemm", "nvjet", "cutlass", "xmma",
                                      "Gemm"};
  for (size_t i = 0; i < sizeof marks / sizeof marks[0]; i++)
    if (strstr(name, marks[i])) return 1;
  return 0;
}

/* One step of `mode` with every kernel recorded: samples
 * "kernel|PASS|RANGE|NAME" ("-": outside any range) = [calls, total ms];
 * the total GPU time and the products' share of it in *ms and *gemm,
 * attention's softmax and products (forward) in *softmax and *attn_mm,
 * the kernels' span and the GPU's idle time within it in *time, the top
 * kernel in top. */
static int profile_step(model *m, engine *e, const char *mode, int in_bwd,
                        const char *pass, int32_t *ids, int32_t *tgt, int b,
                        int t, int vocab, rng *r, result *res, double *ms,
                        double *gemm, double *softmax, double *attn_mm,
                        eng_kprof_time *time, char *top, size_t ntop) {
  eng_kernel_stat *k = NULL;
  int n = 0;
  TRY(eng_kprof_begin(e));
  int rc = one_step(m, e, mode, in_bwd, ids, tgt, b, t, vocab, r, NULL, -1,
                    NULL);
  int re = eng_kprof_end(e, &k, &n, time);
  if (rc < 0 || re < 0) {
    free(k);
    return rc < 0 ? rc : re;
  }
  *ms = *gemm = 0;
  if (softmax) *softmax = *attn_mm = 0;
  /* the top kernel by name, over every range it ran in */
  int best = -1;
  double best_ms = -1;
  long best_calls = 0;
  for (int i = 0; i < n; i++) {
    double t_ms = 0;
    long calls = 0;
    for (int j = 0; j < n; j++)
      if (strcmp(k[j].name, k[i].name) == 0) {
        t_ms += k[j].total_ms;
        calls += k[j].calls;
      }
    if (t_ms > best_ms) {
      best = i;
      best_ms = t_ms;
      best_calls = calls;
    }
  }
  for (int i = 0; i < n; i++) {
    *ms += k[i].total_ms;
    if (is_gemm(k[i].name)) *gemm += k[i].total_ms;
    if (softmax && strcmp(k[i].range, "attention.softmax") == 0)
      *softmax += k[i].total_ms;
    if (softmax && (strcmp(k[i].range, "attention.scores") == 0 ||
                    strcmp(k[i].range, "attention.values") == 0))
      *attn_mm += k[i].total_ms;
    /* '=' ends a sample's name in the result file; '|' separates its
     * parts, so neither may stand in a kernel's name */
    char name[sizeof k[i].name];
    snprintf(name, sizeof name, "%s", k[i].name);
    for (char *c = name; *c; c++)
      if (*c == '=' || *c == '|' || *c == '\n') *c = '~';
    char key[256];
    snprintf(key, sizeof key, "kernel|%s|%s|%s", pass,
             k[i].range[0] ? k[i].range : "-", name);
    double v[2] = {(double)k[i].calls, k[i].total_ms};
    result_samples(res, key, v, 2);
  }
  *gemm = *ms > 0 ? *gemm / *ms : 0;
  snprintf(top, ntop, "%s (%ld calls, %.3f ms)",
           best >= 0 ? k[best].name : "none", best_calls,
           best >= 0 ? best_ms : 0.0);
  free(k);
  return 0;
}

/* ---- the memory timeline (the writeup's memory_profiling) ------------------ */

/* Tags by what they hold. */
enum { G_PARAMS, G_GRADS, G_OPT, G_ACTS, G_WS, G_OTHER, NGROUPS };
static const char *const group_names[NGROUPS] = {
    "params", "grads", "optimizer", "activations", "workspace", "other"};

static int group_of(const char *tag) {
  if (strcmp(tag, "params") == 0 || strncmp(tag, "params.", 7) == 0)
    return G_PARAMS;   /* with the 16-bit copy, "params.low" */
  if (strcmp(tag, "grads") == 0) return G_GRADS;
  if (strncmp(tag, "adam_", 5) == 0) return G_OPT;
  if (strcmp(tag, "activations") == 0) return G_ACTS;
  if (strncmp(tag, "workspace", 9) == 0 || strcmp(tag, "rope_table") == 0)
    return G_WS;
  return G_OTHER;      /* the token ids and targets ("inputs") */
}

static void add_tag(const char *tag, size_t in_use, size_t peak, void *arg) {
  (void)peak;
  ((double *)arg)[group_of(tag)] += (double)in_use;
}

enum { MAX_POINTS = 300 };   /* keeps the samples within a result's room */

/* Samples "mem_t_ms" and "mem_GROUP_mib": bytes in use by group when the
 * log started (t = 0) and after each allocation and free since; "mem_phase_ms":
 * model creation's end, then the first step's forward start and the ends
 * of its forward, backward and optimizer (equal where the mode stops);
 * "act_mib.NAME": the largest activations, [MiB over all layers, layers],
 * a name standing for "layers.N.NAME" of every layer ("checkpoint.NAME":
 * "checkpoint.G.NAME" of every checkpoint group). start_groups: bytes
 * in use by group when the log started; log_t0: the clock then. Past
 * MAX_POINTS events the timeline is cut; events the engine could not
 * record are counted in "mem_events_lost". */
static void memory_samples(result *r, engine *e, const model *m,
                           const double *start_groups, double create_end_s,
                           const double *marks, double log_t0) {
  int lost, n = eng_memlog_events(e, &lost);
  if (n + 1 > MAX_POINTS) n = MAX_POINTS - 1;
  double *pts = malloc(sizeof *pts * (size_t)(n + 1) * (NGROUPS + 1));
  if (!pts) return;
  double g[NGROUPS];
  memcpy(g, start_groups, sizeof g);
  double *tms = pts, *gm = pts + (n + 1);
  tms[0] = 0;
  for (int k = 0; k < NGROUPS; k++) gm[k * (n + 1)] = g[k] / 1048576.0;
  for (int i = 0; i < n; i++) {
    double t;
    const char *tag;
    long long d;
    eng_memlog_event(e, i, &t, &tag, &d, NULL);
    g[group_of(tag)] += (double)d;
    tms[i + 1] = t * 1e3;
    for (int k = 0; k < NGROUPS; k++) gm[k * (n + 1) + i + 1] = g[k] / 1048576.0;
  }
  result_samples(r, "mem_t_ms", tms, n + 1);
  for (int k = 0; k < NGROUPS; k++) {
    char name[64];
    snprintf(name, sizeof name, "mem_%s_mib", group_names[k]);
    result_samples(r, name, gm + k * (n + 1), n + 1);
  }
  double ph[5] = {create_end_s - log_t0, marks[0] - log_t0, marks[1] - log_t0,
                  marks[2] - log_t0, marks[3] - log_t0};
  for (int k = 0; k < 5; k++) ph[k] *= 1e3;
  result_samples(r, "mem_phase_ms", ph, 5);
  if (lost > 0) {
    double dl = lost;
    result_samples(r, "mem_events_lost", &dl, 1);
  }
  free(pts);

  /* Activations by name, all layers together: a view's bytes run to the
   * next view's offset (offsets count 4-byte slots, padding included). */
  int nv;
  const tensor_view *v = model_activations(m, &nv);
  char (*names)[64] = calloc((size_t)nv, sizeof *names);
  double *mib = calloc((size_t)nv, sizeof *mib), *cnt = calloc((size_t)nv, sizeof *cnt);
  int nn = 0;
  for (int i = 0; names && mib && cnt && i < nv; i++) {
    const char *s = v[i].name;
    int layer, used = 0;
    char group[64] = "";
    if (sscanf(s, "layers.%d.%n", &layer, &used) == 1 && used > 0) s += used;
    /* checkpoint groups' inputs: "checkpoint.input", all groups together */
    else if (sscanf(s, "checkpoint.%d.%n", &layer, &used) == 1 && used > 0) {
      snprintf(group, sizeof group, "checkpoint.%s", s + used);
      s = group;
    }
    size_t end = i + 1 < nv ? v[i + 1].offset : v[i].offset + v[i].numel;
    double bytes = (double)(end - v[i].offset) * 4.0;
    int k = 0;
    while (k < nn && strcmp(names[k], s) != 0) k++;
    if (k == nn) snprintf(names[nn++], sizeof names[0], "%s", s);
    mib[k] += bytes / 1048576.0;
    cnt[k] += 1;
  }
  for (int top = 0; top < 8 && names && mib && cnt; top++) {
    int best = -1;
    for (int k = 0; k < nn; k++)
      if (cnt[k] > 0 && (best < 0 || mib[k] > mib[best])) best = k;
    if (best < 0) break;
    char name[96];
    snprintf(name, sizeof name, "act_mib.%s", names[best]);
    double pair[2] = {mib[best], cnt[best]};
    result_samples(r, name, pair, 2);
    cnt[best] = 0;
  }
  free(names);
  free(mib);
  free(cnt);
}

static int run(const void *settings, result *r) {
  const lm_settings *s = settings;
  model_config c;
  char err[512];
  if (config_of(s, &c, err, sizeof err) != 0) FAIL(ERR_FAIL, "%s", err);
  int b = s->batch, t = s->model.context;
  int warmup = s->loop.warmup, steps = s->loop.steps;
  const char *mode = s->mode;
  int in_bwd = in_backward(s);
  rng batches = batch_rng(s->loop.seed);  /* the model's generator */

  engine *e = NULL;
  model *m = NULL;
  int monitored = 0;   /* no monitor (the cpu engine, no NVML): no columns */
  int32_t *ids = malloc(sizeof *ids * (size_t)b * (size_t)t);
  int32_t *tgt = malloc(sizeof *tgt * (size_t)b * (size_t)t);
  double *buf = calloc((size_t)steps * 5, sizeof *buf);
  int rc = 0;
  if (!ids || !tgt || !buf) {
    rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of host memory for the batch");
    goto done;
  }
  timings tm = {buf, buf + steps, buf + 2 * steps, buf + 3 * steps, buf + 4 * steps};
  if ((rc = engine_open(s->backend, s->loop.threads, &e)) < 0) goto fail;
  /* The memory timeline runs from here to the end of the first step. */
  double groups0[NGROUPS] = {0}, marks[4], created;
  eng_tags(e, add_tag, groups0);
  double log_t0 = clock_now_s();
  eng_memlog(e, 1);
  model_options mo = options(s);
  if ((rc = model_create_ex(&m, e, &c, b, t, &mo)) < 0) goto fail;
  if ((rc = model_init(m, (uint64_t)s->loop.seed)) < 0) goto fail;
  created = clock_now_s();
  for (int k = 0; k < warmup + steps; k++) {
    int timed = k >= warmup;
    if (k == warmup) monitored = monitor_try_begin(e);
    if ((rc = one_step(m, e, mode, in_bwd, ids, tgt, b, t, c.vocab, &batches,
                       timed ? &tm : NULL, timed ? k - warmup : -1,
                       k == 0 ? marks : NULL)) < 0)
      goto fail;
    if (k == 0) eng_memlog(e, 0);
  }
  eng_monitor mon = {0};
  if (monitored) {
    monitored = 0;
    if ((rc = eng_monitor_end(e, &mon)) < 0) goto fail;
  }
  monitor_set(r, &mon);

  /* One more, untimed step with every operation bracketed: where the time
   * goes, by kernel family, in the row's message. */
  char fam[700];
  if ((rc = eng_profile(e, 1)) < 0) goto fail;
  if ((rc = one_step(m, e, mode, in_bwd, ids, tgt, b, t, c.vocab, &batches,
                     NULL, -1, NULL)) < 0)
    goto fail;
  if ((rc = eng_profile_report(e, fam, sizeof fam)) < 0) goto fail;
  snprintf(r->message, sizeof r->message, "ms per step by kernel family: %s",
           fam);
  if (s->kernel_profile) {
    double fms, fg, sm, amm, sms, sg;
    eng_kprof_time ft, st;
    char ftop[256], stop[256];
    if ((rc = profile_step(m, e, "forward", 0, "forward", ids, tgt, b, t,
                           c.vocab, &batches, r, &fms, &fg, &sm, &amm, &ft,
                           ftop, sizeof ftop)) < 0 ||
        (rc = profile_step(m, e, "train_step", in_bwd, "train_step", ids, tgt,
                           b, t, c.vocab, &batches, r, &sms, &sg, NULL, NULL,
                           &st, stop, sizeof stop)) < 0)
      goto fail;
    result_set(r, "kp_fwd_span_ms", ft.span_ms);
    result_set(r, "kp_fwd_idle_ms", ft.span_ms - ft.busy_ms);
    result_set(r, "kp_step_span_ms", st.span_ms);
    result_set(r, "kp_step_idle_ms", st.span_ms - st.busy_ms);
    result_set(r, "kp_fwd_ms", fms);
    result_set(r, "kp_fwd_gemm_share", fg);
    result_set(r, "kp_step_ms", sms);
    result_set(r, "kp_step_gemm_share", sg);
    result_set(r, "kp_softmax_ms", sm);
    result_set(r, "kp_attn_matmul_ms", amm);
    size_t len = strlen(r->message);
    snprintf(r->message + len, sizeof r->message - len,
             "; top kernel, forward: %s; training step: %s", ftop, stop);
    len = strlen(r->message);
    if (ft.host_api[0] || st.host_api[0])
      snprintf(r->message + len, sizeof r->message - len,
               "; host's CUDA calls, forward: %s; training step: %s",
               ft.host_api, st.host_api);
  }

  double step_ms = train_step_results(r, e, m, (double)b * t, tm.step,
                                      tm.loss, steps);
  result_set(r, "tokens_per_s", (double)b * t / (step_ms / 1e3));
  set_mean_std(r, "fwd_ms", tm.fwd, steps);
  if (strcmp(mode, "forward") != 0) set_mean_std(r, "bwd_ms", tm.bwd, steps);
  if (strcmp(mode, "train_step") == 0)
    set_mean_std(r, "opt_ms", tm.opt, steps);
  /* fp16: the dynamic loss scale at the end and the steps it skipped */
  result_set(r, "loss_scale", model_loss_scale(m));
  result_set(r, "skipped_steps", (double)model_skipped_steps(m));
  /* cuda_graphs: forward and backward calls that were graph replays */
  result_set(r, "graph_replays", (double)model_graph_replays(m));
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    result_set(r, "peak_rss_mib", (double)ru.ru_maxrss / 1024.0);
  result_samples(r, "fwd_ms", tm.fwd, steps);
  if (strcmp(mode, "forward") != 0) result_samples(r, "bwd_ms", tm.bwd, steps);
  if (strcmp(mode, "train_step") == 0) result_samples(r, "opt_ms", tm.opt, steps);
  memory_samples(r, e, m, groups0, created, marks, log_t0);
  goto done;
fail:
  err_trace(__FILE__, __LINE__);
done:
  if (monitored) {   /* a timed step failed */
    eng_monitor left;
    (void)eng_monitor_end(e, &left);
  }
  if (m) model_destroy(m);
  if (e) engine_destroy(e);
  free(ids);
  free(tgt);
  free(buf);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_lm = {
    .name = "lm",
    .summary = "time forward / backward / AdamW of model.md's Transformer LM",
    .gpu_backend = "cuda",
    .one_rank = true,
    KIND_TABLES(lm_settings, validate),
};
