/* The data-parallel container (ddp.h): weights broadcast at creation, the
 * step's schedule (stages.h) built once and executed, and the step's
 * timeline.
 *
 * Executing a bucket's stage: launching bucket b records gs.ready[b] on
 * the compute stream (at its hook, or in finish: the stage's `when`); then
 *   not gated: the comm stream waits for gs.ready[b]; op 0 (the collective,
 *              gs.start[b] and gs.end[b] recorded around it on the comm
 *              stream) and the other ops queued at launch, each ordered
 *              after the one before by an event the next stream waits for;
 *   gated:     b joins a queue; at every hook and in finish the host issues
 *              the head's next op once it sees the event before it
 *              complete (cudaEventQuery: gs.ready, gs.end, ps.ready),
 *              so no stream waits on the device while backward runs.
 *              Measured on 2 x H200: the comm
 *              stream's pending waits cost backward 3.5 ms a step with no
 *              byte moved; ZeRO-1's bf16 step went from 60.8 to 56.7 ms.
 *              One bucket at a time keeps the two communicators' operations
 *              in one order on every rank: two ranks issuing them in
 *              different orders could deadlock where their streams share a
 *              hardware queue. The price: small buckets wait for the host
 *              at each op (ZeRO-1 bf16 at 25 MiB: 75.6 ms a step against
 *              55.0 at 250 MiB, 2 x H200).
 * The issue order is the hook order, identical on every rank, as NCCL and
 * MPI need. finish: record bwd_end on compute; launch the stages issued
 * after backward (gated: issue the rest, the host spinning); then GPU:
 * record comm_done on the comm stream (the compute stream waits for it
 * where the schedule says); CPU: wait for every request. The optimizer
 * step runs the ops the stages left for it, then the optimizer form's own
 * step, then waits for the parameter collectives. */
#include "config.h"
#include "parallel/ddp_internal.h"

#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/check.h"

static int sym_alloc(void *ctx, size_t bytes, void **p) {
  return comm_sym_alloc(ctx, bytes, p);
}
static void sym_free(void *ctx, void *p) { comm_sym_free(ctx, p); }

/* NCCL: ncclMemAlloc through the tag's allocator; MPI: the engine's own. */
int ddp_window_alloc(ddp *d, comm *c, size_t bytes, const char *tag,
                     void **p) {
  int nccl = comm_get_backend(c) == COMM_NCCL;
  eng_allocator a = {sym_alloc, sym_free, c};
  if (nccl) TRY(eng_set_tag_allocator(d->e, tag, &a));
  int rc = eng_alloc(d->e, bytes, tag, p);
  if (nccl) TRY(eng_set_tag_allocator(d->e, tag, NULL));
  TRY(rc);
  return 0;
}

int ddp_complete(ddp *d, comm *c, void *stream, dp_slots *s, dp_event *done) {
  if (d->gpu) {
    TRY(dp_event_record(done, stream));
    return 0;
  }
  for (int k = 0; k < s->nissued; k++) {
    int i = s->order[k];
    comm_req *q = s->req[i];
    s->req[i] = NULL;
    TRY(comm_wait(c, q));
    TRY(dp_event_record(&s->end[i], NULL));
  }
  TRY(dp_event_record(done, NULL));
  return 0;
}

int ddp_join(ddp *d, dp_event *done, void *stream) {
  TRY(dp_event_record(done, stream));
  TRY(dp_stream_wait(d->kstream, done));
  return 0;
}

/* ---- executing the schedule ---------------------------------------------- */

/* Op 0: bucket i's gradient collective on the comm stream. */
static int issue(ddp *d, int i) {
  dp_bucket *b = &d->plan.b[i];
  TRY(dp_event_record(&d->gs.start[i], d->cstream));
  ASSERT(d->gs.req[i] == NULL);
  TRY(dp_grad_colls[d->sched.st[i].op[0]]->issue(d, b, &d->gs.req[i]));
  d->grad_bytes += (double)b->count * 4;
  if (d->gpu) TRY(dp_event_record(&d->gs.end[i], d->cstream));
  d->gs.order[d->gs.nissued++] = i;
  return 0;
}

