#define _GNU_SOURCE 1   /* program_invocation_short_name */
#include "config.h"
#include "tests/testlib.h"

#include "common/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int passed, failed;
static uint64_t state = 0x9e3779b97f4a7c15ull;

void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s: ", ok ? "PASS" : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  fflush(stdout);   /* a crash in the next check must not eat this line */
  va_end(ap);
  if (ok) passed++;
  else failed++;
}

void hard(int rc, const char *what) {
  if (rc >= 0) return;
  fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
          err_msg());
  exit(99);
}

int tl_finish(void) {
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

void tl_seed(uint64_t seed) { state = seed; }

uint64_t next_u64(void) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double urand(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }

float frand(float scale) {
  double u = 0.1 + 0.9 * urand();
  return (float)(scale * (next_u64() & 1 ? u : -u));
}
