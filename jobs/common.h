/* What several job kinds share, declared once: the model settings of the
 * kinds that train model.md's LM (lm, ddp) and their parsing; the loop
 * settings of kinds that time steps; and, on the run side only, the seeded
 * random batches and the statistics over timed samples.
 *
 * jobs/common.c is built like a kind file: the run side (which needs
 * model/rng.c, outside the runner's library) is left out of the runner's
 * build (KIND_DECLARATION_ONLY). */
#ifndef TL_JOBS_COMMON_H
#define TL_JOBS_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "collective/comm.h"
#include "harness/kind.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "model/rng.h"

/* model.md's LM: which size, over what vocabulary, how long a sequence. */
typedef struct model_settings {
  const char *size;
  int vocab;
  int context;
} model_settings;

/* The rows filling st's model_settings member m, in this column order. */
#define MODEL_PARAMS(st, m)                                                  \
  {"model", "size", STRING_FIELD(st, m.size), 0, 0, NULL, NULL, NULL,        \
   "a size of model.md (small, medium, large, xl, 2.7B, 10B), tiny or "      \
   "nano, or explicit dimensions D/F/L/H (d_model/d_ff/layers/heads)"},      \
  {"model", "vocab", INT_FIELD(st, m.vocab), 2, 1 << 24, NULL, NULL,         \
   "10000", "vocabulary size"},                          \
  {"model", "context", INT_FIELD(st, m.context), 1, 1 << 20, NULL, NULL,     \
   NULL, "context length: tokens per sequence"}

/* "small" or "768/3072/12/12" with m's vocabulary: 0, or -1 with "what is
 * wrong (allowed: ...)" in err. */
int model_settings_parse(const model_settings *m, model_config *c, char *err,
                         size_t n);

/* A timed loop of training steps on an engine. */
typedef struct loop_settings {
  int warmup;                   /* untimed steps first */
  int steps;                    /* timed steps */
  int threads;                  /* CPU engine threads per rank; 0: auto */
  int seed;                     /* initial weights and batches */
} loop_settings;

/* The rows filling st's loop_settings member l, in this column order. */
#define LOOP_PARAMS(st, l)                                                   \
  {"run", "warmup", INT_FIELD(st, l.warmup), 0, 100000, NULL, NULL, "5",     \
   "untimed steps first"},                                                   \
  {"run", "steps", INT_FIELD(st, l.steps), 1, 1000000, NULL, NULL, "10",     \
   "timed steps"},                                                           \
  {"run", "threads", INT_FIELD(st, l.threads), 0, 4096, NULL, NULL, "0",     \
   "CPU engine threads per rank (0: OpenMP's default divided among the "  \
   "ranks on the node)"},                                                    \
  {"run", "seed", INT_FIELD(st, l.seed), 0, 2147483647, NULL, NULL, "336",   \
   "seed of the initial weights (with several ranks, rank 0's, broadcast) "  \
   "and of the random batches"}

/* The run.backend row of a kind whose ranks talk over MPI (CPU engine)
 * or NCCL (one GPU a rank), filling st's `backend`. */
#define RANKS_BACKEND_PARAM(st)                                              \
  {"run", "backend", STRING_FIELD(st, backend), 0, 0, rank_backends, NULL,   \
   NULL,                                                                     \
   "mpi: CPU engine on each rank, MPI collectives; nccl: CUDA engine, one "  \
   "GPU per rank, NCCL collectives"}
static const char *const rank_backends[] = {"mpi", "nccl", NULL};

/* The rows choosing the model's path, filling st's `fusion` and
 * `attention` (kinds that train the LM on one path or the other), and the
 * check that flash attention has the fused path: 0, or 1 with what is
 * wrong in err. */
#define PATH_PARAMS(st)                                                      \
  {"run", "fusion", STRING_FIELD(st, fusion), 0, 0, path_fusions, NULL,      \
   "opbyop",                                                                 \
   "opbyop: one kernel per operation, as PyTorch eager; fused: the fused "   \
   "path (fewer passes, activations in the products' dtype)"},               \
  {"run", "attention", STRING_FIELD(st, attention), 0, 0, path_attentions,   \
   NULL, "materialized",                                                     \
   "materialized (scores in memory) or flash (FlashAttention-2; fused "      \
   "path only)"}
static const char *const path_fusions[] = {"opbyop", "fused", NULL};
static const char *const path_attentions[] = {"materialized", "flash", NULL};
int path_error(const char *fusion, const char *attention, char *err,
               size_t n);
/* The check that flash attention on the GPU (gpu true) takes model c's
 * head dim (kernels.h, ATTN_FLASH_GPU_DHEADS; the CPU's takes any): 0, or
 * 1 with what is wrong in err. */
int flash_dhead_error(bool gpu, const char *attention, const model_config *c,
                      char *err, size_t n);

/* The row of kinds with activation checkpointing (checkpoint_layers),
 * filling st's `checkpoint_keep_attention` (model_options.ckpt_keep_attn),
 * and its check: 0, or 1 with what is wrong in err. */