/* Op k of bucket i's stage. An update followed by a parameter collective
 * records ps.ready[i] on its stream: what the collective waits for (gated:
 * what the host sees complete first). */
static int run_op(ddp *d, int i, int k) {
  const dp_stage *t = &d->sched.st[i];
  switch (t->op[k]) {
  case DP_OP_ADAMW:
    if (t->on[k] == DP_OPTIM) TRY(ddp_optim_bucket(d, i));
    else TRY(d->optim->bucket(d, d->e, i));
    if (k + 1 < t->nops)
      TRY(dp_event_record(&d->ps.ready[i],
                          t->on[k] == DP_OPTIM ? d->ostream : d->kstream));
    return 0;
  case DP_OP_ALLGATHER_PARAMS:
    return ddp_optim_gather(d, i);
  default:
    return issue(d, i);
  }
}

/* Gated stages: issue what the GPU has made ready, the head bucket's ops
 * in order, each once the host sees the one before complete, then the
 * next bucket. With block, until nothing is left (the host spins). */
static int pump(ddp *d, int block) {
  while (d->gate_head < d->gate_tail) {
    int j = d->gate_q[d->gate_head], k = d->head_op, done;
    const dp_stage *t = &d->sched.st[j];
    const dp_event *gate = k == 0                          ? &d->gs.ready[j]
                           : t->op[k - 1] == DP_OP_ADAMW ? &d->ps.ready[j]
                                                         : &d->gs.end[j];
    TRY(dp_event_done(gate, &done));
    if (!done) {
      if (!block) return 0;
      sched_yield();
      continue;
    }
    if (k > 0 && d->ev_bwd_end.recorded && !d->bwd_ended)
      TRY(dp_event_done(&d->ev_bwd_end, &d->bwd_ended));
    TRY(run_op(d, j, k));
    if (++d->head_op == t->nops) {
      d->head_op = 0;
      d->gate_head++;
    }
  }
  return 0;
}

static int launch(ddp *d, int i) {
  const dp_stage *t = &d->sched.st[i];
  TRY(dp_event_record(&d->gs.ready[i], d->kstream));
  if (t->gated) {
    d->gate_q[d->gate_tail++] = i;
    return pump(d, 0);
  }
  TRY(dp_stream_wait(d->cstream, &d->gs.ready[i]));
  for (int k = 0; k < t->nlaunch; k++) TRY(run_op(d, i, k));
  return 0;
}

static int hook(int view, void *arg) {
  ddp *d = arg;
  if (view < 0 || view >= d->m.nviews)
    FAIL(ERR_FAIL, "ddp: gradient hook for view %d of %d", view, d->m.nviews);
  TRY(dp_event_record(&d->ev_view[view], d->kstream));
  if (d->nhooks < d->m.nviews) d->hook_view[d->nhooks++] = view;
  if (d->world == 1) return 0;
  TRY(pump(d, 0));
  if (!d->has_grad[view]) return 0;
  for (int i = d->plan.view_first[view]; i <= d->plan.view_last[view]; i++) {
    dp_bucket *b = &d->plan.b[i];
    if (b->pending <= 0)
      FAIL(ERR_FAIL, "ddp: gradient of %s final twice in one step",
           d->m.views[view].name);
    if (--b->pending == 0 && d->sched.st[i].when == DP_AT_HOOK)
      TRY(launch(d, i));
  }
  return 0;
}

/* ---- create / destroy ------------------------------------------------------ */

static void *zalloc(size_t n, size_t size, int *bad) {
  void *p = calloc(n ? n : 1, size);
  if (!p) *bad = 1;
  return p;
}

static int events_init(dp_event *ev, int n, int gpu) {
  for (int i = 0; i < n; i++) TRY(dp_event_init(&ev[i], gpu));
  return 0;
}

