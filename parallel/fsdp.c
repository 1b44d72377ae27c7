/* Fully sharded data parallelism: parallel/fsdp.h says what and when. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "common/check.h"
#include "kernels/kernels.h"
#include "parallel/dp_events.h"
#include "parallel/fsdp.h"

/* One slot of the window: a gathered group. */
typedef struct fsdp_slot {
  void *buf;
  int group;            /* -3: empty */
  int holds;            /* needs not yet released */
  long long released;   /* use counter at its last release */
  int next;             /* the index in uses of its group's next use after
                           the last one (nuses: none this step) */
  eng_event *free_ev;   /* compute: the slot's last reads (NULL: none) */
  eng_event *ready_ev;  /* comm: its gather (NULL: none pending) */
  int ahead;            /* gathered ahead, not yet needed: kept */
  int gather;           /* the timeline's gather that filled it this
                           step, -1: none */
  size_t bytes;         /* capacity */
} fsdp_slot;

/* The timeline's events (fsdp_timeline): a step's gathers (at most two a
 * use) and uses. */
typedef struct fsdp_tl {
  dp_event t0;          /* compute: the step's start */
  dp_event *gs, *ge;    /* [cap] each gather's start and end (comm) */
  dp_event *need;       /* [nuses] compute: each use's need */
  int *group, *use_gather, cap, n;
  double *start_ms, *end_ms, *need_ms;
} fsdp_tl;

struct fsdp {
  comm *c;
  model *m;
  engine *e;            /* the model's */
  engine *cv;           /* a view of e on the communicator's stream; NULL
                           on the CPU (collectives complete where issued) */
  engine *ov;           /* in backward: a side view of e the updates run
                           on, so that the gathers queued behind them on
                           the communicator's stream do not wait for them
                           (on the CPU a view whose calls are done when
                           they return: the same bookkeeping); NULL after
                           backward */
  int W, r, L;
  dtype lt;
  adamw_config opt;
  long long step;
  /* group g (-1 .. L) at index g + 1 */
  size_t *numel, *chunk, *at;   /* packed size, chunk, shard offset */
  size_t shard;                 /* sum of chunks */
  float *master, *adam_m, *adam_v;   /* [shard] each */
  /* after backward: the gradient shard [shard]; in backward: two
   * buffers, gring[s] for the groups of the model's gradient slot s
   * (model_group_slot: 0 the head's, the embedding's and every other
   * layer's, 1 the other layers'), each as large as their largest chunk:
   * a group's reduce-scatter lands in the one the group before it in its
   * slot used, AdamW on it at once */
  float *gshard;
  float *gring[2];
  eng_event *ring_ev[2];        /* ov: the update that reads gring[i],
                                   waited for before the next
                                   reduce-scatter into it (NULL: none) */
  int in_bwd;
  int *updated;                 /* [G] in backward: the group's shard was
                                   updated this step (a gather of it then
                                   waits for ov) */
  float *norm_m, *norm_v;       /* the gains' AdamW state [nnorm] */
  size_t nnorm;
  int *left;                    /* 2-D views of each group still to
                                   reach their final gradient */
  int *views_in;                /* 2-D views of each group */
  fsdp_slot *slot;
  int nslots;
  int *uses, nuses, next_use;   /* model_weight_uses */
  int *after;                   /* [nuses] the index of use u's group's
                                   next use, nuses if none */
  long long clock;
  fsdp_tl tl;
  comm_req **reqs;              /* NCCL: requests to complete at finish */
  int nreqs, capreqs;
  fsdp_info info;
};

/* Where the collectives are queued: the communicator's stream, or on the
 * CPU the model's engine (they complete where issued). */
static engine *ce(const fsdp *f) { return f->cv ? f->cv : f->e; }

static int gsize(const fsdp *f, int g) {   /* bytes of an element gathered */
  return g < 0 ? (int)sizeof(float) : (int)dtype_size(f->lt);
}

static size_t gbytes(const fsdp *f, int g) {   /* group g gathered */
  return (size_t)f->W * f->chunk[g + 1] * (size_t)gsize(f, g);
}