#define CKPT_KEEP_ATTENTION_PARAM(st)                                        \
  {"run", "checkpoint_keep_attention",                                       \
   BOOL_FIELD(st, checkpoint_keep_attention), 0, 0, NULL, NULL, "false",     \
   "true (with checkpoint_layers > 0 and flash attention): every layer "     \
   "keeps its attention output and logsumexp, so backward's reruns skip "    \
   "the attention kernels (2 x d_model + 4 x heads more bytes a token a "    \
   "layer in 16 bits; the same gradients)"}
int ckpt_keep_attention_error(bool keep, int checkpoint_layers,
                              const char *attention, char *err, size_t n);

/* The row of kinds that train on the fused path, filling st's
 * `head_chunk` (model_options.head_chunk). */
#define HEAD_CHUNK_PARAM(st)                                                 \
  {"run", "head_chunk", INT_FIELD(st, head_chunk), 0, 1 << 30, NULL,         \
   "tokens", "0",                                                            \
   "fused path: the head's fp32 logits and their gradient made this many "   \
   "tokens at a time, never the whole batch's (backward makes each "         \
   "chunk's logits again: one more head product; the weights to "            \
   "rounding); 0: the whole batch at once"}

/* The CPU engine computes in fp32 only: 0 when precision may run on
 * backend, else 1 with "precision = \"bf16\" needs the <gpu_name> backend
 * (allowed with backend <cpu_name>: fp32)" in err. */
int cpu_precision_error(const char *backend, const char *precision,
                        const char *cpu_name, const char *gpu_name,
                        char *err, size_t n);

/* The collectives' benchmark (jobs/collective.c: the collective kind; the
 * allreduce kind is its all_reduce): its run rows, filling st's backend,
 * warmup and iters; its CSV metrics; and 0 when size_mib is whole fp32
 * elements, else -1 with what is wrong in err. */
#define COLLECTIVE_RUN_PARAMS(st)                                            \
  {"run", "backend", STRING_FIELD(st, backend), 0, 0, rank_backends, NULL,   \
   NULL,                                                                     \
   "mpi: host buffers, MPI between CPU processes; nccl: device buffers, "    \
   "NCCL between GPUs, one GPU per process"},                                \
  {"run", "warmup", INT_FIELD(st, warmup), 0, 1000000, NULL, NULL, "5",      \
   "untimed operations before timing"},                                      \
  {"run", "iters", INT_FIELD(st, iters), 1, 10000000, NULL, NULL, NULL,      \
   "timed operations"}
#define COLLECTIVE_METRICS                                                   \
  "bytes", "time_ms_mean", "time_ms_std", "time_ms_median", "time_ms_min", \
      "time_ms_max", "algbw_gbps", "busbw_gbps"
int collective_size_error(double size_mib, char *err, size_t n);

/* ---- the run side ------------------------------------------------------- */

/* One collective_bench job on this rank: op (collective.c's names:
 * all_reduce, all_gather, reduce_scatter, broadcast, all_to_all) over
 * backend's communicator, its row's metrics into r. */
int collective_bench(const char *backend, const char *op, double size_mib,
                     int warmup, int iters, result *r);

/* The generator of a job's random inputs: one stream per seed, the same on
 * every rank and every machine. */
rng batch_rng(int seed);
/* n token ids and n next-token targets in [0, vocab), drawn in turn. */
void random_tokens(rng *r, int32_t *ids, int32_t *tgt, size_t n, int vocab);

/* n random values of dtype dt at dst (engine memory): +-[0.1, 1), never
 * zero, drawn in fp32 from r on the host, cast by the engine. */
int random_tensor(engine *e, void *dst, size_t n, dtype dt, rng *r);

/* A one-rank job's run: measure(e, settings, r) on a fresh engine of
 * `backend` (engine_open, default threads), which is destroyed after,
 * with every buffer measure left on it. */
int run_on_engine(const char *backend,
                  int (*measure)(engine *e, const void *settings, result *r),
                  const void *settings, result *r);

/* The engine of a one-rank job: backend "cuda" is GPU 0, any other the
 * CPU engine with `threads` threads (0: OpenMP's default). */
int engine_open(const char *backend, int threads, engine **e);
/* The engine of this rank of a multi-rank job on c: NCCL's GPU
 * (comm_device), or the CPU engine with this rank's share of the node's
 * threads (cpu_threads_per_rank), which *cpu_threads says (0 on a GPU). */
int engine_for_rank(comm *c, int threads, engine **e, int *cpu_threads);

/* The batches of a data-parallel job: each step a random global batch of
 * B = b x world sequences of T tokens, drawn from the seed alike on every
 * rank; this rank trains on sequences [rank b, (rank + 1) b), at ids and
 * tgt after rank_batch_next. */
typedef struct rank_batch {
  int B, b, T, vocab;
  int32_t *all_ids, *all_tgt;   /* [B T] each */
  const int32_t *ids, *tgt;     /* this rank's slice */
  rng r;
} rank_batch;
int rank_batch_open(rank_batch *rb, comm *c, int b, int T, int vocab, int seed);
void rank_batch_next(rank_batch *rb);
void rank_batch_close(rank_batch *rb);

