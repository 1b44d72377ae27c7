/* Deterministic test data for collectives, as nccl-tests makes it: element
 * i of rank r's buffer under a seed is
 *
 *     value(seed, r, i) = ((i*7 + r*13 + seed) mod 61) - 30
 *
 * a small integer in [-30, 30], so a sum over ranks is exact in any order
 * in f32, f64 and i32 (and in f16 / bf16 while |sum| <= 2048 / 256, that is
 * up to 68 / 8 ranks), and the reduced buffer can be compared exactly.
 *
 * The value depends on i and seed only through key = (i*7 + seed) mod 61, so
 * the expected result of any reduction over a range of ranks is a table of
 * 61 numbers (pattern_expect), which makes checking O(1) per element.
 *
 * Buffers are described by the element index of their first element
 * (`first`), so a block of a larger logical buffer (a reduce-scatter's
 * output, an all-gather's block) is checked against its own indices.
 *
 * Host functions work on host memory (f32, f64, i32); the _cuda ones on
 * device memory in the given stream (every dtype; cudaStream_t as void *);
 * pattern_fill / pattern_check pick by where a communicator's buffers live.
 * Mismatches are a result, not an error: the functions return negative only
 * when they cannot run. */
#ifndef TL_PATTERN_H
#define TL_PATTERN_H

#include "collective/comm.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __CUDACC__
#define PATTERN_HD __host__ __device__
#else
#define PATTERN_HD
#endif

#define PATTERN_PERIOD 61

static inline PATTERN_HD unsigned pattern_key(size_t index, uint32_t seed) {
  return (unsigned)(((index % PATTERN_PERIOD) * 7 + seed % PATTERN_PERIOD) %
                    PATTERN_PERIOD);
}

static inline PATTERN_HD int pattern_value(unsigned key, int rank) {
  return (int)((key + (unsigned)(rank % PATTERN_PERIOD) * 13) %
               PATTERN_PERIOD) - 30;
}

/* want[key]: the expected element for each key. */
typedef struct {
  double want[PATTERN_PERIOD];
} pattern_table;

/* The reduction `op` over ranks rank_lo .. rank_lo + nranks - 1. One rank
 * (nranks = 1) gives that rank's own values: a broadcast's or a block of an
 * all-gather. COMM_AVG is the sum / nranks: exact in binary floating
 * point when nranks is a power of two (the tests' 2 and 4 ranks). */
void pattern_expect(pattern_table *t, int rank_lo, int nranks, comm_op op);

typedef struct {
  size_t count;    /* elements that differ */
  size_t index;    /* the first of them, counted from the buffer's start */
  double got, want;
} pattern_mismatch;

int pattern_fill_host(void *buf, comm_dtype t, size_t n, size_t first,
                      uint32_t seed, int rank);
int pattern_check_host(const void *buf, comm_dtype t, size_t n, size_t first,
                       uint32_t seed, const pattern_table *want,
                       pattern_mismatch *bad);

int pattern_fill_cuda(void *buf, comm_dtype t, size_t n, size_t first,
                      uint32_t seed, int rank, void *stream);
int pattern_check_cuda(const void *buf, comm_dtype t, size_t n, size_t first,
                       uint32_t seed, const pattern_table *want,
                       pattern_mismatch *bad, void *stream);

/* On a communicator's buffers: host memory for MPI, its GPU and stream for
 * NCCL (so a fill is ordered before the collectives that follow it). */
int pattern_fill(comm *c, void *buf, comm_dtype t, size_t n, size_t first,
                 uint32_t seed, int rank);
int pattern_check(comm *c, const void *buf, comm_dtype t, size_t n,
                  size_t first, uint32_t seed, const pattern_table *want,
                  pattern_mismatch *bad);

#ifdef __cplusplus
}
#endif

#endif
