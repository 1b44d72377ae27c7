#define _GNU_SOURCE 1   /* program_invocation_short_name */
#include "config.h"
#include "tests/testlib.h"

#include "common/check.h"

#include <errno.h>
#include <math.h>
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
  if (rc < 0) hard_fail(what);
}

void hard_fail(const char *what) {
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

void *tl_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "%s: out of memory (%zu bytes)\n",
            program_invocation_short_name, bytes);
    exit(99);
  }
  return p;
}

float *tl_rand(size_t n, float scale) {
  float *x = tl_malloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = frand(scale);
  return x;
}

/* tl_compare's check over a float (bf) or double (bd) reference. */
static double compare(const char *what, const float *a, const float *bf,
                      const double *bd, size_t n, double tol) {
  double worst = 0, scale = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    double b = bf ? bf[i] : bd[i];
    scale = fmax(scale, fabs(b));
    double d = fabs((double)a[i] - b);
    if (isnan(d)) d = INFINITY;
    if (d > worst) { worst = d; at = i; }
  }
  double rel = worst / (scale > 0 ? scale : 1);
  check(rel <= tol && scale > 0,
        "%s: max |difference| %.3e of max |reference| %.3g (tol %.0e; "
        "worst [%zu]: %.8g against %.8g)", what, rel, scale, tol, at,
        n ? (double)a[at] : 0.0, n ? (bf ? bf[at] : bd[at]) : 0.0);
  return rel;
}

double tl_compare(const char *what, const float *a, const float *b, size_t n,
                  double tol) {
  return compare(what, a, b, NULL, n, tol);
}

double tl_compare_d(const char *what, const float *a, const double *b,
                    size_t n, double tol) {
  return compare(what, a, NULL, b, n, tol);
}

void tl_fd_grad(double (*L)(void *ctx), void *ctx, double *x, size_t n,
                double h, double *grad) {
  for (size_t i = 0; i < n; i++) {
    double save = x[i];
    x[i] = save + h;
    double lp = L(ctx);
    x[i] = save - h;
    double lm = L(ctx);
    x[i] = save;
    grad[i] = (lp - lm) / (2 * h);
  }
}