static comm_dtype cdt(const fsdp *f, int g) {
  if (g < 0 || f->lt == DT_F32) return COMM_F32;
  return f->lt == DT_BF16 ? COMM_BF16 : COMM_F16;
}

/* What rank r sends for group g into slot buffer buf: its fp32 chunk
 * (the embedding, or every group in fp32 compute), or that chunk cast to
 * the 16-bit type straight into its own block of buf, gathered in place.
 * No 16-bit copy of the shard is kept: it would be 2 bytes a parameter
 * / W of derived state for the optimizer to refresh; the cast reads the
 * chunk once a gather, on the communicator's stream, behind compute. */
static int gather_src(fsdp *f, int g, void *buf, const void **src) {
  const float *chunk = f->master + f->at[g + 1];
  if (gsize(f, g) == (int)sizeof(float)) {
    *src = chunk;
    return 0;
  }
  size_t k = f->chunk[g + 1];
  void *own = (char *)buf + (size_t)f->r * k * (size_t)gsize(f, g);
  TRY(k_cast(ce(f), chunk, DT_F32, own, f->lt, k));
  *src = own;
  return 0;
}

static int keep_req(fsdp *f, comm_req *q) {
  if (!q) return 0;
  if (f->nreqs == f->capreqs) {
    int cap = f->capreqs ? 2 * f->capreqs : 64;
    comm_req **n = realloc(f->reqs, (size_t)cap * sizeof *n);
    CHECK_ALLOC(n, (size_t)cap * sizeof *n);
    f->reqs = n;
    f->capreqs = cap;
  }
  f->reqs[f->nreqs++] = q;
  return 0;
}

static comm_req **want_req(fsdp *f, comm_req **q) {
  *q = NULL;
  return f->cv ? q : NULL;   /* MPI: complete where issued */
}

/* Group g all-gathered into slot s, after the slot's last reads. */
static int gather(fsdp *f, int s, int g) {
  fsdp_slot *x = &f->slot[s];
  if (f->cv && x->free_ev) {
    TRY(eng_event_wait(f->cv, x->free_ev));
    x->free_ev = NULL;
  }
  /* a gather nobody waited for (its group was dropped unused): done
   * before this one on the same stream, so its event can go */
  eng_event_free(ce(f), x->ready_ev);
  x->ready_ev = NULL;
  x->group = g;
  fsdp_tl *t = &f->tl;
  void *cs = comm_cuda_stream(f->c);
  x->gather = t->n < t->cap ? t->n++ : -1;
  if (x->gather >= 0) {
    t->group[x->gather] = g;
    TRY(dp_event_record(&t->gs[x->gather], cs));
  }
  /* its shard updated this step on the side stream (a pass that needs a
   * group again after its update: none in the model's own order) */
  if (f->ov && f->updated[g + 1]) TRY(eng_wait_for(ce(f), f->ov));
  const void *src;
  TRY(gather_src(f, g, x->buf, &src));
  comm_req *q;
  TRY(comm_allgather(f->c, src, x->buf, f->chunk[g + 1], cdt(f, g),
                     want_req(f, &q)));
  TRY(keep_req(f, q));
  if (x->gather >= 0) TRY(dp_event_record(&t->ge[x->gather], cs));
  if (f->cv) TRY(eng_event_record(f->cv, &x->ready_ev));
  f->info.gathers++;
  f->info.gather_bytes +=
      (double)(f->W - 1) * (double)f->chunk[g + 1] * gsize(f, g);
  return 0;
}

static int find(const fsdp *f, int g) {
  for (int s = 0; s < f->nslots; s++)
    if (f->slot[s].group == g) return s;
  return -1;
}

/* A slot large enough for group g that no pass holds, never `keep`'s:
 * of the smallest such slots (a layer leaves the large ones to the
 * embedding and the head) an empty one, else the one whose group is
 * needed again last (never this step first; the step's uses are known,
 * so this is the optimal eviction), released longest ago among equals.
 * -1 if none. */
