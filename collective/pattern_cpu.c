/* Test data for collectives on the host (see pattern.h): the expected-value
 * table, filling and checking host buffers, and the dispatch that sends a
 * communicator's buffers to the host or the CUDA version.
 *
 * Loops step the key by 7 mod 61 instead of dividing per element, so
 * filling or checking a 1 GiB buffer costs about what a memcpy does. */
#include "config.h"
#include "collective/pattern.h"
#include "common/check.h"

static unsigned next_key(unsigned key) {
  key += 7;
  return key >= PATTERN_PERIOD ? key - PATTERN_PERIOD : key;
}

void pattern_expect(pattern_table *t, int rank_lo, int nranks, comm_op op) {
  ASSERT(nranks >= 1);
  for (unsigned k = 0; k < PATTERN_PERIOD; k++) {
    double acc = pattern_value(k, rank_lo);
    for (int r = rank_lo + 1; r < rank_lo + nranks; r++) {
      double v = pattern_value(k, r);
      if (op == COMM_SUM || op == COMM_AVG) acc += v;
      else if (op == COMM_MAX) acc = v > acc ? v : acc;
      else acc = v < acc ? v : acc;
    }
    t->want[k] = op == COMM_AVG ? acc / nranks : acc;
  }
}

static const char *host_dtype_error(comm_dtype t) {
  return t == COMM_F16 ? "f16" : "bf16";
}

#define FILL_LOOP(type)                                                      \
  do {                                                                       \
    type *p = buf;                                                           \
    for (size_t i = 0; i < n; i++, key = next_key(key))                      \
      p[i] = (type)pattern_value(key, rank);                                 \
  } while (0)

int pattern_fill_host(void *buf, comm_dtype t, size_t n, size_t first,
                      uint32_t seed, int rank) {
  unsigned key = pattern_key(first, seed);
  switch (t) {
  case COMM_F32: FILL_LOOP(float); return 0;
  case COMM_F64: FILL_LOOP(double); return 0;
  case COMM_I32: FILL_LOOP(int32_t); return 0;
  default: break;
  }
  FAIL(ERR_FAIL, "pattern: host buffers of %s are not supported",
       host_dtype_error(t));
}

/* Comparing in double is exact: every expected value and every f32 / i32
 * element converts to double without rounding. */
#define CHECK_LOOP(type)                                                     \
  do {                                                                       \
    const type *p = buf;                                                     \
    for (size_t i = 0; i < n; i++, key = next_key(key)) {                    \
      double got = (double)p[i];                                             \
      if (got != want->want[key]) {                                          \
        if (bad->count++ == 0) {                                             \
          bad->index = i;                                                    \
          bad->got = got;                                                    \
          bad->want = want->want[key];                                       \
        }                                                                    \
      }                                                                      \
    }                                                                        \
  } while (0)

int pattern_check_host(const void *buf, comm_dtype t, size_t n, size_t first,
                       uint32_t seed, const pattern_table *want,
                       pattern_mismatch *bad) {
  unsigned key = pattern_key(first, seed);
  *bad = (pattern_mismatch){0, 0, 0.0, 0.0};
  switch (t) {
  case COMM_F32: CHECK_LOOP(float); return 0;
  case COMM_F64: CHECK_LOOP(double); return 0;
  case COMM_I32: CHECK_LOOP(int32_t); return 0;
  default: break;
  }
  FAIL(ERR_FAIL, "pattern: host buffers of %s are not supported",
       host_dtype_error(t));
}

int pattern_fill(comm *c, void *buf, comm_dtype t, size_t n, size_t first,
                 uint32_t seed, int rank) {
  if (comm_get_backend(c) == COMM_MPI) {
    TRY(pattern_fill_host(buf, t, n, first, seed, rank));
    return 0;
  }
#ifdef HAVE_CUDA
  TRY(pattern_fill_cuda(buf, t, n, first, seed, rank, comm_cuda_stream(c)));
  return 0;
#else
  FAIL(ERR_FAIL, "pattern: device buffers need a CUDA build");
#endif
}

int pattern_check(comm *c, const void *buf, comm_dtype t, size_t n,
                  size_t first, uint32_t seed, const pattern_table *want,
                  pattern_mismatch *bad) {
  if (comm_get_backend(c) == COMM_MPI) {
    TRY(pattern_check_host(buf, t, n, first, seed, want, bad));
    return 0;
  }
#ifdef HAVE_CUDA
  TRY(pattern_check_cuda(buf, t, n, first, seed, want, bad,
                         comm_cuda_stream(c)));
  return 0;
#else
  FAIL(ERR_FAIL, "pattern: device buffers need a CUDA build");
#endif
}
