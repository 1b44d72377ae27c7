/* Every job kind the runner knows. Adding a kind: one file in jobs/ that
 * defines a kind_def, and one line here. */
#include "config.h"
#include "harness/kind.h"

#include <string.h>

extern const kind_def kind_allreduce;
extern const kind_def kind_lm;
extern const kind_def kind_selftest;
extern const kind_def kind_toy_dtypes;
extern const kind_def kind_accumulation;
extern const kind_def kind_ddp;
extern const kind_def kind_attention;

static const kind_def *const kinds[] = {
    &kind_allreduce,
    &kind_lm,
    &kind_selftest,
    &kind_toy_dtypes,
    &kind_accumulation,
    &kind_ddp,
    &kind_attention,
    NULL,
};

const kind_def *const *kind_all(void) { return kinds; }

const kind_def *kind_find(const char *name) {
  for (int i = 0; kinds[i]; i++)
    if (strcmp(kinds[i]->name, name) == 0) return kinds[i];
  return NULL;
}
