/* Job kind `collective`: times one of the collective layer's operations
 * (collective/comm.h) on fp32 data, MPI between CPU ranks or NCCL between
 * GPUs, the way nccl-tests measures. The allreduce kind (the handout's
 * distributed_communication_single_node) is this benchmark at op
 * all_reduce; the others are the ones sharded training runs on
 * (all-gather and reduce-scatter for FSDP and ZeRO, broadcast for the
 * initial weights, all-to-all for expert parallelism).
 *
 * - Sizes, as nccl-tests counts them: size_mib is a rank's larger buffer:
 *   all_reduce, broadcast and all_to_all send and receive that much;
 *   all_gather receives it (each rank sends one block of it) and
 *   reduce_scatter sends it (each rank receives one block). The block-wise
 *   ops (all_gather, reduce_scatter, all_to_all) round it down to whole
 *   fp32 elements a block; `bytes` in the row is the size timed.
 * - Buffers: out of place (separate send and recv; broadcast in place,
 *   comm_broadcast's form), so every iteration moves the same input and
 *   values never grow; host memory for mpi, device memory on the rank's
 *   GPU for nccl. send holds the pattern of collective/pattern.h (small
 *   integers from (seed, rank, index), so fp32 sums are exact in any
 *   order); recv (broadcast: every rank's buffer but the root's) starts as
 *   another seed's pattern, so an operation that writes nothing cannot
 *   pass the check.
 * - Timing: `warmup` untimed operations, a barrier, then `iters` timed
 *   ones. Each is preceded by an untimed barrier, so the ranks start
 *   together and no iteration carries the tail of the one before, and is
 *   timed with CLOCK_MONOTONIC around the synchronous call, which on NCCL
 *   ends with cudaStreamSynchronize: op + synchronize, as torch.distributed
 *   rows are timed, so our rows compare with the PyTorch anchors.
 * - Combining ranks: per iteration the MAX over ranks (an operation is done
 *   when its slowest rank is), then mean, sample standard deviation (n - 1;
 *   NaN for one iteration), median, min and max over iterations, in ms.
 * - Bandwidth, nccl-tests' definitions, from the median time t:
 *   algbw = bytes / t; busbw = algbw x 2(n-1)/n for all_reduce, x (n-1)/n
 *   for all_gather, reduce_scatter and all_to_all, x 1 for broadcast: what
 *   each rank's link carries in the ring algorithms, comparable across
 *   operations and world sizes (0 for one rank). GB/s are
 *   1e9 bytes per second.
 * - Correctness: after the timed loop, never inside it, every rank's
 *   output is compared exactly with what the operation must give (each
 *   block with the rank that sent it, or the sum over ranks); a mismatch
 *   fails the job with the rank, the first bad index and both values.
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_MPI
#include "common/check_mpi.h"
#endif

static const char *const backends[] = {"mpi", "nccl", NULL};
/* collective_ops' names, in its order */
static const char *const op_names[] = {"all_reduce", "all_gather",
                                       "reduce_scatter", "broadcast",
                                       "all_to_all", NULL};

typedef struct collective_settings {
  run_settings run;
  const char *backend;
  int warmup;
  int iters;
  const char *op;
  double size_mib;
} collective_settings;

static const param_def params[] = {
    COMMON_PARAMS(collective_settings),
    {"run", "backend", STRING_FIELD(collective_settings, backend), 0, 0,
     backends, NULL, NULL,
     "mpi: host buffers moved by MPI between CPU processes; "
     "nccl: device buffers moved by NCCL, one GPU per process"},
    {"run", "warmup", INT_FIELD(collective_settings, warmup), 0, 1000000,
     NULL, NULL, "5", "untimed operations before timing"},
    {"run", "iters", INT_FIELD(collective_settings, iters), 1, 10000000, NULL,
     NULL, NULL, "timed operations"},
    {"collective", "op", STRING_FIELD(collective_settings, op), 0, 0,
     op_names, NULL, NULL,
     "the operation: all_reduce, all_gather, reduce_scatter, broadcast "
     "(from rank 0) or all_to_all"},
    {"collective", "size_mib", FLOAT_FIELD(collective_settings, size_mib),
     4.0 / 1048576.0, 65536, NULL, "MiB", NULL,
     "a rank's larger buffer, fp32, in MiB (2^20 bytes): all_gather's "
     "output, reduce_scatter's input, the others' either; the block-wise "
     "ones round it down to whole elements a rank"},
};

