/* The data-parallel container (ddp.h): weights broadcast at creation,
 * gradient buckets launched from the backward hook or after backward,
 * finish_gradient_synchronization, and the step's timeline.
 *
 * Launching bucket b (all strategies):
 *   compute stream: record ready[b]
 *   comm stream:    wait ready[b]; record cstart[b]; all-reduce (or, zero1,
 *                   reduce-scatter) grads[b] in place with COMM_AVG, so the
 *                   1/W of the mean costs no pass of its own; record cend[b]
 * grad_sync allgather instead all-gathers this rank's block of the
 * bucket's W copies in `gathered` (where the model's gradients are placed)
 * in place; the optimizer averages them.
 * Gated (grad_sync allgather / alltoall on GPUs, launched from the hook):
 * the comm stream does not wait on the device. The host keeps the
 * launched buckets in a queue and, at every hook and in finish, issues
 * the head's collective once it sees ready[b] complete (cudaEventQuery),
 * then its AdamW (and ZeRO-1's all-gather) once it sees cend[b] complete.
 * Measured on 2 x H200 (reports/data/ddp_diag.csv): the comm stream's
 * pending waits cost backward 3.5 ms a step with no byte moved; ZeRO-1's
 * bf16 step went from 60.8 to 56.7 ms.
 * The issue order is the hook order, identical on every rank, as NCCL and
 * MPI need. finish: record bwd_end on compute; launch what the strategy
 * left for after backward (gated: issue the rest, the host spinning);
 * then GPU: record comm_done on the comm stream and make the compute
 * stream wait for it; CPU: wait for every request. */
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

/* Engine memory under `tag` that can join a symmetric window of c
 * (NCCL: ncclMemAlloc through the tag's allocator; MPI: the engine's own). */
static int window_alloc(ddp *d, comm *c, size_t bytes, const char *tag,
                        void **p) {
  int nccl = comm_get_backend(c) == COMM_NCCL;
  eng_allocator a = {sym_alloc, sym_free, c};
  if (nccl) TRY(eng_set_tag_allocator(d->e, tag, &a));
  int rc = eng_alloc(d->e, bytes, tag, p);
  if (nccl) TRY(eng_set_tag_allocator(d->e, tag, NULL));
  TRY(rc);
  return 0;
}

/* ---- launching ----------------------------------------------------------- */

/* Bucket i's collective on the comm stream, after its gradients are final
 * (ev_ready: waited for on the device, or seen complete by the host). */
static int issue(ddp *d, int i) {
  dp_bucket *b = &d->plan.b[i];
  float *g = d->m.grads + b->start;
  TRY(dp_event_record(&d->ev_cstart[i], d->cstream));
  ASSERT(d->grad_req[i] == NULL);
  if (d->sync == DDP_SYNC_ALLGATHER) {
    float *blocks = d->gathered + (size_t)d->world * b->start;
    TRY(comm_allgather_f32(d->c, blocks + (size_t)d->rank * b->count, blocks,
                           b->count, &d->grad_req[i]));
    d->wire_bytes += (double)b->count * 4 * (d->world - 1);
  } else if (d->sync == DDP_SYNC_ALLTOALL && !b->tail) {
    size_t chunk = b->count / (size_t)d->world;
    TRY(comm_alltoall_f32(d->c, g, d->received + b->start, chunk,
                          &d->grad_req[i]));
    d->wire_bytes += (double)b->count * 4 * (d->world - 1) / d->world;
  } else if (d->opt == DDP_OPT_ZERO1 && !b->tail) {
    size_t chunk = b->count / (size_t)d->world;
    TRY(comm_reduce_scatter_avg_f32(d->c, g, g + (size_t)d->rank * chunk,
                                    chunk, &d->grad_req[i]));
    d->wire_bytes += (double)b->count * 4 * (d->world - 1) / d->world;
  } else {
    TRY(comm_allreduce_avg_f32(d->c, g, g, b->count, &d->grad_req[i]));
    d->wire_bytes += (double)b->count * 4 * 2 * (d->world - 1) / d->world;
  }
  d->grad_bytes += (double)b->count * 4;
  if (d->gpu) TRY(dp_event_record(&d->ev_cend[i], d->cstream));
  d->issue_order[d->nissued++] = i;
  if (d->ostream && !d->gated) TRY(ddp_optim_bucket(d, i));
  return 0;
}