static int free_slot(const fsdp *f, int g, int keep) {
  int best = -1;
  for (int s = 0; s < f->nslots; s++) {
    const fsdp_slot *x = &f->slot[s];
    if (x->holds || x->ahead || x->group == keep || x->bytes < gbytes(f, g))
      continue;
    if (best < 0) {
      best = s;
      continue;
    }
    const fsdp_slot *y = &f->slot[best];
    int xe = x->group == -3, ye = y->group == -3;
    if (x->bytes != y->bytes ? x->bytes < y->bytes
        : xe != ye           ? xe
        : !xe && (x->next > y->next ||
                  (x->next == y->next && x->released < y->released)))
      best = s;
  }
  return best;
}

static int weight_hook(int g, int need, void *arg) {
  fsdp *f = arg;
  if (!need) {
    int s = find(f, g);
    if (s < 0 || f->slot[s].holds <= 0)
      FAIL(ERR_FAIL, "fsdp: group %d released but not held", g);
    fsdp_slot *x = &f->slot[s];
    x->holds--;
    x->released = ++f->clock;
    if (f->cv && x->holds == 0) {
      eng_event_free(f->e, x->free_ev);
      x->free_ev = NULL;
      TRY(eng_event_record(f->e, &x->free_ev));
    }
    return 0;
  }
  if (f->next_use >= f->nuses || f->uses[f->next_use] != g)
    FAIL(ERR_FAIL, "fsdp: the model needs group %d as use %d, expected %d "
         "(model_weight_uses)", g, f->next_use,
         f->next_use < f->nuses ? f->uses[f->next_use] : -9);
  int u = f->next_use++;
  TRY(dp_event_record(&f->tl.need[u], eng_stream(f->e)));
  int s = find(f, g);
  if (s < 0) {
    if ((s = free_slot(f, g, -9)) < 0)
      FAIL(ERR_FAIL, "fsdp: no free slot of %d for group %d", f->nslots, g);
    TRY(gather(f, s, g));
  }
  fsdp_slot *x = &f->slot[s];
  f->tl.use_gather[u] = x->gather;
  if (x->ready_ev) {
    TRY(eng_event_wait(f->e, x->ready_ev));
    x->ready_ev = NULL;
  }
  x->holds++;
  x->ahead = 0;
  x->next = f->after[u];
  TRY(model_bind_group(f->m, g, x->buf));
  /* the next use, gathered ahead into a slot nobody holds */
  if (f->next_use < f->nuses) {
    int n = f->uses[f->next_use];
    if (find(f, n) < 0) {
      int t = free_slot(f, n, g);
      if (t >= 0) {
        TRY(gather(f, t, n));
        f->slot[t].ahead = 1;
      }
    }
  }
  return 0;
}

/* AdamW on this rank's elements of group g (its last chunk's padding
 * not), its gradient chunk at grad, through e; step t. */
static int update(fsdp *f, engine *e, int g, const float *grad, long long t) {
  const adamw_config *o = &f->opt;
  size_t lo = (size_t)f->r * f->chunk[g + 1], n = 0;
  if (lo < f->numel[g + 1]) {
    n = f->numel[g + 1] - lo;
    if (n > f->chunk[g + 1]) n = f->chunk[g + 1];
  }
  if (n == 0) return 0;
  size_t at = f->at[g + 1];
  return k_adamw(e, f->master + at, grad, f->adam_m + at, f->adam_v + at, n,
                 o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, t);
}

/* A 2-D view's gradient is final: when its group's last one is, the slot
 * is reduce-scattered to the gradient shard. */