static const char *const metrics[] = {COLLECTIVE_METRICS, NULL};

/* 1: the buffers are world_size blocks of one size (all_gather,
 * reduce_scatter, all_to_all). */
static int blockwise(const char *op) {
  return strcmp(op, "all_gather") == 0 || strcmp(op, "reduce_scatter") == 0 ||
         strcmp(op, "all_to_all") == 0;
}

/* What the allreduce kind checks too (its size_mib row is this one's). */
int collective_size_error(double size_mib, char *err, size_t n) {
  double bytes = size_mib * 1048576.0;
  if (bytes != floor(bytes) || fmod(bytes, 4.0) != 0.0) {
    snprintf(err, n,
             "size_mib = %g is %.17g bytes, not a whole number of fp32 "
             "elements (allowed: sizes that are multiples of 4 bytes)",
             size_mib, bytes);
    return -1;
  }
  return 0;
}

static int validate(const void *settings, char *err, size_t n) {
  const collective_settings *s = settings;
  if (collective_size_error(s->size_mib, err, n) != 0)
    return BLAME(collective_settings, size_mib);
  double elems = s->size_mib * 1048576.0 / 4.0;
  if (blockwise(s->op) && elems < s->run.world_size) {
    snprintf(err, n,
             "size_mib = %g holds %.0f fp32 elements, fewer than one a rank "
             "of world_size %d (allowed for %s: at least 4 x world_size "
             "bytes)",
             s->size_mib, elems, s->run.world_size, s->op);
    return BLAME(collective_settings, size_mib);
  }
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

/* Any seed works; fixed so a failing row can be reproduced exactly. */
enum { SEED = 20240601 };

typedef struct bench bench;
/* An operation: its call on the bench's buffers, its check of this rank's
 * output, and busbw / algbw on n ranks. */
typedef struct {
  const char *name;
  int (*call)(bench *x);
  int (*check)(bench *x, pattern_mismatch *bad);
  double (*bus)(int n);
} collective_op;

struct bench {
  const collective_op *op;
  comm *c;
  int rank, n;
  size_t count;           /* elements of the larger buffer */
  size_t block;           /* count / n (block-wise ops) */
  int warmup, iters;
  void *send, *recv;      /* broadcast: recv alone */
  double *t;              /* seconds per timed iteration */
};

/* Checks `nel` elements of buf (at element `at` of recv) against the
 * pattern of ranks lo .. lo + nranks - 1 reduced by SUM (one rank: its own
 * values) at indices from `first`; the first mismatch found is kept. */
static int check_part(bench *x, size_t at, size_t nel, size_t first, int lo,
                      int nranks, pattern_mismatch *bad) {
  pattern_table want;
  pattern_mismatch m;
  pattern_expect(&want, lo, nranks, COMM_SUM);
  TRY(pattern_check(x->c, (const float *)x->recv + at, COMM_F32, nel, first,
                    SEED, &want, &m));
  if (m.count > 0 && bad->count == 0) {
    *bad = m;
    bad->index += at;
  } else {
    bad->count += m.count;
  }
  return 0;
}

static int all_reduce(bench *x) {
  return comm_allreduce(x->c, x->send, x->recv, x->count, COMM_F32, COMM_SUM,
                        NULL);
}
static int check_all_reduce(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->count, 0, 0, x->n, bad);
}
/* rank r sends block r of one logical buffer (its indices), so recv is
 * that buffer whole */
