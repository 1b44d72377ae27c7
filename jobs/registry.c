/* Every job kind the runner knows. Adding a kind: one file in jobs/ that
 * defines kind_NAME (harness/kind.h), its line in KINDS below, and the
 * file in jobs/local.am. The list's order is --kinds' order. */
#include "config.h"
#include "harness/kind.h"

#include <string.h>

#define KINDS(X) \
  X(allreduce)   \
  X(collective)  \
  X(lm)          \
  X(selftest)    \
  X(toy_dtypes)  \
  X(accumulation) \
  X(ddp)         \
  X(fsdp)        \
  X(attention)   \
  X(comm_accounting) \
  X(norm)

#define DECLARE(name) extern const kind_def kind_##name;
KINDS(DECLARE)
#define ENTRY(name) &kind_##name,
static const kind_def *const kinds[] = {KINDS(ENTRY) NULL};

const kind_def *const *kind_all(void) { return kinds; }

const kind_def *kind_find(const char *name) {
  for (int i = 0; kinds[i]; i++)
    if (strcmp(kinds[i]->name, name) == 0) return kinds[i];
  return NULL;
}
