/* dp_model over the handout's toy (model/toy.h): its frozen parameter and
 * its unused one have no gradient, so no strategy sends or updates them.
 * The toy keeps its step count to itself: a sharded optimizer counts its
 * own steps (ddp.c), which is all AdamW's bias correction needs. */
#include "config.h"
#include "model/toy.h"
#include "parallel/dp_model.h"

static int toy_grad(void *impl, int view) { return toy_has_grad(impl, view); }
static int toy_zero(void *impl) { return toy_zero_grad(impl); }
static void toy_hook(void *impl, model_grad_hook fn, void *arg) {
  toy_set_grad_hook(impl, fn, arg);
}
static int toy_place(void *impl, float *base, const size_t *off) {
  return toy_place_grads(impl, base, off);
}
static int toy_place_w(void *impl, float *base) {
  return toy_place_params(impl, base);
}
static int toy_adamw(void *impl, const adamw_config *o) {
  return toy_adamw_step(impl, o);
}

void dp_model_toy(dp_model *d, toy *t, engine *e) {
  d->impl = t;
  d->e = e;
  d->params = toy_params(t);
  d->grads = toy_grads(t);
  d->nparams = toy_nparams(t);
  d->views = toy_views(t, &d->nviews);
  d->has_grad = toy_grad;
  d->zero_grad = toy_zero;
  d->set_grad_hook = toy_hook;
  d->place_grads = toy_place;
  d->place_params = toy_place_w;
  d->adamw_step = toy_adamw;
  d->step_count = NULL;
  d->set_step_count = NULL;
}
