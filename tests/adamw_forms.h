/* The optimizer in backward against AdamW after backward, shared by
 * test_fused (CPU engine) and test_model_cuda (GPU). */
#ifndef TL_TESTS_ADAMW_FORMS_H
#define TL_TESTS_ADAMW_FORMS_H

#include "model/model.h"

/* `steps` training steps on fresh random batches (tests/testlib.h's
 * stream), `after` with model_backward then model_adamw_step, `in_bwd`
 * with model_backward_adamw, both from whatever weights they hold: 1 when
 * the losses and the weights after every step are equal bit for bit. */
int adamw_forms_agree(model *after, model *in_bwd, int B, int T, int steps);

#endif
