/* Data-parallel training over W ranks, and optimizer-state sharding.
 *
 * A step on every rank:
 *     ddp_begin_step        zero gradients, arm the buckets
 *     forward on this rank's slice of the global batch (B/W sequences)
 *     ddp_mark_backward     (optional: timeline only)
 *     backward              hooks fire as each gradient is final
 *     ddp_finish_gradient_synchronization
 *     ddp_optimizer_step
 * Weights are broadcast from rank 0 by ddp_create, so ranks start equal.
 * Each rank's loss is the mean over its slice; the gradient of the global
 * mean is the average of the ranks' gradients (COMM_AVG: NCCL's ncclAvg
 * divides inside the reduction, no separate 1/W pass).
 *
 * Three settings choose the stages of a step (parallel/stages.h), and
 * ddp_create turns them, with the bucket plan (buckets.h), into a schedule:
 * per bucket, when its gradient collective is issued, the operations that
 * follow it and the stream of each; then what finish and the optimizer
 * step do. The step executes that schedule (ddp.c); ddp_schedule_print
 * shows it, and tests/test_ddp.c checks it for the settings below.
 *
 * Strategies (which buckets, and when each is issued):
 *   naive     one bucket per parameter tensor, issued after backward
 *   flat      one bucket for everything, issued after backward
 *   overlap   one bucket per tensor, issued from the backward hook the
 *             moment that tensor's gradient is final
 *   bucketed  tensors grouped in reverse order into buckets of at most
 *             bucket_mib MiB (2^20 bytes, as PyTorch's bucket_cap_mb), each
 *             issued from the hook that makes its last gradient final
 * Optimizers (parallel/optim_*.c):
 *   adamw     the model's own AdamW, full state on every rank (or, when
 *             the gradients arrive as W copies, grad_sync allgather, its
 *             own full state and AdamW per bucket, averaging the copies)
 *   sharded   the handout's form: whole tensors assigned to ranks
 *             (contiguous runs balanced by size); each rank keeps AdamW
 *             state for its own, updates them, then each owner broadcasts
 *             its updated run. Gradients are all-reduced by any strategy.
 *   zero1     ZeRO stage 1: buckets cut at multiples of W; each bucket is
 *             reduce-scattered (in place) instead of all-reduced, AdamW
 *             runs on this rank's chunk of every bucket, and the chunks
 *             are all-gathered (in place); the last nparams mod W elements
 *             (the tail) are all-reduced and updated on every rank.
 *             Allowed with flat and bucketed only (ddp_check_combination).
 * Gradient synchronisation (grad_sync, parallel/sync_*.c), the collective
 * that moves a bucket and how AdamW reads what it left:
 *   allreduce  an all-reduce with COMM_AVG in place (NCCL: kernels on SMs);
 *              zero1's reduce-scatter. AdamW reads the mean in place.
 *   allgather  every rank's raw bucket is all-gathered, in place, into a
 *              buffer of W copies ("grads.gathered", W x the gradients;
 *              bucket b's copies side by side at W*start), and AdamW
 *              averages the W copies as it reads them (k_adamw_mean). The
 *              model's gradients are placed inside that buffer (each
 *              rank's own block of each bucket, dp_model.place_grads), so
 *              nothing is copied locally. For 2 ranks this moves the same
 *              bytes as a ring all-reduce. On NCCL >= 2.28 with a zero-CTA
 *              communicator (comm_options.zero_cta) the buffer is a
 *              symmetric window (comm_sym_alloc) and the copy engines move
 *              the bytes: backward keeps every SM. Allowed with optimizer
 *              adamw only; any strategy.
 *   alltoall   ZeRO-1's reduce-scatter without the reduction: each bucket's
 *              raw gradients go through an all-to-all, so rank r receives
 *              chunk r of every rank's bucket ("grads.received", the W
 *              copies of bucket b's chunk side by side at its start), and
 *              AdamW on chunk r averages them as it reads them
 *              (k_adamw_mean); the updated chunks are all-gathered as
 *              zero1 does. Moves what a reduce-scatter moves. The weights
 *              move to a buffer of the parameter communicator's
 *              (dp_model.place_params), the gradients to one of their own
 *              ("grads.sym", same offsets). On NCCL >= 2.28 with zero-CTA
 *              communicators, those two and the received copies are
 *              symmetric windows, so the copy engines move all of it.
 *              Allowed with optimizer zero1 only (so flat or bucketed).
 * Where the gradients arrive as copies (allgather, alltoall) on GPUs, each
 * bucket's AdamW (and with zero1 then the all-gather of its chunk) is
 * queued as soon as the bucket's collective is done, on a stream of its
 * own (least priority, below the compute stream), so the optimizer runs
 * during backward (as PyTorch DDP's _register_fused_optim does): safe
 * because the hook fires only once backward reads the bucket's parameters
 * no more, and a rank's all-gather writes into a peer's weights only after
 * that peer took part in the bucket's collective. From the hook those
 * stages are gated: the host issues each operation once it sees the one
 * before complete, so no stream waits on the device while backward runs
 * (ddp.c says what that measured). Elsewhere the updates run in
 * ddp_optimizer_step, after every gradient collective.
 * Everything communicated is fp32: gradients (fp32 in every precision, the
 * project's mixed-precision policy keeps master weights and gradients fp32)
 * and parameters. At world size 1 nothing is communicated and every
 * optimizer is the model's own: the single-GPU baseline.
 *
 * On GPUs (NCCL comm, CUDA engine): collectives run on the communicator's
 * stream, each ordered after the compute stream by an event recorded in the
 * hook (cudaEventRecord / cudaStreamWaitEvent) or seen complete by the
 * host, never by a host wait; the compute stream waits the same way for
 * the communication before the optimizer and before the next forward.
 * Wait handles are released at the next ddp_begin_step (complete by then
 * when the caller synchronised).
 * On CPUs (MPI comm, CPU engine) collectives are MPI non-blocking calls
 * completed in finish / optimizer_step. */
