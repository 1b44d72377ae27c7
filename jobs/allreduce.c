/* Job kind `allreduce`: the handout's distributed_communication_single_node.
 * Times an fp32 all-reduce of size_mib MiB per rank, MPI between CPU ranks
 * or NCCL between GPUs, the way nccl-tests measures:
 *
 * - Buffers: out of place (separate send and recv), so every iteration
 *   reduces the same input and values never grow; host memory for mpi,
 *   device memory on the rank's GPU for nccl. send holds the pattern of
 *   collective/pattern.h (small integers from (seed, rank, index), so the
 *   fp32 sum is exact in any order); recv starts as another seed's pattern,
 *   so an all-reduce that writes nothing cannot pass the check.
 * - Timing: `warmup` untimed all-reduces, a barrier, then `iters` timed
 *   ones. Each is preceded by an untimed barrier, so the ranks start
 *   together and no iteration carries the tail of the one before, and is
 *   timed with CLOCK_MONOTONIC around the synchronous call, which on NCCL
 *   ends with cudaStreamSynchronize: op + synchronize, as torch.distributed
 *   rows are timed, so our rows compare with the PyTorch anchors.
 * - Combining ranks: per iteration the MAX over ranks (an all-reduce is done
 *   when its slowest rank is), then mean, sample standard deviation (n - 1;
 *   NaN for one iteration), median, min and max over iterations, in ms.
 * - Bandwidth, nccl-tests' definitions, from the median time t:
 *   algbw = bytes / t, busbw = algbw * 2(n-1)/n (what each rank's link
 *   carries in a ring all-reduce, comparable across world sizes; 0 for one
 *   rank). GB/s are 1e9 bytes per second.
 * - Correctness: after the timed loop, never inside it, recv is compared
 *   exactly with the sum over ranks; a mismatch fails the job with the first
 *   bad index and both values.
 * - Failures: allocation and the check are agreed over ranks, so one rank
 *   out of memory makes the whole job an "oom" row; buffers and the
 *   communicator are freed on every path. */
#include "config.h"
#include "collective/comm.h"
#include "collective/pattern.h"
#include "common/check.h"
#include "common/clock.h"
#include "harness/kind.h"
#include "jobs/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_MPI
#include "common/check_mpi.h"
#endif

static const char *const backends[] = {"mpi", "nccl", NULL};

typedef struct allreduce_settings {
  run_settings run;
  const char *backend;
  int warmup;
  int iters;
  double size_mib;
} allreduce_settings;

static const param_def params[] = {
    COMMON_PARAMS(allreduce_settings),
    {"run", "backend", STRING_FIELD(allreduce_settings, backend), 0, 0,
     backends, NULL, NULL,
     "mpi: host buffers reduced by MPI between CPU processes; "
     "nccl: device buffers reduced by NCCL, one GPU per process"},
    {"run", "warmup", INT_FIELD(allreduce_settings, warmup), 0, 1000000, NULL,
     NULL, "5", "untimed all-reduces before timing"},
    {"run", "iters", INT_FIELD(allreduce_settings, iters), 1, 10000000, NULL,
     NULL, NULL, "timed all-reduces"},
    {"allreduce", "size_mib", FLOAT_FIELD(allreduce_settings, size_mib),
     4.0 / 1048576.0, 65536, NULL, "MiB", NULL,
     "bytes of fp32 data per rank, in MiB (2^20 bytes)"},
};

static const char *const metrics[] = {
    "bytes",          "time_ms_mean", "time_ms_std", "time_ms_median",
    "time_ms_min",    "time_ms_max",  "algbw_gbps",  "busbw_gbps",
    NULL,
};