static int all_gather(bench *x) {
  return comm_allgather(x->c, x->send, x->recv, x->block, COMM_F32, NULL);
}
static int check_all_gather(bench *x, pattern_mismatch *bad) {
  for (int j = 0; j < x->n; j++)
    TRY(check_part(x, (size_t)j * x->block, x->block, (size_t)j * x->block,
                   j, 1, bad));
  return 0;
}
static int reduce_scatter(bench *x) {
  return comm_reduce_scatter(x->c, x->send, x->recv, x->block, COMM_F32,
                             COMM_SUM, NULL);
}
static int check_reduce_scatter(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->block, (size_t)x->rank * x->block, 0, x->n, bad);
}
static int broadcast(bench *x) {
  return comm_broadcast(x->c, x->recv, x->count, COMM_F32, 0, NULL);
}
static int check_broadcast(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->count, 0, 0, 1, bad);
}
/* recv block j: rank j's block r (this rank's), at its indices */
static int all_to_all(bench *x) {
  return comm_alltoall(x->c, x->send, x->recv, x->block, COMM_F32, NULL);
}
static int check_all_to_all(bench *x, pattern_mismatch *bad) {
  for (int j = 0; j < x->n; j++)
    TRY(check_part(x, (size_t)j * x->block, x->block,
                   (size_t)x->rank * x->block, j, 1, bad));
  return 0;
}
static double bus_all_reduce(int n) { return 2.0 * (n - 1) / n; }
static double bus_ring(int n) { return (double)(n - 1) / n; }
static double bus_one(int n) { return (void)n, 1.0; }

/* In op_names' order. */
static const collective_op collective_ops[] = {
    {"all_reduce", all_reduce, check_all_reduce, bus_all_reduce},
    {"all_gather", all_gather, check_all_gather, bus_ring},
    {"reduce_scatter", reduce_scatter, check_reduce_scatter, bus_ring},
    {"broadcast", broadcast, check_broadcast, bus_one},
    {"all_to_all", all_to_all, check_all_to_all, bus_ring},
};

/* Every rank learns whether any rank failed a step; a failed rank keeps its
 * own message, the others name it. The worst code wins (ERR_OOM < ERR_FAIL),
 * so the job's status is "oom" when any rank ran out of memory. */
static int agree(const bench *x, int rc, const char *step) {
#ifdef HAVE_MPI
  int rank;
  CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  int in[2] = {rc < 0 ? rc : 0, rank}, out[2];
  CHECK_MPI(MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD));
  if (out[0] < 0 && rc >= 0)
    FAIL(out[0], "%s: %s failed on rank %d (see its message)", x->op->name,
         step, out[1]);
  return rc < 0 ? rc : 0;
#else
  (void)x;
  (void)step;
  return rc;
#endif
}

/* send: all_gather's one block (at its indices in the gathered buffer),
 * the others' whole buffer; broadcast has none. recv: another seed's
 * pattern, but the broadcast root's, which is the data. */
static int setup(bench *x) {
  bool gather = x->op->call == all_gather, bcast = x->op->call == broadcast;
  size_t nsend = gather ? x->block : x->count;
  size_t nrecv = x->op->call == reduce_scatter ? x->block : x->count;
  x->t = malloc((size_t)x->iters * sizeof *x->t);
  CHECK_ALLOC(x->t, (size_t)x->iters * sizeof *x->t);
  if (!bcast) {
    TRY(comm_alloc(x->c, nsend * sizeof(float), &x->send));
    TRY(pattern_fill(x->c, x->send, COMM_F32, nsend,
                     gather ? (size_t)x->rank * x->block : 0, SEED, x->rank));
  }
  TRY(comm_alloc(x->c, nrecv * sizeof(float), &x->recv));
  bool data = bcast && x->rank == 0;
  TRY(pattern_fill(x->c, x->recv, COMM_F32, nrecv, 0, data ? SEED : SEED + 1,
                   x->rank));
  return 0;
}