#ifndef TL_DDP_H
#define TL_DDP_H

#include <stdio.h>

#include "collective/comm.h"
#include "parallel/dp_model.h"

typedef enum { DDP_NAIVE, DDP_FLAT, DDP_OVERLAP, DDP_BUCKETED } ddp_strategy;
typedef enum { DDP_OPT_ADAMW, DDP_OPT_SHARDED, DDP_OPT_ZERO1 } ddp_optimizer;
typedef enum { DDP_SYNC_ALLREDUCE, DDP_SYNC_ALLGATHER, DDP_SYNC_ALLTOALL }
    ddp_sync;

extern const char *const ddp_strategy_names[];    /* NULL-terminated */
extern const char *const ddp_optimizer_names[];
extern const char *const ddp_sync_names[];
int ddp_strategy_parse(const char *s, ddp_strategy *out);   /* -1: unknown */
int ddp_optimizer_parse(const char *s, ddp_optimizer *out);
int ddp_sync_parse(const char *s, ddp_sync *out);
/* 0 if the combination is allowed, else -1 with "what is wrong (allowed:
 * ...)" in err. bucket_mib must be > 0 for bucketed and 0 otherwise. */
int ddp_check_combination(ddp_strategy s, ddp_optimizer o, double bucket_mib,
                          ddp_sync y, char *err, size_t n);


typedef struct ddp ddp;

/* c carries the gradient collectives; pc (NULL: c) the sharded optimizers'
 * parameter broadcasts / all-gathers, on its own stream. On GPUs the two
 * want different settings: gradient collectives overlap backward, so they
 * should hold few SMs (comm_options.max_ctas); parameter collectives run
 * beside AdamW only and may take NCCL's full width. */
int ddp_create(ddp **out, comm *c, comm *pc, const dp_model *m,
               ddp_strategy s, double bucket_mib, ddp_optimizer o,
               ddp_sync y, const adamw_config *opt);
void ddp_destroy(ddp *d);
int ddp_begin_step(ddp *d);
int ddp_mark_backward(ddp *d);
int ddp_finish_gradient_synchronization(ddp *d);
int ddp_optimizer_step(ddp *d);
/* grad_sync allgather on GPUs: each bucket's AdamW, which runs beside
 * backward, holds at most n SMs (a view with eng_ctx.adamw_blocks: one
 * block per SM, fed by bulk copies on Hopper); buckets whose AdamW is issued once
 * backward has ended take the whole GPU. 0 (the default): every AdamW as
 * wide as its work. Measured on 2 x H200 (xl bf16, context 128, 2
 * sequences per GPU, 250 MiB buckets): uncapped, AdamW's blocks beside
 * backward's products slow backward by about as much as AdamW takes alone;
 * capped at 32 with the products shaped for the other SMs
 * (eng_ctx.sm_reserve) and the whole GPU after backward, the step went from
 * about 58 to about 56.5 ms. Other forms: ignored. */
int ddp_set_adamw_sms(ddp *d, int n);
/* The step's schedule (stages.h) as text: per bucket when it is issued and
 * its operations on their streams, then what finish and the optimizer step
 * do. */
int ddp_schedule_print(const ddp *d, FILE *f);

/* What the last step did, read after the caller synchronised the engine
 * (eng_sync) following ddp_optimizer_step. Times in ms from the step's
 * start (ddp_begin_step); GPU times from CUDA events on the streams, CPU
 * times from the wall clock (a CPU collective's end is when its wait
 * returned). */
typedef struct ddp_op_time {
  int bucket;            /* bucket index, or owner rank for a broadcast */
  double start_ms, end_ms;
} ddp_op_time;

typedef struct ddp_step_info {
  double bwd_start_ms, bwd_end_ms;   /* end: finish_gradient_sync called */
  int nhooks;
  const int *hook_view;              /* [nhooks] views in hook order */
  const double *hook_ms;             /* [nhooks] when each was final */
  int ngrad_ops, nparam_ops;
  const ddp_op_time *grad_ops;       /* gradient collectives, issue order */
  const ddp_op_time *param_ops;      /* parameter broadcasts / all-gathers */
  double grad_comm_ms;     /* sum of the gradient collectives' durations */
  double exposed_ms;       /* last gradient collective's end - bwd_end (>= 0) */
  double opt_ms;           /* optimizer start to its last collective's end
                              (allgather on GPUs: what is left of the
                              optimizer after backward) */
  double param_comm_ms;    /* sum of the parameter collectives' durations */
  double grad_bytes, param_bytes;    /* bytes handed to collectives, per rank */
  double wire_bytes;       /* bytes each rank sends per step, ring
                              algorithms: all-reduce 2(W-1)/W S, reduce-
                              scatter and all-gather (W-1)/W S, broadcast
                              of S from one owner: (W-1)/W S averaged;
                              allgather sync of a bucket of S: (W-1) S */
  int nbuckets;            /* active gradient collectives per step */
  size_t state_elems;      /* AdamW moments elements each (m and v) here */
} ddp_step_info;
int ddp_step_info_get(ddp *d, ddp_step_info *info);

#endif