/* gated: issue what the GPU has made ready, bucket by bucket in hook
 * order: the collective once the bucket is final, then its AdamW once the
 * collective has finished, then (ZeRO-1) its weights' all-gather once that
 * AdamW has, then the next bucket. One bucket at a time keeps the two
 * communicators' operations in one order on every rank: two ranks issuing
 * them in different orders could deadlock where their streams share a
 * hardware queue. The price: small buckets wait for the host at each
 * stage (ZeRO-1 bf16 at 25 MiB: 75.6 ms a step against 55.0 at 250 MiB,
 * 2 x H200). Every rank thus issues
 * the gradient and (ZeRO-1) parameter collectives in one order, the order
 * launching from the hook gave before. With block, until nothing is left
 * (the host spins). */
static int pump(ddp *d, int block) {
  while (d->gate_head < d->gate_tail) {
    int j = d->gate_q[d->gate_head], done;
    const dp_event *gate = d->head_stage == 0   ? &d->ev_ready[j]
                           : d->head_stage == 1 ? &d->ev_cend[j]
                                                : &d->ev_pready[j];
    TRY(dp_event_done(gate, &done));
    if (!done) {
      if (!block) return 0;
      sched_yield();
      continue;
    }
    if (d->head_stage == 0) {
      d->head_stage = 1;
      TRY(issue(d, j));
      continue;
    }
    int gather = d->head_stage == 2;
    d->head_stage = 0;      /* ddp_optim_bucket may set 2 (ZeRO-1) */
    if (d->ev_bwd_end.recorded && !d->bwd_ended)
      TRY(dp_event_done(&d->ev_bwd_end, &d->bwd_ended));
    if (gather) TRY(ddp_optim_gather(d, j));
    else TRY(ddp_optim_bucket(d, j));
    if (d->head_stage == 0) d->gate_head++;
  }
  return 0;
}

static int launch(ddp *d, int i) {
  TRY(dp_event_record(&d->ev_ready[i], d->kstream));
  if (d->gated) {
    d->gate_q[d->gate_tail++] = i;
    return pump(d, 0);
  }
  TRY(dp_stream_wait(d->cstream, &d->ev_ready[i]));
  return issue(d, i);
}