static int timed_loop(bench *x) {
  for (int i = 0; i < x->warmup; i++) TRY(x->op->call(x));
  TRY(comm_barrier(x->c));
  for (int i = 0; i < x->iters; i++) {
    TRY(comm_barrier(x->c));
    double t0 = clock_now_s();
    TRY(x->op->call(x));
    x->t[i] = clock_now_s() - t0;
  }
  return 0;
}

static int verify(bench *x) {
  pattern_mismatch bad = {0};
  TRY(x->op->check(x, &bad));
  if (bad.count > 0)
    FAIL(ERR_FAIL,
         "%s: wrong result on rank %d: %zu of %zu elements differ, the "
         "first at index %zu: got %.9g, expected %.9g",
         x->op->name, x->rank, bad.count,
         x->op->call == reduce_scatter ? x->block : x->count, bad.index,
         bad.got, bad.want);
  return 0;
}

static void report(const bench *x, result *r) {
  sample_stats s = stats_of(x->t, x->iters);
  double bytes = (double)x->count * sizeof(float);
  double algbw = bytes / s.median / 1e9;
  result_set(r, "bytes", bytes);
  result_set(r, "time_ms_mean", s.mean * 1e3);
  result_set(r, "time_ms_std", s.std * 1e3);
  result_set(r, "time_ms_median", s.median * 1e3);
  result_set(r, "time_ms_min", s.min * 1e3);
  result_set(r, "time_ms_max", s.max * 1e3);
  result_set(r, "algbw_gbps", algbw);
  result_set(r, "busbw_gbps", x->n > 1 ? algbw * x->op->bus(x->n) : 0.0);
}

static int measure(bench *x, result *r) {
  TRY(agree(x, setup(x), "allocating and filling the buffers"));
  TRY(timed_loop(x));
  TRY(comm_world_max(x->t, x->iters));
  TRY(agree(x, verify(x), "checking the result"));
  report(x, r);
  return 0;
}

int collective_bench(const char *backend, const char *op, double size_mib,
                     int warmup, int iters, result *r) {
  comm_backend b;
  if (comm_backend_parse(backend, &b) != 0)
    FAIL(ERR_FAIL, "collective: unknown backend \"%s\"", backend);
  bench x = {0};
  for (size_t i = 0; i < sizeof collective_ops / sizeof *collective_ops; i++)
    if (strcmp(collective_ops[i].name, op) == 0) x.op = &collective_ops[i];
  if (!x.op) FAIL(ERR_FAIL, "collective: unknown op \"%s\"", op);
  x.warmup = warmup;
  x.iters = iters;
  TRY(comm_open(&x.c, b));
  x.rank = comm_rank(x.c);
  x.n = comm_size(x.c);
  x.count = (size_t)(size_mib * 1048576.0) / sizeof(float);
  if (blockwise(op)) {
    x.block = x.count / (size_t)x.n;
    x.count = x.block * (size_t)x.n;
  }
  int rc = x.count > 0 ? measure(&x, r)
                       : err_set(ERR_FAIL, __FILE__, __LINE__,
                                 "%s: %g MiB is less than one fp32 element a "
                                 "rank of %d", op, size_mib, x.n);
  comm_free(x.c, x.send);
  comm_free(x.c, x.recv);
  free(x.t);
  comm_close(x.c);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  return rc;
}

static int run(const void *settings, result *r) {
  const collective_settings *s = settings;
  return collective_bench(s->backend, s->op, s->size_mib, s->warmup, s->iters,
                          r);
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_collective = {
    .name = "collective",
    .summary = "time an fp32 all-reduce, all-gather, reduce-scatter, "
               "broadcast or all-to-all: MPI between CPU ranks or NCCL "
               "between GPUs",
    .gpu_backend = "nccl",
    KIND_TABLES(collective_settings, validate),
};
