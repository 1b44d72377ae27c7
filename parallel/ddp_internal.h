/* What the files of parallel/ddp*.c share: the container's state. */
#ifndef TL_DDP_INTERNAL_H
#define TL_DDP_INTERNAL_H

#include "parallel/buckets.h"
#include "parallel/ddp.h"
#include "parallel/dp_events.h"

struct ddp {
  comm *c;                 /* gradient collectives */
  comm *pc;                /* parameter collectives (c unless given one) */
  dp_model m;
  engine *e;
  int rank, world;
  ddp_strategy strategy;
  ddp_optimizer opt;
  ddp_sync sync;
  float *gathered;         /* allgather: [W x nparams], bucket b's W copies
                              at W*start .. W*(start+count) */
  int placed;              /* allgather: the model's gradients live in
                              gathered (this rank's blocks) */
  int windows;             /* allgather on NCCL: gathered is a registered
                              symmetric window */
  float *sym_grads;        /* alltoall: the model's gradients,
                              placed in a symmetric buffer (same offsets) */
  float *received;         /* alltoall: [nparams], bucket b's W received
                              chunks at start + r*chunk */
  int recv_windows;        /* alltoall on NCCL: both registered */
  int adamw_sms;           /* allgather: AdamW's block cap beside backward
                              (ddp_set_adamw_sms; 0: none) */
  int bwd_ended;           /* the host has seen this step's ev_bwd_end
                              complete */
  float *sym_params;       /* alltoall: the model's weights, placed in a
                              buffer that joins a window of pc */
  int param_window;        /* alltoall on NCCL: sym_params registered */
  void *ostream;           /* allgather, alltoall on GPUs: AdamW's stream
                              (lowest priority), each bucket's update (and
                              with alltoall its chunk's all-gather) queued
                              from its launch, so it runs during backward */
  dp_event ev_odone;       /* ostream: every bucket's AdamW queued */
  /* ostream with a strategy that launches from the hook: each bucket's
   * collective is issued once the host sees its ready event complete, and
   * its AdamW once its collective's end event has, so no stream waits on
   * the device while backward runs (measured: the comm stream's pending
   * waits cost backward 3.5 ms a step, reports/data/ddp_diag.csv). */
  int gated;
  int *gate_q, gate_head, gate_tail;   /* [nb] launched buckets not done */
  int head_stage;          /* the head's: 0 before its collective, 1 before
                              its AdamW, 2 (ZeRO-1) before its all-gather */
  adamw_config hp;
  int gpu;                 /* CUDA engine + NCCL: events on streams */
  void *cstream, *kstream; /* compute (engine) and communication streams */
  void *pstream;           /* pc's stream (parameter collectives) */
  int *has_grad;           /* [nviews] */
  dp_plan plan;
  int in_hook;             /* strategies that launch from the hook */
  long long step;          /* optimizer steps taken */

  /* Gradient collectives: one slot per bucket. */
  comm_req **grad_req;     /* [nb] */
  dp_event *ev_ready;      /* [nb] compute: the bucket is scaled and final */
  dp_event *ev_cstart, *ev_cend;   /* [nb] comm stream around the op */
  int *issue_order;        /* [nb] bucket indices in issue order */
  int nissued;

  /* Parameter collectives (sharded: one broadcast per owner; zero1: one
   * all-gather per bucket). */
  int nparam_slots;        /* max(nb, world) */
  comm_req **param_req;
  dp_event *ev_pready, *ev_pstart, *ev_pend;
  int *param_order;
  int nparam_issued;

  /* Backward timeline. */
  dp_event *ev_view;       /* [nviews] compute, at each hook */
  int *hook_view;          /* [nviews] */
  int nhooks;
  dp_event ev_step0, ev_bwd0, ev_bwd_end, ev_comm_done, ev_opt0,
      ev_param_done, ev_opt_end;

  /* Sharded optimizers: this rank's AdamW moments ("adam_m", "adam_v"). */
  float *m_state, *v_state;
  size_t state_elems;
  int *owner;              /* sharded: [nviews] owning rank */
  size_t *own_lo, *own_hi; /* sharded: [world] flat range of each owner */

  /* Step information scratch (ddp_step_info_get). */
  double *hook_ms;
  ddp_op_time *grad_times, *param_times;
  double grad_bytes, param_bytes, wire_bytes;
};

/* ddp_optim.c */
int ddp_optim_setup(ddp *d);
/* allgather, alltoall on GPUs: bucket i's AdamW on ostream after its
 * collective (alltoall: then the all-gather of its updated chunk). */
int ddp_optim_bucket(ddp *d, int i);
/* alltoall: bucket i's all-gather of the updated chunks (gated: issued by
 * the host once it saw the chunk's AdamW complete). */
int ddp_optim_gather(ddp *d, int i);
int ddp_optim_step(ddp *d);
void ddp_optim_free(ddp *d);

#endif