static int grad_hook(int v, void *arg) {
  fsdp *f = arg;
  int g;
  size_t off;
  model_view_place(f->m, v, &g, &off);
  if (g == MODEL_NORMS || --f->left[g + 1] > 0) return 0;
  const float *src = model_group_grad(f->m, g);
  if (f->cv) TRY(eng_wait_for(f->cv, f->e));
  int k = f->in_bwd ? model_group_slot(f->m, g) : 0;
  float *dst = f->in_bwd ? f->gring[k] : f->gshard + f->at[g + 1];
  if (f->ring_ev[k]) {   /* ov: the slot's last update has read it */
    TRY(eng_event_wait(ce(f), f->ring_ev[k]));
    f->ring_ev[k] = NULL;
  }
  comm_req *q;
  TRY(comm_reduce_scatter(f->c, src, dst, f->chunk[g + 1], COMM_F32,
                          COMM_AVG, want_req(f, &q)));
  TRY(keep_req(f, q));
  /* in backward: the group's update right behind its reduce-scatter: on
   * GPUs on the side stream after it (the next reduce-scatter into the
   * same buffer waits for the update), else where the reduce-scatter ran;
   * its weights are read no more in this step (the hook fires after the
   * group's last use) */
  f->info.scatter_bytes +=
      (double)(f->W - 1) * (double)f->chunk[g + 1] * sizeof(float);
  if (f->cv) {   /* the slot is free once the reduce-scatter has read it */
    eng_event *ev = NULL;
    TRY(eng_event_record(f->cv, &ev));
    TRY(model_hold_slot(f->m, g, ev));
  }
  if (f->in_bwd) {
    eng_event *ev = NULL;
    TRY(eng_event_record(ce(f), &ev));
    TRY(eng_event_wait(f->ov, ev));
    TRY(update(f, f->ov, g, dst, f->step + 1));
    TRY(eng_event_record(f->ov, &f->ring_ev[k]));
    f->updated[g + 1] = 1;
    /* the window's copy of g is the old weights now: gathered again if a
     * pass needs it before the next step (none is held: the hook fires
     * after the group's last use) */
    int s = find(f, g);
    if (s >= 0 && !f->slot[s].holds) f->slot[s].group = -3;
  }
  return 0;
}

static int alloc0(engine *e, size_t bytes, const char *tag, void **p) {
  TRY(eng_alloc(e, bytes ? bytes : 16, tag, p));
  return eng_memset0(e, *p, bytes ? bytes : 16);
}

/* This rank's chunk of every group as model_init(seed) would draw it. */
static int init_shards(fsdp *f, uint64_t seed) {
  int nv;
  const tensor_view *views = model_views(f->m, &nv);
  for (int v = 0; v < nv; v++) {
    int g;
    size_t off;
    model_view_place(f->m, v, &g, &off);
    if (g == MODEL_NORMS) continue;
    size_t lo = (size_t)f->r * f->chunk[g + 1], hi = lo + f->chunk[g + 1];
    size_t a = off > lo ? off : lo, b = off + views[v].numel;
    if (b > hi) b = hi;
    if (a >= b) continue;
    TRY(model_init_range(f->m, v, seed, a - off, b - a,
                         f->master + f->at[g + 1] + (a - lo)));
  }
  return model_init(f->m, seed);   /* the gains */
}