static int hook(int view, void *arg) {
  ddp *d = arg;
  if (view < 0 || view >= d->m.nviews)
    FAIL(ERR_FAIL, "ddp: gradient hook for view %d of %d", view, d->m.nviews);
  TRY(dp_event_record(&d->ev_view[view], d->kstream));
  if (d->nhooks < d->m.nviews) d->hook_view[d->nhooks++] = view;
  if (d->world == 1) return 0;
  if (d->gated) TRY(pump(d, 0));
  if (!d->has_grad[view]) return 0;
  for (int i = d->plan.view_first[view]; i <= d->plan.view_last[view]; i++) {
    dp_bucket *b = &d->plan.b[i];
    if (b->pending <= 0)
      FAIL(ERR_FAIL, "ddp: gradient of %s final twice in one step",
           d->m.views[view].name);
    if (--b->pending == 0 && d->in_hook) TRY(launch(d, i));
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

/* grad_sync allgather: the buffer of W copies, a symmetric window on NCCL,
 * and the model's gradients placed in it: view v (in bucket b) at rank's
 * block, W*start_b + rank*count_b + (offset_v - start_b). At align 1
 * buckets hold whole views; a view in none (trimmed off an edge, without a
 * gradient) gets the same layout over its own range. */
static int gathered_setup(ddp *d) {
  const dp_model *m = &d->m;
  size_t W = (size_t)d->world, bytes = m->nparams * W * sizeof(float);
  if (!m->place_grads)
    FAIL(ERR_FAIL, "ddp: grad_sync allgather needs a model that can place "
         "its gradients (dp_model.place_grads)");
  void *p = NULL;
  TRY(window_alloc(d, d->c, bytes, "grads.gathered", &p));
  d->gathered = p;
  size_t *off = malloc((size_t)(m->nviews ? m->nviews : 1) * sizeof *off);
  CHECK_ALLOC(off, (size_t)m->nviews * sizeof *off);
  for (int v = 0; v < m->nviews; v++) {
    size_t lo = m->views[v].offset, hi = lo + m->views[v].numel;
    const dp_bucket *in = NULL;
    int overlaps = 0;
    for (int k = 0; k < d->plan.nb; k++) {
      const dp_bucket *b = &d->plan.b[k];
      if (b->start <= lo && hi <= b->start + b->count) in = b;
      else if (b->start < hi && lo < b->start + b->count) overlaps = 1;
    }
    if (in) {
      off[v] = W * in->start + (size_t)d->rank * in->count + (lo - in->start);
    } else if (!overlaps) {
      /* outside every bucket (a frozen view trimmed off a bucket's edge):
       * [W*lo, W*hi) is no bucket's, and its gradient stays zero */
      off[v] = W * lo + (size_t)d->rank * (hi - lo);
    } else {
      free(off);
      FAIL(ERR_FAIL, "ddp: view %s [%zu, %zu) straddles a bucket boundary",
           m->views[v].name, lo, hi);
    }
  }
  int rc = m->place_grads(m->impl, d->gathered, off);
  free(off);
  TRY(rc);
  d->placed = 1;
  /* Collective, in the same order on every rank. */
  if (comm_get_backend(d->c) == COMM_NCCL) {
    TRY(comm_window_register(d->c, d->gathered, bytes));
    d->windows = 1;
  }
  return 0;
}

/* grad_sync alltoall: the received copies; the weights move to a buffer
 * that joins a window of the parameter communicator (so the all-gathers of
 * the updated chunks, in place, can take the copy engines), the gradients
 * to one of the gradient communicator's at their own offsets; on NCCL all
 * three become windows. Both move on MPI too (nothing to register there),
 * so the CPU tests run the placements. */
static int alltoall_setup(ddp *d) {
  const dp_model *m = &d->m;
  size_t bytes = m->nparams * sizeof(float);
  int nccl = comm_get_backend(d->c) == COMM_NCCL;
  void *p = NULL;
  if (!m->place_params || !m->place_grads)
    FAIL(ERR_FAIL, "ddp: grad_sync alltoall needs a model that can place "
         "its weights and gradients (dp_model.place_params, place_grads)");
  TRY(window_alloc(d, d->pc, bytes, "params", &p));
  int rc = m->place_params(m->impl, p);
  if (rc < 0) {
    eng_free(d->e, p);
    TRY(rc);
  }
  d->sym_params = p;
  d->m.params = p;
  TRY(window_alloc(d, d->c, bytes, "grads.received", &p));
  d->received = p;
  TRY(window_alloc(d, d->c, bytes, "grads.sym", &p));
  d->sym_grads = p;
  size_t *off = malloc((size_t)(m->nviews ? m->nviews : 1) * sizeof *off);
  CHECK_ALLOC(off, (size_t)m->nviews * sizeof *off);
  for (int v = 0; v < m->nviews; v++) off[v] = m->views[v].offset;
  rc = m->place_grads(m->impl, d->sym_grads, off);
  free(off);
  TRY(rc);
  d->placed = 1;
  d->m.grads = d->sym_grads;
  if (!nccl) return 0;
  /* Collective, in the same order on every rank. */
  TRY(comm_window_register(d->pc, d->sym_params, bytes));
  d->param_window = 1;
  TRY(comm_window_register(d->c, d->sym_grads, bytes));
  TRY(comm_window_register(d->c, d->received, bytes));
  d->recv_windows = 1;
  return 0;
}

static int setup(ddp *d, double bucket_mib) {
  const dp_model *m = &d->m;
  int bad = 0, nv = m->nviews;
  d->has_grad = zalloc((size_t)nv, sizeof(int), &bad);
  if (bad) FAIL(ERR_OOM, "ddp: out of host memory");
  for (int v = 0; v < nv; v++) d->has_grad[v] = m->has_grad(m->impl, v) != 0;

  size_t cap = d->strategy == DDP_FLAT ? (size_t)-1
               : d->strategy == DDP_BUCKETED
                   ? (size_t)(bucket_mib * 1048576.0 / sizeof(float))
                   : 0;
  size_t align = d->opt == DDP_OPT_ZERO1 ? (size_t)d->world : 1;
  TRY(dp_plan_make(&d->plan, m->views, nv, d->has_grad, m->nparams, cap,
                   align));
  int nb = d->plan.nb;
  d->nparam_slots = nb > d->world ? nb : d->world;
  int np = d->nparam_slots;
  d->grad_req = zalloc((size_t)nb, sizeof *d->grad_req, &bad);
  d->ev_ready = zalloc((size_t)nb, sizeof(dp_event), &bad);
  d->ev_cstart = zalloc((size_t)nb, sizeof(dp_event), &bad);
  d->ev_cend = zalloc((size_t)nb, sizeof(dp_event), &bad);
  d->issue_order = zalloc((size_t)nb, sizeof(int), &bad);
  d->gate_q = zalloc((size_t)nb, sizeof(int), &bad);
  d->param_req = zalloc((size_t)np, sizeof *d->param_req, &bad);
  d->ev_pready = zalloc((size_t)np, sizeof(dp_event), &bad);
  d->ev_pstart = zalloc((size_t)np, sizeof(dp_event), &bad);
  d->ev_pend = zalloc((size_t)np, sizeof(dp_event), &bad);
  d->param_order = zalloc((size_t)np, sizeof(int), &bad);
  d->ev_view = zalloc((size_t)nv, sizeof(dp_event), &bad);
  d->hook_view = zalloc((size_t)nv, sizeof(int), &bad);
  d->hook_ms = zalloc((size_t)nv, sizeof(double), &bad);
  d->grad_times = zalloc((size_t)nb, sizeof(ddp_op_time), &bad);
  d->param_times = zalloc((size_t)np, sizeof(ddp_op_time), &bad);
  if (bad) FAIL(ERR_OOM, "ddp: out of host memory for %d buckets", nb);
  /* Events: ordering ones on both streams; the comm stream's only on GPU. */
  TRY(events_init(d->ev_ready, nb, d->gpu));
  TRY(events_init(d->ev_cstart, nb, d->gpu));
  TRY(events_init(d->ev_cend, nb, d->gpu));
  TRY(events_init(d->ev_pready, np, d->gpu));
  TRY(events_init(d->ev_pstart, np, d->gpu));
  TRY(events_init(d->ev_pend, np, d->gpu));
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
  if (d->sync == DDP_SYNC_ALLGATHER) TRY(gathered_setup(d));
  if (d->sync != DDP_SYNC_ALLREDUCE && d->gpu) {
    TRY(dp_stream_create(&d->ostream));
    TRY(dp_event_init(&d->ev_odone, 1));
  }
  d->gated = d->ostream != NULL && d->in_hook;
  if (d->sync == DDP_SYNC_ALLTOALL) TRY(alltoall_setup(d));
  TRY(ddp_optim_setup(d));
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
  d->strategy = s;
  d->opt = d->world == 1 ? DDP_OPT_ADAMW : o;
  d->sync = d->world == 1 ? DDP_SYNC_ALLREDUCE : y;
  if (d->sync != DDP_SYNC_ALLREDUCE && d->world > K_ADAMW_MAX_GRADS) {
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
  d->in_hook = s == DDP_OVERLAP || s == DDP_BUCKETED;
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
  int rc = setup(d, bucket_mib);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    ddp_destroy(d);
    return rc;
  }
  *out = d;
  return 0;
}

static void release_on(comm *c, comm_req **req, int n) {
  for (int i = 0; i < n; i++)
    if (req[i]) {
      comm_wait(c, req[i]);
      req[i] = NULL;
    }
}

static void events_free(dp_event *ev, int n) {
  if (ev)
    for (int i = 0; i < n; i++) dp_event_destroy(&ev[i]);
  free(ev);
}

void ddp_destroy(ddp *d) {
  if (!d) return;
  int nb = d->plan.nb, np = d->nparam_slots, nv = d->m.nviews;
  if (d->grad_req) release_on(d->c, d->grad_req, nb);
  if (d->param_req) release_on(d->pc, d->param_req, np);
  d->m.set_grad_hook(d->m.impl, NULL, NULL);
  dp_stream_destroy(d->ostream);
  dp_event_destroy(&d->ev_odone);
  ddp_optim_free(d);
  if (d->windows && comm_window_deregister(d->c, d->gathered) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->recv_windows && (comm_window_deregister(d->c, d->sym_grads) < 0 ||
                          comm_window_deregister(d->c, d->received) < 0))
    err_trace(__FILE__, __LINE__);
  if (d->param_window && comm_window_deregister(d->pc, d->sym_params) < 0)
    err_trace(__FILE__, __LINE__);
  /* the model's gradients and weights back in buffers of its own */
  if (d->placed && d->m.place_grads(d->m.impl, NULL, NULL) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->sym_params && d->m.place_params(d->m.impl, NULL) < 0)
    err_trace(__FILE__, __LINE__);
  if (d->sym_params) eng_free(d->e, d->sym_params);
  if (d->gathered) eng_free(d->e, d->gathered);
  if (d->sym_grads) eng_free(d->e, d->sym_grads);
  if (d->received) eng_free(d->e, d->received);
  events_free(d->ev_ready, nb);
  events_free(d->ev_cstart, nb);
  events_free(d->ev_cend, nb);
  events_free(d->ev_pready, np);
  events_free(d->ev_pstart, np);
  events_free(d->ev_pend, np);
  events_free(d->ev_view, nv);
  dp_event *one[] = {&d->ev_step0, &d->ev_bwd0, &d->ev_bwd_end,
                     &d->ev_comm_done, &d->ev_opt0, &d->ev_param_done,
                     &d->ev_opt_end};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    dp_event_destroy(one[i]);
  free(d->grad_req);
  free(d->issue_order);
  free(d->gate_q);
  free(d->param_req);
  free(d->param_order);
  free(d->hook_view);
  free(d->hook_ms);
  free(d->grad_times);
  free(d->param_times);
  free(d->has_grad);
  dp_plan_free(&d->plan);
  free(d);
}

/* ---- a step ---------------------------------------------------------------- */

static void clear(dp_event *ev, int n) {
  for (int i = 0; i < n; i++) dp_event_clear(&ev[i]);
}

int ddp_begin_step(ddp *d) {
  int nb = d->plan.nb, np = d->nparam_slots;
  /* The last step's handles: complete if the caller synchronised. */
  for (int i = 0; i < nb; i++)
    if (d->grad_req[i]) {
      comm_req *q = d->grad_req[i];
      d->grad_req[i] = NULL;
      TRY(comm_wait(d->c, q));
    }
  for (int i = 0; i < np; i++)
    if (d->param_req[i]) {
      comm_req *q = d->param_req[i];
      d->param_req[i] = NULL;
      TRY(comm_wait(d->pc, q));
    }
  clear(d->ev_ready, nb);
  clear(d->ev_cstart, nb);
  clear(d->ev_cend, nb);
  clear(d->ev_pready, np);
  clear(d->ev_pstart, np);
  clear(d->ev_pend, np);
  clear(d->ev_view, d->m.nviews);
  dp_event *one[] = {&d->ev_bwd0, &d->ev_bwd_end, &d->ev_comm_done,
                     &d->ev_opt0, &d->ev_param_done, &d->ev_opt_end};
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    dp_event_clear(one[i]);
  d->nissued = d->nparam_issued = d->nhooks = 0;
  d->gate_head = d->gate_tail = d->head_stage = 0;
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
  return 0;
}

int ddp_mark_backward(ddp *d) {
  TRY(dp_event_record(&d->ev_bwd0, d->kstream));
  return 0;
}

int ddp_finish_gradient_synchronization(ddp *d) {
  TRY(dp_event_record(&d->ev_bwd_end, d->kstream));
  if (d->world == 1) return 0;
  for (int i = 0; i < d->plan.nb; i++) {
    dp_bucket *b = &d->plan.b[i];
    if (!b->active) continue;
    if (d->in_hook) {
      if (b->pending != 0) {
        for (int v = 0; v < d->m.nviews; v++)
          if (d->has_grad[v] && d->plan.view_first[v] <= i &&
              d->plan.view_last[v] >= i && !d->ev_view[v].recorded)
            FAIL(ERR_FAIL, "ddp: backward never finished the gradient of %s",
                 d->m.views[v].name);
        FAIL(ERR_FAIL, "ddp: bucket %d never became ready", i);
      }
    } else {
      TRY(launch(d, i));
    }
  }
  if (d->gated) TRY(pump(d, 1));
  if (d->gpu) {
    TRY(dp_event_record(&d->ev_comm_done, d->cstream));
    /* allgather, alltoall: the optimizer waits for each bucket's own
     * collective (ddp_optim.c), so the AdamW of buckets already received
     * runs while the last ones still travel */
    if (d->sync == DDP_SYNC_ALLREDUCE)
      TRY(dp_stream_wait(d->kstream, &d->ev_comm_done));
    return 0;
  }
  for (int k = 0; k < d->nissued; k++) {
    int i = d->issue_order[k];
    comm_req *q = d->grad_req[i];
    d->grad_req[i] = NULL;
    TRY(comm_wait(d->c, q));
    TRY(dp_event_record(&d->ev_cend[i], NULL));
  }
  TRY(dp_event_record(&d->ev_comm_done, NULL));
  return 0;
}

int ddp_optimizer_step(ddp *d) {
  TRY(dp_event_record(&d->ev_opt0, d->kstream));
  TRY(ddp_optim_step(d));
  TRY(dp_event_record(&d->ev_opt_end, d->kstream));
  return 0;
}

/* ---- the step's information -------------------------------------------------- */

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
  double last_end = NAN;
  for (int k = 0; k < d->nissued; k++) {
    int i = d->issue_order[k];
    ddp_op_time *o = &d->grad_times[k];
    o->bucket = i;
    TRY(dp_event_ms(t0, &d->ev_cstart[i], &o->start_ms));
    TRY(dp_event_ms(t0, &d->ev_cend[i], &o->end_ms));
    s->grad_comm_ms += o->end_ms - o->start_ms;
    if (isnan(last_end) || o->end_ms > last_end) last_end = o->end_ms;
  }
  s->ngrad_ops = d->nissued;
  s->grad_ops = d->grad_times;
  s->exposed_ms = d->nissued == 0 ? 0
                  : last_end > s->bwd_end_ms ? last_end - s->bwd_end_ms : 0;
  for (int k = 0; k < d->nparam_issued; k++) {
    int i = d->param_order[k];
    ddp_op_time *o = &d->param_times[k];
    o->bucket = i;
    TRY(dp_event_ms(t0, &d->ev_pstart[i], &o->start_ms));
    TRY(dp_event_ms(t0, &d->ev_pend[i], &o->end_ms));
    s->param_comm_ms += o->end_ms - o->start_ms;
  }
  s->nparam_ops = d->nparam_issued;
  s->param_ops = d->param_times;
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
