/* What test_fused (CPU engine) and test_model_cuda (GPU) share: another
 * model's checkpoint on disk, and the optimizer in backward against AdamW
 * after backward. */
#ifndef TL_TESTS_MODEL_HELPERS_H
#define TL_TESTS_MODEL_HELPERS_H

#include "model/model.h"

/* n floats of e's memory at p, on the host (tl_malloc'd), with e idle. */
float *host_floats(engine *e, const float *p, size_t n);

/* An fp32 model of c (batch B, sequence T) on e, initialised from seed:
 * the model, and its weights downloaded into *w (nparams floats,
 * malloc'd), the fixture each model test starts from. */
model *initial_model(engine *e, const model_config *c, int B, int T,
                     uint64_t seed, float **w);

/* `steps` training steps on fresh random batches (tests/testlib.h's
 * stream), `after` with model_backward then model_adamw_step, `in_bwd`
 * with model_backward_adamw, both from whatever weights they hold: 1 when
 * the losses and the weights after every step are equal bit for bit.
 * adamw_forms_agree_on runs `after`'s backward on after_bwd (its engine or
 * a view of it: model_backward_on). */
int adamw_forms_agree(model *after, model *in_bwd, int B, int T, int steps);
/* ...and with `in_bwd`'s weight gradients stored in wt
 * (model_options.grad_lt): `after`'s are rounded to wt and back (k_cast)
 * between backward and AdamW, those of every 2-D view but the
 * embedding's, and the head's unless head_fp32 (head_chunk). */
int adamw_forms_agree_lt(model *after, model *in_bwd, int B, int T,
                         int steps, dtype wt, int head_fp32);
/* m's weight-matrix gradients (as adamw_forms_agree_lt picks them) rounded
 * to wt and back, in place, in m's buffer (model_backward's). */
void round_weight_grads(model *m, dtype wt, int head_fp32);
int adamw_forms_agree_on(model *after, engine *after_bwd, model *in_bwd,
                         int B, int T, int steps);

/* `steps` training steps (model_backward, model_adamw_step) of a and b on
 * the same fresh random batches: 1 when the losses, every gradient and
 * the weights after every step are equal bit for bit; *what names the
 * first that differs ("loss", "gradients", "weights"), else "". */
int training_agrees(model *a, model *b, int B, int T, int steps,
                    const char **what);

/* A checkpoint of another model than the tests' own: fp32 weights of
 * c (batch B, sequence T) from seed 4242 with the gains drawn away from 1,
 * saved by st_save_model to DIR/other.safetensors in a fresh temporary
 * folder (TMPDIR, else /tmp) named after prog. dir and path receive the
 * folder and file (the caller removes both); returns the weights (nparams
 * floats, malloc'd). Exits 99 where the folder cannot be made. */
float *other_checkpoint(engine *e, const model_config *c, int B, int T,
                        const char *prog, char *dir, size_t ndir, char *path,
                        size_t npath);

#endif
