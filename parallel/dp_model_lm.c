/* dp_model over the Transformer LM (model/model.h): a table of forwarding
 * calls; every parameter of the LM receives a gradient. */
#include "config.h"
#include "parallel/dp_model.h"

static int lm_has_grad(void *impl, int view) { return 1; }
static int lm_zero_grad(void *impl) { return model_zero_grad(impl); }
static void lm_set_hook(void *impl, model_grad_hook fn, void *arg) {
  model_set_grad_hook(impl, fn, arg);
}
static int lm_adamw(void *impl, const adamw_config *o) {
  return model_adamw_step(impl, o);
}
static int lm_place(void *impl, float *base, const size_t *off) {
  return model_place_grads(impl, base, off);
}
static int lm_place_params(void *impl, float *base) {
  return model_place_params(impl, base);
}
static long long lm_steps(void *impl) { return model_step_count(impl); }
static void lm_set_steps(void *impl, long long s) {
  model_set_step_count(impl, s);
}

void dp_model_lm(dp_model *d, model *m) {
  d->impl = m;
  d->e = model_engine(m);
  d->params = model_params_writable(m);
  d->grads = model_grads(m);
  d->nparams = model_nparams(m);
  d->views = model_views(m, &d->nviews);
  d->has_grad = lm_has_grad;
  d->zero_grad = lm_zero_grad;
  d->set_grad_hook = lm_set_hook;
  d->place_grads = lm_place;
  d->place_params = lm_place_params;
  d->adamw_step = lm_adamw;
  d->step_count = lm_steps;
  d->set_step_count = lm_set_steps;
}
