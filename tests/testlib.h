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
/* The same for a failed call whose status is not at hand (a condition of
 * several calls): err_msg() and exit 99. */
void hard_fail(const char *what) __attribute__((noreturn));
/* Prints "N passed, M failed"; the exit status for main to return. */
int tl_finish(void);

/* splitmix64, one stream per program; tl_seed picks its start. */
void tl_seed(uint64_t seed);
uint64_t next_u64(void);
double urand(void);               /* [0, 1) */
float frand(float scale);         /* scale * +-[0.1, 1): both signs, never 0 */

/* malloc that does not fail: out of memory is a hard error (exit 99); 0
 * bytes give a pointer too. */
void *tl_malloc(size_t bytes);
/* n values of frand(scale) in a tl_malloc'd array. */
float *tl_rand(size_t n, float scale);

/* One check that a matches the reference b: max |a - b| <= tol x max |b|
 * over the n values, where max |b| > 0 (a NaN fails); the worst value is
 * named. Returns that relative difference. */
double tl_compare(const char *what, const float *a, const float *b, size_t n,
                  double tol);
/* The same against a reference computed in double. */
double tl_compare_d(const char *what, const float *a, const double *b,
                    size_t n, double tol);

/* Central differences of L(ctx) with respect to x[0..n), each element
 * perturbed by +-h in place and restored: grad[i] = (L(x + h e_i) -
 * L(x - h e_i)) / 2h. L reads x through ctx. */
void tl_fd_grad(double (*L)(void *ctx), void *ctx, double *x, size_t n,
                double h, double *grad);

#endif
