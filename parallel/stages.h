/* The stages of a data-parallel step (ddp.h) and the schedule that strings
 * them together.
 *
 * Three small interfaces, each implementation in a file of its own and
 * registered in the tables of parallel/schedule.c:
 *   dp_grad_coll  a collective that moves one bucket's gradients (all-
 *                 reduce, reduce-scatter: sync_allreduce.c; all-gather:
 *                 sync_allgather.c; all-to-all: sync_alltoall.c), and how
 *                 AdamW reads what it left (the mean in place, or W copies
 *                 averaged as they are read);
 *   dp_sync_form  a grad_sync setting: its buffers and placements, and
 *                 which collective a bucket takes for an optimizer that
 *                 updates whole buckets or this rank's chunk of each;
 *   dp_optim_form an optimizer setting (optim_adamw.c, optim_sharded.c,
 *                 optim_zero1.c): its state, a bucket's update, and what
 *                 its step does beside the buckets.
 *
 * The schedule is data built once by ddp_create from the three settings,
 * the world size, whether the streams are CUDA's, and the bucket plan: per
 * bucket the operations in order (gradient collective, then possibly its
 * AdamW, then possibly the all-gather of the updated chunks), the stream of
 * each, when the first is issued (at the backward hook that makes the
 * bucket final, or after backward), how many are queued right then (the
 * rest run in ddp_optimizer_step) and whether the host gates each on the
 * previous one's completion; and the step's own actions. ddp.c executes it
 * and does nothing the schedule does not say; dp_schedule_print writes it.
 * Invariant: dp_schedule_make reads no communicator and no engine, so a
 * test can build a GPU schedule on a CPU. */
#ifndef TL_STAGES_H
#define TL_STAGES_H

#include <stddef.h>
#include <stdio.h>

#include "parallel/buckets.h"
#include "parallel/ddp.h"

typedef enum {
  DP_OP_ALLREDUCE,        /* gradients: all-reduce with COMM_AVG, in place */
  DP_OP_REDUCE_SCATTER,   /* gradients: reduce-scatter with COMM_AVG, in
                             place (chunk r of the bucket on rank r) */
  DP_OP_ALLGATHER_GRADS,  /* gradients: every rank's raw bucket, W copies */
  DP_OP_ALLTOALL,         /* gradients: raw chunk r of every rank on rank r */
  DP_OP_ADAMW,            /* the bucket's update (the optimizer form's) */
  DP_OP_ALLGATHER_PARAMS, /* the updated chunks all-gathered in place */
  DP_NOPS
} dp_op;
extern const char *const dp_op_names[];          /* [DP_NOPS] */

typedef enum { DP_COMPUTE, DP_COMM, DP_OPTIM, DP_PARAM } dp_stream_id;
extern const char *const dp_stream_names[];      /* compute stream (the
                                                    engine's), gradient
                                                    communicator's, the
                                                    optimizer's, parameter
                                                    communicator's */
typedef enum { DP_AT_HOOK, DP_AFTER_BACKWARD } dp_when;

enum { DP_MAX_OPS = 3 };

typedef struct dp_stage {
  int active;            /* the bucket has gradients: communicated */
  dp_when when;          /* when op[0] is issued */
  int gated;             /* the host issues op[k] once it sees op[k-1] (or
                            the bucket's gradients) complete, no device
                            waits while backward runs */
  int nops;              /* op[0] the gradient collective */
  int nlaunch;           /* op[0..nlaunch) queued as the bucket launches;
                            op[nlaunch..nops) in ddp_optimizer_step */
  dp_op op[DP_MAX_OPS];
  dp_stream_id on[DP_MAX_OPS];
  int capped;            /* its AdamW held to ddp_set_adamw_sms's blocks
                            while backward runs */
} dp_stage;