/* Events: ordering ones on both streams; the comm stream's only on GPU. */
static int slots_init(dp_slots *s, int n, int gpu) {
  int bad = 0;
  s->n = n;
  s->req = zalloc((size_t)n, sizeof *s->req, &bad);
  s->ready = zalloc((size_t)n, sizeof(dp_event), &bad);
  s->start = zalloc((size_t)n, sizeof(dp_event), &bad);
  s->end = zalloc((size_t)n, sizeof(dp_event), &bad);
  s->order = zalloc((size_t)n, sizeof(int), &bad);
  s->times = zalloc((size_t)n, sizeof(ddp_op_time), &bad);
  if (bad) FAIL(ERR_OOM, "ddp: out of host memory for %d collectives", n);
  TRY(events_init(s->ready, n, gpu));
  TRY(events_init(s->start, n, gpu));
  TRY(events_init(s->end, n, gpu));
  return 0;
}

static int setup(ddp *d, ddp_strategy strategy, double bucket_mib,
                 ddp_optimizer o, ddp_sync y) {
  const dp_model *m = &d->m;
  int bad = 0, nv = m->nviews;
  d->has_grad = zalloc((size_t)nv, sizeof(int), &bad);
  if (bad) FAIL(ERR_OOM, "ddp: out of host memory");
  for (int v = 0; v < nv; v++) d->has_grad[v] = m->has_grad(m->impl, v) != 0;

  size_t align = d->optim->chunked ? (size_t)d->world : 1;
  TRY(dp_plan_make(&d->plan, m->views, nv, d->has_grad, m->nparams,
                   dp_strategy_cap(strategy, bucket_mib), align));
  TRY(dp_schedule_make(&d->sched, strategy, o, y, d->world, d->gpu,
                       &d->plan));
  int nb = d->plan.nb;
  TRY(slots_init(&d->gs, nb, d->gpu));
  TRY(slots_init(&d->ps, nb > d->world ? nb : d->world, d->gpu));
  d->gate_q = zalloc((size_t)nb, sizeof(int), &bad);
  d->ev_view = zalloc((size_t)nv, sizeof(dp_event), &bad);
  d->hook_view = zalloc((size_t)nv, sizeof(int), &bad);
  d->hook_ms = zalloc((size_t)nv, sizeof(double), &bad);
  if (bad) FAIL(ERR_OOM, "ddp: out of host memory for %d views", nv);
  TRY(events_init(d->ev_view, nv, d->gpu));
  dp_event *one[] = {&d->ev_step0, &d->ev_bwd0, &d->ev_bwd_end,
                     &d->ev_comm_done, &d->ev_opt0, &d->ev_param_done,
                     &d->ev_opt_end};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    TRY(dp_event_init(one[i], d->gpu));
  /* Ranks start equal: rank 0's weights everywhere (every tensor, frozen
   * ones included), in the model's own buffer before anything moves them
   * (broadcast after alltoall's placement, from a window of the other
   * communicator, test_ddp on NCCL 2.28.3 found the ranks' LM weights
   * different). Synchronous: nothing else is queued yet. */
  if (d->world > 1) {
    TRY(eng_sync(d->e));
    TRY(comm_broadcast_f32(d->c, m->params, m->nparams, 0, NULL));
  }
  if (d->world > 1 && d->syncf->setup) TRY(d->syncf->setup(d));
  if (d->sched.compute_waits_optim) {   /* stages on the optimizer stream */
    TRY(dp_stream_create(&d->ostream));
    TRY(dp_event_init(&d->ev_odone, 1));
    eng_ctx o = {d->ostream, 0, 0};
    TRY(eng_view(d->e, &o, &d->oe));
    TRY(ddp_set_adamw_sms(d, d->adamw_sms));
  }
  TRY(d->optim->setup(d));
  m->set_grad_hook(m->impl, hook, d);
  return 0;
}

