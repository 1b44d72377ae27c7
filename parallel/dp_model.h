/* What data parallelism needs from a model: the interface both the LM
 * (model/model.h) and the handout's toy (model/toy.h) satisfy, so the
 * strategies of parallel/ddp.h are written once.
 *
 * A model here is one flat parameter buffer and one flat gradient buffer of
 * `nparams` fp32 elements in engine memory, a table of named views (offset,
 * numel) into both, and a backward that calls a hook as each view's
 * gradient becomes final (model_grad_hook, model.h). Views without a
 * gradient (frozen, or unused by forward) stay zero in the gradient buffer,
 * are never communicated for their gradient and never updated.
 *
 * The forward/backward itself is the caller's: the batch types differ
 * (token ids for the LM, float rows for the toy), and the caller knows which
 * slice of the global batch its rank takes. */
#ifndef TL_DP_MODEL_H
#define TL_DP_MODEL_H

#include <stddef.h>

#include "kernels/kernels.h"
#include "model/model.h"

typedef struct dp_model {
  void *impl;                       /* the model itself */
  engine *e;
  float *params, *grads;            /* [nparams] each, engine memory */
  size_t nparams;
  const tensor_view *views;
  int nviews;
  int (*has_grad)(void *impl, int view);
  int (*zero_grad)(void *impl);
  void (*set_grad_hook)(void *impl, model_grad_hook fn, void *arg);
  /* Move view v's gradient to base + off[v] (model_place_grads); base
   * NULL: back to the model's own buffer, whose address `grads` above may
   * then no longer hold. */
  int (*place_grads)(void *impl, float *base, const size_t *off);
  /* The weights moved to base (model_place_params); base NULL: back to
   * the model's own buffer, whose address `params` above may then no
   * longer hold. */
  int (*place_params)(void *impl, float *base);
  /* The model's own (unsharded) AdamW over every view with a gradient. */
  int (*adamw_step)(void *impl, const adamw_config *o);
  /* Steps taken by the model's own optimizer, and setting it (a sharded
   * optimizer keeps the count the model would have); may be NULL. */
  long long (*step_count)(void *impl);
  void (*set_step_count)(void *impl, long long step);
} dp_model;

/* d = the calls of `calls` (a dp_model whose data fields are ignored) over
 * the model impl on e, its buffers and views. */
static inline void dp_model_bind(dp_model *d, const dp_model *calls,
                                 void *impl, engine *e, float *params,
                                 float *grads, size_t nparams,
                                 const tensor_view *views, int nviews) {
  *d = *calls;
  d->impl = impl;
  d->e = e;
  d->params = params;
  d->grads = grads;
  d->nparams = nparams;
  d->views = views;
  d->nviews = nviews;
}

/* The LM: every view has a gradient. */
void dp_model_lm(dp_model *d, model *m);
/* The toy (model/toy.h), built on engine e. */
struct toy;
void dp_model_toy(dp_model *d, struct toy *t, engine *e);

#endif