int fsdp_create(fsdp **out, comm *c, model *m, uint64_t seed,
                const adamw_config *o, const fsdp_options *fo) {
  int in_backward = fo->in_backward;
  *out = NULL;
  fsdp *f = calloc(1, sizeof *f);
  CHECK_ALLOC(f, sizeof *f);
  f->c = c;
  f->m = m;
  f->e = model_engine(m);
  f->W = comm_size(c);
  f->r = comm_rank(c);
  f->L = model_get_config(m)->layers;
  f->opt = *o;
  f->in_bwd = in_backward;
  *out = f;   /* fsdp_destroy frees whatever is made below */
  float *gains = model_params_writable(m);
  if (!gains || !model_norm_grads(m))
    FAIL(ERR_FAIL, "fsdp_create: the model does not have bound weights "
         "(allowed: model_options.bound_weights)");
  const model_options *mo = model_get_options(m);
  if (mo->bound_weights != f->W)
    FAIL(ERR_FAIL, "fsdp_create: the model's weights are cut for %d ranks, "
         "the communicator has %d", mo->bound_weights, f->W);
  if (in_backward && model_loss_scale(m) != 1.0f)
    FAIL(ERR_FAIL, "fsdp_create: AdamW in backward with fp16's loss "
         "scaling: a step is skipped when any gradient is not finite, "
         "known only after backward (allowed with fp16: AdamW after "
         "backward)");
  int nv;
  model_views(m, &nv);
  f->lt = mo->compute;
  const int G = f->L + 2;
  f->numel = calloc((size_t)G, sizeof *f->numel);
  f->chunk = calloc((size_t)G, sizeof *f->chunk);
  f->at = calloc((size_t)G, sizeof *f->at);
  f->left = calloc((size_t)G, sizeof *f->left);
  f->views_in = calloc((size_t)G, sizeof *f->views_in);
  f->updated = calloc((size_t)G, sizeof *f->updated);
  CHECK_ALLOC(f->updated, (size_t)G * sizeof *f->updated);
  CHECK_ALLOC(f->numel, (size_t)G * sizeof *f->numel);
  CHECK_ALLOC(f->chunk, (size_t)G * sizeof *f->chunk);
  CHECK_ALLOC(f->at, (size_t)G * sizeof *f->at);
  CHECK_ALLOC(f->left, (size_t)G * sizeof *f->left);
  CHECK_ALLOC(f->views_in, (size_t)G * sizeof *f->views_in);
  for (int v = 0; v < nv; v++) {
    int g;
    size_t off;
    model_view_place(m, v, &g, &off);
    if (g != MODEL_NORMS) f->views_in[g + 1]++;
  }
  for (int g = -1; g <= f->L; g++) {
    size_t n = model_group_numel(m, g), k = model_group_chunk(m, g);
    f->numel[g + 1] = n;
    f->chunk[g + 1] = k;
    f->at[g + 1] = f->shard;
    f->shard += k;
  }
  f->info.shard_elems = f->shard;
  engine *e = f->e;
  TRY(alloc0(e, f->shard * sizeof(float), "fsdp.shard", (void **)&f->master));
  TRY(alloc0(e, f->shard * sizeof(float), "fsdp.adam_m", (void **)&f->adam_m));
  TRY(alloc0(e, f->shard * sizeof(float), "fsdp.adam_v", (void **)&f->adam_v));
  if (f->in_bwd) {
    size_t big[2] = {0, 0};
    for (int g = -1; g <= f->L; g++) {
      int s = model_group_slot(f->m, g);
      if (f->chunk[g + 1] > big[s]) big[s] = f->chunk[g + 1];
    }
    for (int i = 0; i < 2; i++)
      TRY(alloc0(e, big[i] * sizeof(float), "fsdp.grads", (void **)&f->gring[i]));
  } else {
    TRY(alloc0(e, f->shard * sizeof(float), "fsdp.grads", (void **)&f->gshard));
  }
  f->nnorm = model_group_numel(m, MODEL_NORMS);
  TRY(alloc0(e, f->nnorm * sizeof(float), "adam_m", (void **)&f->norm_m));
  TRY(alloc0(e, f->nnorm * sizeof(float), "adam_v", (void **)&f->norm_v));
  /* checkpoints of k layers: k + 2 slots, never more than a slot per
   * group; keep_gathered: a slot per group, so nothing forward gathered
   * is evicted before backward (free_slot finds an empty slot for each) */
  int k = mo->ckpt_layers < f->L ? mo->ckpt_layers : f->L;
  f->nslots = fo->keep_gathered ? f->L + 2 : (k > 0 ? k : 1) + 2;
  f->slot = calloc((size_t)f->nslots, sizeof *f->slot);
  CHECK_ALLOC(f->slot, (size_t)f->nslots * sizeof *f->slot);
  /* Slots fit the largest layer, but one fits any group. The embedding
   * and the head (large with a large vocabulary: the fp32 embedding of the
   * 8B model is 6x a bf16 layer) are needed only at the ends of forward
   * and backward, one at a time, and layers take the others first
   * (free_slot), so the one is free for each. keep_gathered holds every
   * group through the step: a large slot for each of the two that does
   * not fit a layer's (a 16-bit head can, beside an fp32 embedding that
   * cannot), so that every group has a slot it fits. */
  size_t big = 0, layer = 0;
  int nbig = 0;
  for (int g = -1; g <= f->L; g++) {
    size_t b = gbytes(f, g);
    if (b > big) big = b;
    if (g >= 0 && g < f->L && b > layer) layer = b;
  }
  if (f->L > 0)
    nbig = (gbytes(f, -1) > layer) + (gbytes(f, f->L) > layer);
  if (!fo->keep_gathered && nbig > 1) nbig = 1;
  for (int s = 0; s < f->nslots; s++) {
    fsdp_slot *x = &f->slot[s];
    x->group = -3;
    x->bytes = s < nbig || layer == 0 ? big : layer;
    TRY(alloc0(e, x->bytes, "fsdp.window", &x->buf));
    f->info.window_bytes += x->bytes;
  }
  f->info.window_groups = f->nslots;
  f->uses = malloc((size_t)(4 * G) * sizeof *f->uses);
  CHECK_ALLOC(f->uses, (size_t)(4 * G) * sizeof *f->uses);
  f->nuses = model_weight_uses(m, f->uses);
  f->after = malloc((size_t)(f->nuses > 0 ? f->nuses : 1) * sizeof *f->after);
  CHECK_ALLOC(f->after, (size_t)(f->nuses > 0 ? f->nuses : 1) * sizeof *f->after);
  for (int u = 0; u < f->nuses; u++) {
    f->after[u] = f->nuses;
    for (int v = u + 1; v < f->nuses; v++)
      if (f->uses[v] == f->uses[u]) {
        f->after[u] = v;
        break;
      }
  }
  fsdp_tl *t = &f->tl;
  int gpu = comm_cuda_stream(c) != NULL;
  t->cap = 2 * f->nuses;
  t->gs = calloc((size_t)t->cap, sizeof *t->gs);
  t->ge = calloc((size_t)t->cap, sizeof *t->ge);
  t->need = calloc((size_t)f->nuses, sizeof *t->need);
  t->group = calloc((size_t)t->cap, sizeof *t->group);
  t->use_gather = calloc((size_t)f->nuses, sizeof *t->use_gather);
  t->start_ms = calloc((size_t)t->cap, sizeof *t->start_ms);
  t->end_ms = calloc((size_t)t->cap, sizeof *t->end_ms);
  t->need_ms = calloc((size_t)f->nuses, sizeof *t->need_ms);
  if (!t->gs || !t->ge || !t->need || !t->group || !t->use_gather ||
      !t->start_ms || !t->end_ms || !t->need_ms) {
    t->cap = 0;   /* fsdp_destroy frees what was allocated */
    FAIL(ERR_OOM, "fsdp_create: out of host memory for the timeline");
  }
  TRY(dp_event_init(&t->t0, gpu));
  for (int i = 0; i < t->cap; i++) {
    TRY(dp_event_init(&t->gs[i], gpu));
    TRY(dp_event_init(&t->ge[i], gpu));
  }
  for (int i = 0; i < f->nuses; i++) TRY(dp_event_init(&t->need[i], gpu));
  void *stream = comm_cuda_stream(c);
  if (stream) {
    eng_ctx x = {stream, 0, 0};
    TRY(eng_view(e, &x, &f->cv));
  }
  if (f->in_bwd) TRY(eng_side_view(e, 0, &f->ov));
  TRY(init_shards(f, seed));
  TRY(eng_sync(e));
  model_set_weight_hook(m, weight_hook, f);
  model_set_grad_hook(m, grad_hook, f);
  return 0;
}