typedef struct dp_schedule {
  ddp_strategy strategy;
  ddp_optimizer opt;
  ddp_sync sync;
  int world, gpu;
  const dp_plan *plan;   /* not owned: the buckets' ranges */
  dp_stage *st;          /* [plan->nb], per bucket */
  /* the step after backward */
  int compute_waits_comm;  /* GPU: the compute stream waits for every
                              gradient collective before the optimizer */
  /* the optimizer step, in this order: */
  int model_step;          /* the model's own AdamW over everything (and
                              nothing else) */
  int compute_waits_optim; /* GPU: waits for the optimizer stream, where
                              every bucket's update was queued */
  int ops_in_step;         /* some bucket has ops left for the step ... */
  int in_issue_order;      /* ... run in issue order (else bucket order) */
  int owned;               /* sharded: AdamW on this rank's views, then a
                              broadcast of each owner's run */
  int param_ops;           /* then waits for the parameter collectives */
} dp_schedule;

int dp_schedule_make(dp_schedule *s, ddp_strategy strategy, ddp_optimizer o,
                     ddp_sync y, int world, int gpu, const dp_plan *plan);
void dp_schedule_free(dp_schedule *s);
/* One line per bucket, then the step's. */
void dp_schedule_print(const dp_schedule *s, FILE *f);
/* The strategy's bucket cap in elements (buckets.h's cap). */
size_t dp_strategy_cap(ddp_strategy s, double bucket_mib);

/* ---- the stages' interfaces ---------------------------------------------- */

typedef struct dp_grad_coll {
  /* Bucket b's collective on the gradient communicator, its request in
   * *req; adds the bytes each rank sends to d->wire_bytes. */
  int (*issue)(ddp *d, const dp_bucket *b, comm_req **req);
  /* AdamW over elements [lo, lo + n) of bucket b, whose gradient this
   * collective left, state from state_at. */
  int (*adamw)(ddp *d, engine *e, const dp_bucket *b, size_t lo, size_t n,
               size_t state_at);
} dp_grad_coll;
/* [op] for the gradient collectives, NULL for the rest */
extern const dp_grad_coll *const dp_grad_colls[DP_NOPS];

typedef struct dp_sync_form {
  dp_op whole;           /* a bucket's collective when it is updated whole */
  dp_op chunked;         /* when rank r updates chunk r (ZeRO-1); DP_NOPS:
                            not with such an optimizer */
  int copies;            /* W copies reach the optimizer, which averages
                            them: it updates bucket by bucket, on GPUs each
                            as soon as its collective is done */
  int capped;            /* those updates held to ddp_set_adamw_sms */
  int (*setup)(ddp *d);  /* buffers, placements (NULL: none) */
  void (*release)(ddp *d);
} dp_sync_form;
extern const dp_sync_form *const dp_sync_forms[];   /* [ddp_sync] */

typedef struct dp_optim_form {
  int chunked;           /* updates chunk r of each bucket (buckets split
                            in W; the tail whole) */
  int per_bucket;        /* updates bucket by bucket (else only when the
                            gradients come as copies) */
  int model_step;        /* the model's own AdamW when the gradients are
                            averaged in place */
  int param_ops;         /* parameter collectives follow its updates */
  int (*setup)(ddp *d);  /* its state (after the schedule) */
  int (*bucket)(ddp *d, engine *e, int i);   /* bucket i's update, its
                                               calls on e; NULL: none */
  int (*step)(ddp *d);   /* in the step after the buckets'; NULL: none */
} dp_optim_form;
extern const dp_optim_form *const dp_optim_forms[]; /* [ddp_optimizer] */

extern const dp_sync_form dp_sync_allreduce, dp_sync_allgather,
    dp_sync_alltoall;
extern const dp_grad_coll dp_coll_allreduce, dp_coll_reduce_scatter,
    dp_coll_allgather, dp_coll_alltoall;
extern const dp_optim_form dp_optim_adamw, dp_optim_sharded, dp_optim_zero1;

#endif
