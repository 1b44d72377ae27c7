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

static const dp_model toy_calls = {
    .has_grad = toy_grad, .zero_grad = toy_zero, .set_grad_hook = toy_hook,
    .place_grads = toy_place, .place_params = toy_place_w,
    .adamw_step = toy_adamw};   /* no step count of its own */

void dp_model_toy(dp_model *d, toy *t, engine *e) {
  int nviews = 0;
  const tensor_view *views = toy_views(t, &nviews);
  dp_model_bind(d, &toy_calls, t, e, toy_params(t), toy_grads(t),
                toy_nparams(t), views, nviews);
}