void fsdp_destroy(fsdp *f) {
  if (!f) return;
  if (f->e) eng_sync(f->e);
  if (f->ov) eng_sync(f->ov);
  for (int i = 0; i < f->nreqs; i++) comm_wait(f->c, f->reqs[i]);
  if (f->m) {
    model_set_weight_hook(f->m, NULL, NULL);
    model_set_grad_hook(f->m, NULL, NULL);
  }
  for (int s = 0; f->slot && s < f->nslots; s++) {
    eng_event_free(f->e, f->slot[s].free_ev);
    eng_event_free(ce(f), f->slot[s].ready_ev);
    if (f->slot[s].buf) eng_free(f->e, f->slot[s].buf);
  }
  void *bufs[] = {f->master, f->adam_m, f->adam_v, f->gshard, f->gring[0],
                  f->gring[1], f->norm_m, f->norm_v};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) eng_free(f->e, bufs[i]);
  for (int i = 0; i < 2; i++) eng_event_free(f->ov, f->ring_ev[i]);
  engine_destroy(f->ov);
  engine_destroy(f->cv);
  fsdp_tl *t = &f->tl;
  dp_event_destroy(&t->t0);
  for (int i = 0; t->gs && i < t->cap; i++) dp_event_destroy(&t->gs[i]);
  for (int i = 0; t->ge && i < t->cap; i++) dp_event_destroy(&t->ge[i]);
  for (int i = 0; t->need && i < f->nuses; i++) dp_event_destroy(&t->need[i]);
  free(t->gs);
  free(t->ge);
  free(t->need);
  free(t->group);
  free(t->use_gather);
  free(t->start_ms);
  free(t->end_ms);
  free(t->need_ms);
  free(f->slot);
  free(f->uses);
  free(f->after);
  free(f->reqs);
  free(f->numel);
  free(f->chunk);
  free(f->at);
  free(f->left);
  free(f->views_in);
  free(f->updated);
  free(f);
}