/* Bytes as MiB (2^20), and what engine e's allocations tagged `tag` hold
 * now, in MiB (0 for a tag never used). */
static inline double mib(double bytes) { return bytes / 1048576.0; }
double tag_mib(engine *e, const char *tag);

/* What every rank of a data-parallel job (ddp, fsdp) sets up alike once
 * its communicator c is open: rank and world size, the batches
 * (rank_batch), the engine (engine_for_rank), `nseries` per-step series
 * of loop->steps doubles each, zeroed, and the engine's peak at three
 * moments (dp_peak). dp_rank_close frees what dp_rank_open made, in any
 * state it left (memset first), but not c: the job closes its
 * communicators after the engine, as it opened them before. */
typedef struct dp_rank {
  comm *c;
  engine *e;
  int rank, world;
  int cpu_threads;      /* the CPU engine's threads per rank; 0 on GPUs */
  int steps;            /* each series' length: timed steps */
  rank_batch rb;
  double *series;       /* [nseries][steps] */
  double mem_init, mem_before, mem_after;   /* dp_peak's, MiB */
  int stepped;          /* the first optimizer step is done */
} dp_rank;
int dp_rank_open(dp_rank *d, comm *c, const loop_settings *loop,
                 int rank_batch, int T, int vocab, int nseries);
void dp_rank_close(dp_rank *d);
static inline double *dp_series(dp_rank *d, int i) {
  return d->series + (size_t)i * (size_t)d->steps;
}
/* The engine's peak so far into mem_init (DP_SET_UP: model and sharding
 * made), mem_before or mem_after (around the first optimizer step; later
 * steps leave them). */
enum dp_moment { DP_SET_UP, DP_BEFORE_OPT, DP_AFTER_OPT };
void dp_peak(dp_rank *d, enum dp_moment m);
/* mem_init_mib, mem_before_opt_mib, mem_after_opt_mib and
 * activations_mib (the activations and inputs tags) into r. */
void dp_memory_results(result *r, const dp_rank *d);

/* CPU engine threads of one of `local` ranks sharing a node: `threads`
 * when set (> 0), else OpenMP's default shared evenly among them, at least
 * one each. Why not OpenMP's default for every rank: its threads spin at
 * barriers, so processes whose threads outnumber the cores slow each
 * other far beyond their share (three processes of two threads on two
 * cores: 35 times slower than one, 4 times with passive waiting). */
int cpu_threads_per_rank(int threads, int local);

/* Summary of n >= 1 timed samples: the sample standard deviation (n - 1)
 * is NaN for one sample; the median of an even count is the mean of the
 * middle two. */
typedef struct sample_stats {
  double mean, std, median, min, max;
} sample_stats;
/* v is left as it is (the samples keep their order for the samples file);
 * with no memory for the sorted copy, median, min and max are NaN. */
sample_stats stats_of(const double *v, int n);

/* NAME_mean and NAME_std of n samples into r; returns the mean. */
double set_mean_std(result *r, const char *name, const double *v, int n);

/* The columns every training job takes from its n >= 1 timed steps:
 * params, tokens_per_step, step_ms_mean, _std and _median, loss_first,
 * loss_last, engine_peak_mib, and the samples step_ms and loss. Returns
 * the mean step in ms. */
double train_step_results(result *r, engine *e, const model *m,
                          double tokens, const double *step_ms,
                          const double *loss, int n);

/* eng_monitor_begin (the GPU's clock and power) where it can run: 1 if a
 * monitor now runs, 0 where none can (the cpu engine, no NVML; the error
 * is cleared and the job's monitor columns stay empty). */
int monitor_try_begin(engine *e);

/* The metric names monitor_set writes, for a kind's metrics table. */
#define MONITOR_METRICS "gpu_sm_mhz", "gpu_power_w", "gpu_power_capped"

/* MONITOR_METRICS from one monitor's readings (none when it took none). */
void monitor_set(result *r, const eng_monitor *mon);

/* step(ctx, k) for k = 0 .. steps - 1, the GPU monitor around them; the
 * row gets MONITOR_METRICS over those steps: of every rank's GPU (each
 * rank calls this, in step with the others) the lowest mean SM clock (the
 * slowest GPU paces a synchronous step), the highest mean power and the
 * highest power-capped share; none where no rank could read them. */
int monitored_steps(engine *e, int steps, int (*step)(void *ctx, int k),
                    void *ctx, result *r);

/* One more, untimed step(ctx, -1) of a multi-rank training job with every
 * operation of the model bracketed by events on the compute stream: where
 * the time goes, by kernel family, while the collectives run beside it.
 * Rank 0 writes it to the message: "rank 0[ (CPU threads per rank: N)]
 * WHAT, ms per step by kernel family: ..." (WHAT: ", ..." or ""). Every
 * rank calls this, in step with the others. */
int family_message(engine *e, int (*step)(void *ctx, int k), void *ctx,
                   int rank, int cpu_threads, const char *what, result *r);

#endif