int ddp_create(ddp **out, comm *c, comm *pc, const dp_model *m,
               ddp_strategy s, double bucket_mib, ddp_optimizer o,
               ddp_sync y, const adamw_config *opt) {
  char err[256];
  *out = NULL;
  if (ddp_check_combination(s, o, bucket_mib, y, err, sizeof err) != 0)
    FAIL(ERR_FAIL, "ddp: %s", err);
  ddp *d = calloc(1, sizeof *d);
  CHECK_ALLOC(d, sizeof *d);
  d->c = c;
  d->pc = pc ? pc : c;
  d->m = *m;
  d->e = m->e;
  d->rank = comm_rank(c);
  d->world = comm_size(c);
  /* one rank: nothing communicated, the model's own optimizer */
  if (d->world == 1) {
    o = DDP_OPT_ADAMW;
    y = DDP_SYNC_ALLREDUCE;
  }
  d->syncf = dp_sync_forms[y];
  d->optim = dp_optim_forms[o];
  if (d->syncf->copies && d->world > K_ADAMW_MAX_GRADS) {
    free(d);
    FAIL(ERR_FAIL, "ddp: grad_sync %s averages the ranks' copies in "
         "AdamW, at most %d (world size %d; allowed beyond that: "
         "allreduce)", ddp_sync_names[y], (int)K_ADAMW_MAX_GRADS,
         comm_size(c));
  }
  d->hp = *opt;
  d->kstream = eng_stream(d->e);
  d->cstream = comm_cuda_stream(c);
  d->pstream = comm_cuda_stream(d->pc);
  d->gpu = d->kstream != NULL;
  if ((d->kstream == NULL) != (d->cstream == NULL) && d->world > 1) {
    free(d);
    FAIL(ERR_FAIL, "ddp: the %s engine cannot run with the %s backend "
         "(allowed: cpu with mpi, cuda with nccl)", engine_name(m->e),
         comm_backend_name(comm_get_backend(c)));
  }
  if (comm_get_backend(d->pc) != comm_get_backend(c) ||
      comm_size(d->pc) != d->world || comm_rank(d->pc) != d->rank) {
    free(d);
    FAIL(ERR_FAIL, "ddp: the parameter communicator differs from the "
         "gradient one in backend, size or rank");
  }
  int rc = setup(d, s, bucket_mib, o, y);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    ddp_destroy(d);
    return rc;
  }
  *out = d;
  return 0;
}

/* Every request left in s waited for (complete when the caller
 * synchronised); the first failure returned after all were. */
static int drain(comm *c, dp_slots *s) {
  int rc = 0;
  for (int i = 0; s->req && i < s->n; i++)
    if (s->req[i]) {
      comm_req *q = s->req[i];
      s->req[i] = NULL;
      int r = comm_wait(c, q);
      if (r < 0 && rc == 0) rc = r;
    }
  return rc;
}

static void events_free(dp_event *ev, int n) {
  if (ev)
    for (int i = 0; i < n; i++) dp_event_destroy(&ev[i]);
  free(ev);
}

static void slots_free(dp_slots *s) {
  events_free(s->ready, s->n);
  events_free(s->start, s->n);
  events_free(s->end, s->n);
  free(s->req);
  free(s->order);
  free(s->times);
}

void ddp_destroy(ddp *d) {
  if (!d) return;
  int nv = d->m.nviews;
  if (drain(d->c, &d->gs) < 0) err_trace(__FILE__, __LINE__);
  if (drain(d->pc, &d->ps) < 0) err_trace(__FILE__, __LINE__);
  d->m.set_grad_hook(d->m.impl, NULL, NULL);
  engine_destroy(d->oe_capped);
  engine_destroy(d->oe);
  dp_stream_destroy(d->ostream);
  dp_event_destroy(&d->ev_odone);
  ddp_optim_free(d);
  if (d->syncf->release) d->syncf->release(d);
  slots_free(&d->gs);
  slots_free(&d->ps);
  events_free(d->ev_view, nv);
  dp_event *one[] = {&d->ev_step0, &d->ev_bwd0, &d->ev_bwd_end,
                     &d->ev_comm_done, &d->ev_opt0, &d->ev_param_done,
                     &d->ev_opt_end};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    dp_event_destroy(one[i]);
  free(d->gate_q);
  free(d->hook_view);
  free(d->hook_ms);
  free(d->has_grad);
  dp_schedule_free(&d->sched);
  dp_plan_free(&d->plan);
  free(d);
}

