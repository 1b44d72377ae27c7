/* Shared by the C test programs: pass/fail bookkeeping in automake's
 * convention (exit 0 all passed, 1 some failed, 99 a hard error such as a
 * missing input) and seeded random inputs that are never zero. */
#ifndef TL_TESTLIB_H
#define TL_TESTLIB_H

#include <stddef.h>
#include <stdint.h>

/* One line per check: "PASS: what" or "FAIL: what". */
void check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A call of ours that must succeed for the test to go on: on failure print
 * its err_msg() and exit 99. */
void hard(int rc, const char *what);
/* Prints "N passed, M failed"; the exit status for main to return. */
int tl_finish(void);

/* splitmix64, one stream per program; tl_seed picks its start. */
void tl_seed(uint64_t seed);
uint64_t next_u64(void);
double urand(void);               /* [0, 1) */
float frand(float scale);         /* scale * +-[0.1, 1): both signs, never 0 */

#endif