static int validate(const void *settings, char *err, size_t n) {
  const allreduce_settings *s = settings;
  double bytes = s->size_mib * 1048576.0;
  if (bytes != floor(bytes) || fmod(bytes, 4.0) != 0.0) {
    snprintf(err, n,
             "size_mib = %g is %.17g bytes, not a whole number of fp32 "
             "elements (allowed: sizes that are multiples of 4 bytes)",
             s->size_mib, bytes);
    return BLAME(allreduce_settings, size_mib);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

/* Any seed works; fixed so a failing row can be reproduced exactly. */
enum { SEED = 20240601 };

typedef struct {
  comm *c;
  size_t bytes, count;
  int warmup, iters;
  void *send, *recv;
  double *t;              /* seconds per timed iteration */
} bench;

/* Every rank learns whether any rank failed a step; a failed rank keeps its
 * own message, the others name it. The worst code wins (ERR_OOM < ERR_FAIL),
 * so the job's status is "oom" when any rank ran out of memory. */
static int agree(int rc, const char *step) {
#ifdef HAVE_MPI
  int rank;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  int in[2] = {rc < 0 ? rc : 0, rank}, out[2];
  CHECK_MPI(MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
  if (out[0] < 0 && rc >= 0)
    FAIL(out[0], "allreduce: %s failed on rank %d (see its message)", step,
         out[1]);
  return rc < 0 ? rc : 0;
#else
  return rc;
#endif
}

static int setup(bench *x) {
  int rank = comm_rank(x->c);
  x->t = malloc((size_t)x->iters * sizeof *x->t);
  CHECK_ALLOC(x->t, (size_t)x->iters * sizeof *x->t);
  TRY(comm_alloc(x->c, x->bytes, &x->send));
  TRY(comm_alloc(x->c, x->bytes, &x->recv));
  TRY(pattern_fill(x->c, x->send, COMM_F32, x->count, 0, SEED, rank));
  TRY(pattern_fill(x->c, x->recv, COMM_F32, x->count, 0, SEED + 1, rank));
  return 0;
}

static int timed_loop(bench *x) {
  const float *send = x->send;
  float *recv = x->recv;
  for (int i = 0; i < x->warmup; i++)
    TRY(comm_allreduce_f32(x->c, send, recv, x->count, NULL));
  TRY(comm_barrier(x->c));
  for (int i = 0; i < x->iters; i++) {
    TRY(comm_barrier(x->c));
    double t0 = clock_now_s();
    TRY(comm_allreduce_f32(x->c, send, recv, x->count, NULL));
    x->t[i] = clock_now_s() - t0;
  }
  return 0;
}

static int verify(bench *x) {
  pattern_table want;
  pattern_mismatch bad;
  pattern_expect(&want, 0, comm_size(x->c), COMM_SUM);
  TRY(pattern_check(x->c, x->recv, COMM_F32, x->count, 0, SEED, &want,
                    &bad));
  if (bad.count > 0)
    FAIL(ERR_FAIL,
         "allreduce: wrong result on rank %d: %zu of %zu elements differ, "
         "the first at index %zu: got %.9g, expected %.9g",
         comm_rank(x->c), bad.count, x->count, bad.index, bad.got, bad.want);
  return 0;
}

static void report(const bench *x, result *r) {
  int world = comm_size(x->c);
  sample_stats s = stats_of(x->t, x->iters);
  double algbw = (double)x->bytes / s.median / 1e9;
  result_set(r, "bytes", (double)x->bytes);
  result_set(r, "time_ms_mean", s.mean * 1e3);
  result_set(r, "time_ms_std", s.std * 1e3);
  result_set(r, "time_ms_median", s.median * 1e3);
  result_set(r, "time_ms_min", s.min * 1e3);
  result_set(r, "time_ms_max", s.max * 1e3);
  result_set(r, "algbw_gbps", algbw);
  result_set(r, "busbw_gbps", algbw * 2.0 * (world - 1) / world);
}

static int measure(bench *x, result *r) {
  TRY(agree(setup(x), "allocating and filling the buffers"));
  TRY(timed_loop(x));
  TRY(comm_world_max(x->t, x->iters));
  TRY(agree(verify(x), "checking the result"));
  report(x, r);
  return 0;
}

static int run(const void *settings, result *r) {
  const allreduce_settings *s = settings;
  comm_backend b;
  if (comm_backend_parse(s->backend, &b) != 0)
    FAIL(ERR_FAIL, "allreduce: unknown backend \"%s\"", s->backend);
  bench x = {0};
  x.bytes = (size_t)(s->size_mib * 1048576.0);
  x.count = x.bytes / sizeof(float);
  x.warmup = s->warmup;
  x.iters = s->iters;
  TRY(comm_open(&x.c, b));
  int rc = measure(&x, r);
  comm_free(x.c, x.send);
  comm_free(x.c, x.recv);
  free(x.t);
  comm_close(x.c);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  return rc;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_allreduce = {
    .name = "allreduce",
    .summary = "time an fp32 all-reduce: MPI between CPU ranks or NCCL "
               "between GPUs",
    .gpu_backend = "nccl",
    KIND_TABLES(allreduce_settings, validate),
};
