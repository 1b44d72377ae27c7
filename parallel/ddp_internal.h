/* What the files of parallel/ share for ddp.h: the container's state and
 * the helpers its stages (stages.h) call. */
#ifndef TL_DDP_INTERNAL_H
#define TL_DDP_INTERNAL_H

#include "parallel/buckets.h"
#include "parallel/ddp.h"
#include "parallel/dp_events.h"
#include "parallel/stages.h"

/* Collectives of one communicator, one slot each: its request, events
 * around it (start, end on the communicator's stream; ready where what it
 * waits for was queued) and the order they were issued in this step. */
typedef struct dp_slots {
  int n;
  comm_req **req;          /* [n] */
  dp_event *ready, *start, *end;   /* [n] */
  int *order;              /* [n] slots in issue order */
  int nissued;
  ddp_op_time *times;      /* [n] ddp_step_info_get's */
} dp_slots;

struct ddp {
  comm *c;                 /* gradient collectives */
  comm *pc;                /* parameter collectives (c unless given one) */
  dp_model m;
  engine *e;
  int rank, world;
  const dp_sync_form *syncf;    /* the settings' stages (stages.h) */
  const dp_optim_form *optim;
  dp_schedule sched;       /* what a step does, bucket by bucket */
  float *gathered;         /* allgather: [W x nparams], bucket b's W copies
                              at W*start .. W*(start+count) */
  int placed;              /* allgather, alltoall: the model's gradients
                              live in gathered / sym_grads */
  int windows;             /* allgather on NCCL: gathered is a registered
                              symmetric window */
  float *sym_grads;        /* alltoall: the model's gradients,
                              placed in a symmetric buffer (same offsets) */
  float *received;         /* alltoall: [nparams], bucket b's W received
                              chunks at start + r*chunk */
  int recv_windows;        /* alltoall on NCCL: both registered */
  int adamw_sms;           /* AdamW's block cap beside backward for stages
                              marked capped (ddp_set_adamw_sms; 0: none) */
  int bwd_ended;           /* the host has seen this step's ev_bwd_end
                              complete */
  float *sym_params;       /* alltoall: the model's weights, placed in a
                              buffer that joins a window of pc */
  int param_window;        /* alltoall on NCCL: sym_params registered */
  /* The optimizer stream's engines: views of the model's engine on
   * ostream, the second with AdamW held to adamw_sms blocks (NULL without
   * ostream; the capped one also with adamw_sms 0). */
  engine *oe, *oe_capped;
  void *ostream;           /* the optimizer stream (DP_OPTIM; lowest
                              priority): created when a stage runs on it */
  dp_event ev_odone;       /* ostream: every bucket's update queued */
  /* Gated stages: launched buckets not done, in launch order; the head's
   * next op is head_op. One bucket at a time keeps the two communicators'
   * operations in one order on every rank. */
  int *gate_q, gate_head, gate_tail;   /* [nb] */
  int head_op;
  adamw_config hp;
  int gpu;                 /* CUDA engine + NCCL: events on streams */
  void *cstream, *kstream; /* compute (engine) and communication streams */
  void *pstream;           /* pc's stream (parameter collectives) */
  int *has_grad;           /* [nviews] */
  dp_plan plan;
  long long step;          /* optimizer steps taken */

  dp_slots gs;             /* gradient collectives: slot i for bucket i;
                              ready[i] on compute: the bucket is final */
  dp_slots ps;             /* parameter collectives (sharded: one
                              broadcast per owner, zero1: one all-gather
                              per bucket; max(nb, world) slots); ready[i]:
                              the update it sends is done */

  /* Backward timeline. */
  dp_event *ev_view;       /* [nviews] compute, at each hook */
  int *hook_view;          /* [nviews] */
  int nhooks;
  dp_event ev_step0, ev_bwd0, ev_bwd_end, ev_comm_done, ev_opt0,
      ev_param_done, ev_opt_end;

  /* The optimizer's own AdamW moments ("adam_m", "adam_v"). */
  float *m_state, *v_state;
  size_t state_elems;
  int *owner;              /* sharded: [nviews] owning rank */
  size_t *own_lo, *own_hi; /* sharded: [world] flat range of each owner */

  /* Step information scratch (ddp_step_info_get). */
  double *hook_ms;
  double grad_bytes, param_bytes, wire_bytes;
};

/* ddp.c */
/* Engine memory under `tag` that can join a symmetric window of c. */
int ddp_window_alloc(ddp *d, comm *c, size_t bytes, const char *tag,
                     void **p);
/* The collectives issued on c in slots s: on GPUs `done` recorded on
 * `stream` after them; on CPUs each waited for in issue order, its end
 * recorded, then `done`. */
int ddp_complete(ddp *d, comm *c, void *stream, dp_slots *s, dp_event *done);
/* `done` recorded on stream, and the compute stream waits for it. */
int ddp_join(ddp *d, dp_event *done, void *stream);

/* ddp_optim.c: what the optimizer forms share */
int ddp_optim_state_alloc(ddp *d);       /* state_elems of m and v */
void ddp_optim_free(ddp *d);
/* k_adamw over [lo, lo + n) on e, gradient in place / the mean of W
 * copies */
int ddp_adamw(ddp *d, engine *e, size_t lo, size_t n, size_t state_at);
int ddp_adamw_mean(ddp *d, engine *e, size_t lo, const float *const *g,
                   size_t n, size_t state_at);
/* AdamW on the elements of [lo, hi) (inside bucket i) of views with
 * gradients, state from state_at for element lo, the gradient read as the
 * bucket's collective left it. */
int ddp_adamw_range(ddp *d, engine *e, int i, size_t lo, size_t hi,
                    size_t state_at);
/* The op DP_OP_ADAMW of bucket i on the optimizer stream, after its
 * collective. */
int ddp_optim_bucket(ddp *d, int i);
/* A parameter collective in slot k, after the work queued on `stream`;
 * and its end. */
int ddp_param_begin(ddp *d, int k, void *stream);
int ddp_param_end(ddp *d, int k);
/* The op DP_OP_ALLGATHER_PARAMS of bucket i, after ps.ready[i] (gated:
 * seen complete by the host; else waited for on the device). */
int ddp_optim_gather(ddp *d, int i);

#endif
