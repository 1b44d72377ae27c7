/* adamw_forms.h: the two forms of the optimizer, step by step. */
#include "config.h"
#include "tests/adamw_forms.h"
#include "tests/testlib.h"

#include <stdlib.h>
#include <string.h>

static float *weights(model *m) {
  size_t n = model_nparams(m);
  float *h = malloc(n * sizeof *h);
  hard(h ? 0 : -1, "out of host memory");
  hard(eng_download(model_engine(m), h, model_params(m), n * sizeof *h),
       "eng_download");
  return h;
}

int adamw_forms_agree(model *after, model *in_bwd, int B, int T, int steps) {
  model *m[2] = {after, in_bwd};
  int vocab = model_get_config(after)->vocab, same = 1;
  size_t n = model_nparams(after);
  adamw_config a = adamw_defaults();
  int32_t *ids = malloc(2 * (size_t)B * T * sizeof *ids), *tg = ids + B * T;
  hard(ids ? 0 : -1, "out of host memory");
  for (int s = 0; s < steps; s++) {
    for (int i = 0; i < B * T; i++) {
      ids[i] = (int32_t)(next_u64() % (uint64_t)vocab);
      tg[i] = (int32_t)(next_u64() % (uint64_t)vocab);
    }
    float loss[2];
    for (int k = 0; k < 2; k++) {
      hard(model_zero_grad(m[k]), "zero_grad");
      hard(model_forward(m[k], ids, tg, B, T, &loss[k]), "forward");
      if (k == 0) {
        hard(model_backward(m[k]), "backward");
        hard(model_adamw_step(m[k], &a), "adamw");
      } else {
        hard(model_backward_adamw(m[k], &a), "backward_adamw");
      }
    }
    float *p0 = weights(m[0]), *p1 = weights(m[1]);
    same &= memcmp(&loss[0], &loss[1], sizeof loss[0]) == 0 &&
            memcmp(p0, p1, n * sizeof *p0) == 0;
    free(p0);
    free(p1);
  }
  free(ids);
  return same;
}
