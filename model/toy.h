/* The handout's ToyModel on any engine, as the course's tests extend it:
 *
 *   y = fc2(LayerNorm(relu(fc1 x)))      fc1 [hidden, in], fc2 [out, hidden],
 *                                        no biases; ln.weight, ln.bias [hidden]
 *   loss = mean over rows and outputs of (y - target)^2
 *
 * plus two parameters the forward never reads, there to catch strategies
 * that assume every parameter has a gradient:
 *   frozen  [2]  requires_grad = False: no gradient, never communicated or
 *                updated; it must still be equal on every rank.
 *   unused  [3]  trainable but unused: its gradient is absent (grad None in
 *                PyTorch), so AdamW skips it and it keeps its initial value.
 *
 * Like model.h: one flat parameter buffer and one flat gradient buffer
 * (engine memory) with a named view per tensor, in the order fc1.weight,
 * ln.weight, ln.bias, fc2.weight, frozen, unused. Gradients follow kernels.h's
 * rule (accumulated; zeroed by toy_zero_grad); the views of frozen and unused
 * stay zero in the gradient buffer. Matrix products run in `compute`
 * precision; with DT_F16 or DT_BF16 the toy follows the project's mixed
 * precision policy (README), which toy_dtypes reports tensor by tensor. */
#ifndef TL_TOY_H
#define TL_TOY_H

#include <stddef.h>

#include "kernels/kernels.h"
#include "model/model.h"

typedef struct toy toy;

/* in, hidden (10 in the handout), out features; at most `rows` rows per
 * forward. */
int toy_create(toy **out, engine *e, int in, int hidden, int outf, int rows,
               dtype compute);
void toy_destroy(toy *t);
/* Seeded init (model/rng.h streams, one per tensor, like model_init):
 * linear weights trunc_normal(std sqrt(2/(in+out)), clip +-3 std),
 * ln.weight ones, ln.bias zeros, frozen {2, 2}, unused drawn like a weight
 * of shape [1, 3] (std sqrt(2/4)). Also zeroes the gradients and the AdamW
 * state and resets the step counter. */
int toy_init(toy *t, uint64_t seed);

float *toy_params(toy *t);
float *toy_grads(toy *t);   /* NULL while placed */
/* As model_place_grads (model.h): view v's gradient at base + off[v] (one
 * entry per view), the toy's own buffer freed; base NULL: back to its own. */
int toy_place_grads(toy *t, float *base, const size_t *off);
/* As model_place_params (model.h): the weights copied to base and read
 * and updated there; base NULL: back to a buffer of the toy's own. */
int toy_place_params(toy *t, float *base);
size_t toy_nparams(const toy *t);
const tensor_view *toy_views(const toy *t, int *n);
/* 1 if view i gets a gradient (fc1, ln.weight, ln.bias, fc2), else 0. */
int toy_has_grad(const toy *t, int view);

/* Forward on x [rows, in] and target [rows, out] (host arrays) with the mean
 * squared error into *loss; then backward, accumulating gradients and
 * calling the hook (model_grad_hook, model.h) as backward is done with each
 * parameter (its gradient final, the parameter read no more):
 * fc2.weight, ln.bias, ln.weight, fc1.weight. */
int toy_zero_grad(toy *t);
int toy_forward_backward(toy *t, const float *x, const float *target,
                         int rows, float *loss);
void toy_set_grad_hook(toy *t, model_grad_hook fn, void *arg);
/* AdamW (model.h's adamw_config) on the tensors that have gradients; the
 * others are not touched, as PyTorch skips requires_grad=False and grad
 * None. The moments ("adam_m", "adam_v") are allocated at the first call. */
int toy_adamw_step(toy *t, const adamw_config *o);

/* The dtypes the toy actually used, recorded as it runs (toy_dtypes reports
 * them): for the operands of the matrix products, the precision the
 * products were called with; for stored tensors, the dtype of the buffer
 * they were written to (each buffer carries the dtype it was allocated
 * with); for the loss, both (its reduction is a product of its own). */
typedef enum {
  TOY_PARAM_READ,   /* fc1 / fc2 weights as their products read them */
  TOY_FC1_OUT,      /* fc1's output, as stored */
  TOY_LN_OUT,       /* LayerNorm's output */
  TOY_LOGITS,       /* fc2's output, the model's prediction */
  TOY_LOSS,         /* the mean squared error */
  TOY_GRADS,        /* parameter gradients */
  TOY_MASTER,       /* the weights AdamW updates (master weights) */
  TOY_NPROBES
} toy_probe;
/* The dtype recorded for p, or -1 while the toy has not run that far
 * (TOY_MASTER needs a toy_adamw_step); -2 if two uses disagreed. */
int toy_probe_dtype(const toy *t, toy_probe p);

#endif