/* ---- a step ---------------------------------------------------------------- */

static void clear(dp_event *ev, int n) {
  for (int i = 0; i < n; i++) dp_event_clear(&ev[i]);
}

int ddp_begin_step(ddp *d) {
  /* The last step's handles: complete if the caller synchronised. */
  TRY(drain(d->c, &d->gs));
  TRY(drain(d->pc, &d->ps));
  dp_slots *both[] = {&d->gs, &d->ps};
  for (int k = 0; k < 2; k++) {
    clear(both[k]->ready, both[k]->n);
    clear(both[k]->start, both[k]->n);
    clear(both[k]->end, both[k]->n);
  }
  clear(d->ev_view, d->m.nviews);
  dp_event *one[] = {&d->ev_bwd0, &d->ev_bwd_end, &d->ev_comm_done,
                     &d->ev_opt0, &d->ev_param_done, &d->ev_opt_end};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    dp_event_clear(one[i]);
  d->gs.nissued = d->ps.nissued = d->nhooks = 0;
  d->gate_head = d->gate_tail = d->head_op = 0;
  d->bwd_ended = 0;
  d->grad_bytes = d->param_bytes = d->wire_bytes = 0;
  dp_plan_reset(&d->plan, d->m.views, d->m.nviews, d->has_grad);
  TRY(dp_event_record(&d->ev_step0, d->kstream));
  TRY(d->m.zero_grad(d->m.impl));
  return 0;
}

int ddp_set_adamw_sms(ddp *d, int n) {
  if (n < 0) FAIL(ERR_FAIL, "ddp_set_adamw_sms: n = %d (allowed: >= 0)", n);
  d->adamw_sms = n;
  if (!d->oe) return 0;   /* no optimizer stream: nothing runs capped */
  engine_destroy(d->oe_capped);
  d->oe_capped = NULL;
  eng_ctx c = {d->ostream, 0, n};
  return eng_view(d->e, &c, &d->oe_capped);
}

int ddp_mark_backward(ddp *d) {
  TRY(dp_event_record(&d->ev_bwd0, d->kstream));
  return 0;
}

int ddp_finish_gradient_synchronization(ddp *d) {
  TRY(dp_event_record(&d->ev_bwd_end, d->kstream));
  if (d->world == 1) return 0;
  for (int i = 0; i < d->plan.nb; i++) {
    const dp_stage *t = &d->sched.st[i];
    if (!t->active) continue;
    if (t->when == DP_AFTER_BACKWARD) {
      TRY(launch(d, i));
    } else if (d->plan.b[i].pending != 0) {
      for (int v = 0; v < d->m.nviews; v++)
        if (d->has_grad[v] && d->plan.view_first[v] <= i &&
            d->plan.view_last[v] >= i && !d->ev_view[v].recorded)
          FAIL(ERR_FAIL, "ddp: backward never finished the gradient of %s",
               d->m.views[v].name);
      FAIL(ERR_FAIL, "ddp: bucket %d never became ready", i);
    }
  }
  TRY(pump(d, 1));
  TRY(ddp_complete(d, d->c, d->cstream, &d->gs, &d->ev_comm_done));
  if (d->sched.compute_waits_comm)
    TRY(dp_stream_wait(d->kstream, &d->ev_comm_done));
  return 0;
}

/* What the schedule left for the step: the compute stream waits for the
 * updates queued on the optimizer stream, or the stages' remaining ops
 * run now; then the optimizer form's own step. */
