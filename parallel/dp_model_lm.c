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

static const dp_model lm_calls = {
    .has_grad = lm_has_grad, .zero_grad = lm_zero_grad,
    .set_grad_hook = lm_set_hook, .place_grads = lm_place,
    .place_params = lm_place_params, .adamw_step = lm_adamw,
    .step_count = lm_steps, .set_step_count = lm_set_steps};

void dp_model_lm(dp_model *d, model *m) {
  int nviews = 0;
  const tensor_view *views = model_views(m, &nviews);
  dp_model_bind(d, &lm_calls, m, model_engine(m), model_params_writable(m),
                model_grads(m), model_nparams(m), views, nviews);
}