int fsdp_begin_step(fsdp *f) {
  f->next_use = 0;
  f->tl.n = 0;
  for (int s = 0; s < f->nslots; s++) f->slot[s].gather = -1;
  for (int u = 0; u < f->nuses; u++) {
    f->tl.use_gather[u] = -1;
    dp_event_clear(&f->tl.need[u]);
  }
  TRY(dp_event_record(&f->tl.t0, eng_stream(f->e)));
  f->info.gathers = 0;
  f->info.gather_bytes = f->info.scatter_bytes = 0;
  for (int g = -1; g <= f->L; g++) f->left[g + 1] = f->views_in[g + 1];
  /* the shards the optimizer wrote are what this step gathers */
  if (f->cv) TRY(eng_wait_for(f->cv, f->e));
  if (f->ov) {   /* every update of the last step, and the ring with them */
    TRY(eng_wait_for(ce(f), f->ov));
    for (int i = 0; i < 2; i++) {
      eng_event_free(f->ov, f->ring_ev[i]);
      f->ring_ev[i] = NULL;
    }
  }
  for (int g = -1; g <= f->L; g++) f->updated[g + 1] = 0;
  return 0;
}

int fsdp_finish_gradient_synchronization(fsdp *f) {
  for (int g = -1; g <= f->L; g++)
    if (f->left[g + 1] > 0)
      FAIL(ERR_FAIL, "fsdp: group %d's gradient never became final (no "
           "backward since fsdp_begin_step?)", g);
  if (f->next_use != f->nuses)
    FAIL(ERR_FAIL, "fsdp: %d of the step's %d weight uses seen", f->next_use,
         f->nuses);
  /* the gains' gradients, whole on every rank: averaged */
  if (f->cv) TRY(eng_wait_for(f->cv, f->e));
  comm_req *q;
  TRY(comm_allreduce(f->c, model_norm_grads(f->m), model_norm_grads(f->m),
                     f->nnorm, COMM_F32, COMM_AVG, want_req(f, &q)));
  TRY(keep_req(f, q));
  if (f->cv) TRY(eng_wait_for(f->e, f->cv));
  if (f->ov) TRY(eng_wait_for(f->e, f->ov));   /* the updates in backward */
  for (int i = 0; i < f->nreqs; i++) {
    int rc = comm_wait(f->c, f->reqs[i]);
    if (rc < 0) {
      f->nreqs = 0;   /* comm_wait freed each one it was given */
      return rc;
    }
  }
  f->nreqs = 0;
  return 0;
}

/* fp16: the gradient shard and the gains' gradients hold S x gradient.
 * Unscaled here; if any rank saw a value that is not finite, every rank
 * skips the step and the scale halves (model_loss_scale_step), as the
 * single-process model does over its whole gradient. *ok = 0: skip. */
static int unscale(fsdp *f, int *ok) {
  float S = model_loss_scale(f->m);
  *ok = 1;
  if (S == 1.0f) return 0;
  int a, b;
  TRY(k_grad_unscale(f->e, f->gshard, f->shard, 1.0f / S, &a));
  TRY(k_grad_unscale(f->e, model_norm_grads(f->m), f->nnorm, 1.0f / S, &b));
  double bad = !(a && b);
  TRY(comm_world_max(&bad, 1));
  *ok = bad == 0;
  model_loss_scale_step(f->m, *ok);
  return 0;
}