static int step_ops(ddp *d) {
  const dp_schedule *s = &d->sched;
  if (s->compute_waits_optim) TRY(ddp_join(d, &d->ev_odone, d->ostream));
  if (s->ops_in_step) {
    int n = s->in_issue_order ? d->gs.nissued : d->plan.nb;
    for (int k = 0; k < n; k++) {
      int i = s->in_issue_order ? d->gs.order[k] : k;
      const dp_stage *t = &s->st[i];
      for (int j = t->nlaunch; j < t->nops; j++) TRY(run_op(d, i, j));
    }
  }
  if (d->optim->step) TRY(d->optim->step(d));
  return 0;
}

int ddp_optimizer_step(ddp *d) {
  TRY(dp_event_record(&d->ev_opt0, d->kstream));
  if (d->sched.model_step) {
    TRY(d->m.adamw_step(d->m.impl, &d->hp));
    d->step++;
  } else {
    TRY(step_ops(d));
    d->step++;
    if (d->m.set_step_count) d->m.set_step_count(d->m.impl, d->step);
    if (d->sched.param_ops) {
      TRY(ddp_complete(d, d->pc, d->pstream, &d->ps, &d->ev_param_done));
      TRY(dp_stream_wait(d->kstream, &d->ev_param_done));
    }
  }
  TRY(dp_event_record(&d->ev_opt_end, d->kstream));
  return 0;
}

int ddp_schedule_print(const ddp *d, FILE *f) {
  dp_schedule_print(&d->sched, f);
  if (ferror(f)) FAIL(ERR_FAIL, "ddp_schedule_print: write error");
  return 0;
}

/* ---- the step's information -------------------------------------------------- */

/* The collectives issued in s, from their start and end events: s->times
 * in issue order, the sum of their durations, the latest end (NaN: none). */
static int op_times(const dp_event *t0, dp_slots *s, double *sum,
                    double *last_end) {
  *last_end = NAN;
  for (int k = 0; k < s->nissued; k++) {
    int i = s->order[k];
    ddp_op_time *o = &s->times[k];
    o->bucket = i;
    TRY(dp_event_ms(t0, &s->start[i], &o->start_ms));
    TRY(dp_event_ms(t0, &s->end[i], &o->end_ms));
    *sum += o->end_ms - o->start_ms;
    if (isnan(*last_end) || o->end_ms > *last_end) *last_end = o->end_ms;
  }
  return 0;
}

int ddp_step_info_get(ddp *d, ddp_step_info *s) {
  memset(s, 0, sizeof *s);
  const dp_event *t0 = &d->ev_step0;
  TRY(dp_event_ms(t0, &d->ev_bwd0, &s->bwd_start_ms));
  if (isnan(s->bwd_start_ms)) s->bwd_start_ms = 0;
  TRY(dp_event_ms(t0, &d->ev_bwd_end, &s->bwd_end_ms));
  s->nhooks = d->nhooks;
  for (int k = 0; k < d->nhooks; k++)
    TRY(dp_event_ms(t0, &d->ev_view[d->hook_view[k]], &d->hook_ms[k]));
  s->hook_view = d->hook_view;
  s->hook_ms = d->hook_ms;
  double last_end;
  TRY(op_times(t0, &d->gs, &s->grad_comm_ms, &last_end));
  s->ngrad_ops = d->gs.nissued;
  s->grad_ops = d->gs.times;
  s->exposed_ms = d->gs.nissued == 0 ? 0
                  : last_end > s->bwd_end_ms ? last_end - s->bwd_end_ms : 0;
  TRY(op_times(t0, &d->ps, &s->param_comm_ms, &last_end));
  s->nparam_ops = d->ps.nissued;
  s->param_ops = d->ps.times;
  double a, b;
  TRY(dp_event_ms(t0, &d->ev_opt0, &a));
  TRY(dp_event_ms(t0, &d->ev_opt_end, &b));
  s->opt_ms = b - a;
  s->grad_bytes = d->grad_bytes;
  s->param_bytes = d->param_bytes;
  s->wire_bytes = d->wire_bytes;
  for (int i = 0; i < d->plan.nb; i++) s->nbuckets += d->plan.b[i].active;
  if (d->world == 1) s->nbuckets = 0;
  s->state_elems = d->state_elems;
  return 0;
}