int fsdp_optimizer_step(fsdp *f) {
  const adamw_config *o = &f->opt;
  int ok;
  TRY(unscale(f, &ok));
  if (ok) {   /* else skipped: the next backward overwrites the gradients */
    long long t = ++f->step;
    for (int g = -1; g <= f->L && !f->in_bwd; g++)
      TRY(update(f, f->e, g, f->gshard + f->at[g + 1], t));
    TRY(k_adamw(f->e, model_params_writable(f->m), model_norm_grads(f->m),
                f->norm_m, f->norm_v, f->nnorm, o->lr, o->beta1, o->beta2,
                o->eps, o->weight_decay, t));
    model_set_step_count(f->m, t);
  }
  /* the window's groups are the old weights now: gathered again when next
   * needed (each slot still waits for its last reads before that); after
   * a skipped step too, so every step starts from an empty window */
  for (int s = 0; s < f->nslots; s++) {
    f->slot[s].group = -3;
    f->slot[s].ahead = 0;
  }
  return 0;
}

int fsdp_gather_full_params(fsdp *f, float *out) {
  int nv;
  const tensor_view *views = model_views(f->m, &nv);
  size_t big = f->nnorm;
  for (int g = -1; g <= f->L; g++)
    if ((size_t)f->W * f->chunk[g + 1] > big) big = (size_t)f->W * f->chunk[g + 1];
  float *dev = NULL, *host = malloc(big * sizeof(float));
  CHECK_ALLOC(host, big * sizeof(float));
  int rc = eng_alloc(f->e, big * sizeof(float), "fsdp.gather_full", (void **)&dev);
  if (rc == 0) rc = eng_sync(f->e);
  /* each group's packed run whole on the host (the matrices gathered, the
   * gains the model's own), then its views to their table offsets */
  for (int g = -1; g <= f->L + 1 && rc == 0; g++) {
    int grp = g <= f->L ? g : MODEL_NORMS;
    if (grp == MODEL_NORMS) {
      rc = eng_download(f->e, host, model_params(f->m), f->nnorm * sizeof(float));
    } else {
      rc = comm_allgather(f->c, f->master + f->at[g + 1], dev,
                          f->chunk[g + 1], COMM_F32, NULL);
      if (rc == 0)
        rc = eng_download(f->e, host, dev,
                          (size_t)f->W * f->chunk[g + 1] * sizeof(float));
    }
    if (rc == 0) rc = eng_sync(f->e);
    for (int v = 0; v < nv && rc == 0; v++) {
      int vg;
      size_t off;
      model_view_place(f->m, v, &vg, &off);
      if (vg == grp)
        memcpy(out + views[v].offset, host + off,
               views[v].numel * sizeof(float));
    }
  }
  if (dev) eng_free(f->e, dev);
  free(host);
  return rc;
}

void fsdp_info_get(const fsdp *f, fsdp_info *i) { *i = f->info; }

int fsdp_timeline_get(fsdp *f, fsdp_timeline *out) {
  fsdp_tl *t = &f->tl;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < t->n; i++) {
    TRY(dp_event_ms(&t->t0, &t->gs[i], &t->start_ms[i]));
    TRY(dp_event_ms(&t->t0, &t->ge[i], &t->end_ms[i]));
    out->gather_ms += t->end_ms[i] - t->start_ms[i];
  }
  for (int u = 0; u < f->next_use; u++) {
    TRY(dp_event_ms(&t->t0, &t->need[u], &t->need_ms[u]));
    int i = t->use_gather[u];
    if (i >= 0 && t->end_ms[i] > t->need_ms[u])
      out->exposed_ms += t->end_ms[i] - t->need_ms[u];
  }
  out->ngathers = t->n;
  out->nuses = f->next_use;
  out->group = t->group;
  out->use_group = f->uses;
  out->start_ms = t->start_ms;
  out->end_ms = t->end_ms;
  out->need_ms = t->need_ms;
  return 0;
}
