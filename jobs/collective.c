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

/* A rank's buffer for an operation: none (in place: the root's recv holds
 * the data), the whole size, the size as world_size blocks (block j for or
 * from rank j), or one such block (rank r's is block r of the whole). */
enum { BUF_NONE, BUF_WHOLE, BUF_BLOCKS, BUF_BLOCK };
/* The operations, each declared once: X(NAME, SEND, RECV, BUS), SEND and
 * RECV BUF_*; with blocks the size rounds down to whole ones. BUS: busbw /
 * algbw on n ranks, nccl-tests' factors. The run side defines call_NAME
 * and check_NAME. */
#define COLLECTIVE_OPS(X)                                          \
  X(all_reduce, BUF_WHOLE, BUF_WHOLE, 2.0 * (n - 1) / n)           \
  X(all_gather, BUF_BLOCK, BUF_BLOCKS, (double)(n - 1) / n)        \
  X(reduce_scatter, BUF_BLOCKS, BUF_BLOCK, (double)(n - 1) / n)    \
  X(broadcast, BUF_NONE, BUF_WHOLE, 1.0)                           \
  X(all_to_all, BUF_BLOCKS, BUF_BLOCKS, (double)(n - 1) / n)

#define OP_NAME(name, send, recv, bus) #name,
static const char *const op_names[] = {COLLECTIVE_OPS(OP_NAME) NULL};
#define OP_BLOCKS(name, send, recv, bus) \
  ((send) >= BUF_BLOCKS || (recv) >= BUF_BLOCKS),
static const bool op_blockwise[] = {COLLECTIVE_OPS(OP_BLOCKS)};

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
    COLLECTIVE_RUN_PARAMS(collective_settings),
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

/* op's index in op_names, or -1 */
static int op_index(const char *op) {
  for (int i = 0; op_names[i]; i++)
    if (strcmp(op_names[i], op) == 0) return i;
  return -1;
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
  int i = op_index(s->op);
  if (i >= 0 && op_blockwise[i] && elems < s->run.world_size) {
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
/* An operation on the bench's buffers: the call, the check of this rank's
 * output (collecting mismatches into bad), its buffers and bus factor. */
typedef struct {
  int (*call)(bench *x);
  int (*check)(bench *x, pattern_mismatch *bad);
  int send, recv;        /* BUF_* */
  double (*bus)(int n);
} collective_op;

struct bench {
  const collective_op *op;
  const char *name;       /* op's */
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

static int call_all_reduce(bench *x) {
  return comm_allreduce(x->c, x->send, x->recv, x->count, COMM_F32, COMM_SUM,
                        NULL);
}
static int check_all_reduce(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->count, 0, 0, x->n, bad);
}
/* rank r sends block r of one logical buffer (its indices), so recv is
 * that buffer whole */
static int call_all_gather(bench *x) {
  return comm_allgather(x->c, x->send, x->recv, x->block, COMM_F32, NULL);
}
static int check_all_gather(bench *x, pattern_mismatch *bad) {
  for (int j = 0; j < x->n; j++)
    TRY(check_part(x, (size_t)j * x->block, x->block, (size_t)j * x->block,
                   j, 1, bad));
  return 0;
}
static int call_reduce_scatter(bench *x) {
  return comm_reduce_scatter(x->c, x->send, x->recv, x->block, COMM_F32,
                             COMM_SUM, NULL);
}
static int check_reduce_scatter(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->block, (size_t)x->rank * x->block, 0, x->n, bad);
}
static int call_broadcast(bench *x) {
  return comm_broadcast(x->c, x->recv, x->count, COMM_F32, 0, NULL);
}
static int check_broadcast(bench *x, pattern_mismatch *bad) {
  return check_part(x, 0, x->count, 0, 0, 1, bad);
}
/* recv block j: rank j's block r (this rank's), at its indices */
static int call_all_to_all(bench *x) {
  return comm_alltoall(x->c, x->send, x->recv, x->block, COMM_F32, NULL);
}
static int check_all_to_all(bench *x, pattern_mismatch *bad) {
  for (int j = 0; j < x->n; j++)
    TRY(check_part(x, (size_t)j * x->block, x->block,
                   (size_t)x->rank * x->block, j, 1, bad));
  return 0;
}
#define OP_BUS(name, send, recv, bus) \
  static double bus_##name(int n) { return (void)n, (bus); }
COLLECTIVE_OPS(OP_BUS)
#define OP_ROW(name, send, recv, bus) \
  {call_##name, check_##name, send, recv, bus_##name},
/* In op_names' order. */
static const collective_op collective_ops[] = {COLLECTIVE_OPS(OP_ROW)};

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
    FAIL(out[0], "%s: %s failed on rank %d (see its message)", x->name,
         step, out[1]);
  return rc < 0 ? rc : 0;
#else
  (void)x;
  (void)step;
  return rc;
#endif
}

/* A buffer's elements: the whole size, or one block of it. */
static size_t buf_elems(const bench *x, int shape) {
  return shape == BUF_BLOCK ? x->block : x->count;
}

/* send: the pattern at its indices in the whole (a BUF_BLOCK: this rank's
 * block); recv: another seed's, but where the root's recv is the data
 * (send BUF_NONE). */
static int setup(bench *x) {
  x->t = malloc((size_t)x->iters * sizeof *x->t);
  CHECK_ALLOC(x->t, (size_t)x->iters * sizeof *x->t);
  if (x->op->send != BUF_NONE) {
    size_t n = buf_elems(x, x->op->send);
    TRY(comm_alloc(x->c, n * sizeof(float), &x->send));
    TRY(pattern_fill(x->c, x->send, COMM_F32, n,
                     x->op->send == BUF_BLOCK ? (size_t)x->rank * x->block : 0,
                     SEED, x->rank));
  }
  size_t n = buf_elems(x, x->op->recv);
  TRY(comm_alloc(x->c, n * sizeof(float), &x->recv));
  bool data = x->op->send == BUF_NONE && x->rank == 0;
  TRY(pattern_fill(x->c, x->recv, COMM_F32, n, 0, data ? SEED : SEED + 1,
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
         x->name, x->rank, bad.count, buf_elems(x, x->op->recv), bad.index,
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
  int i = op_index(op);
  if (i < 0) FAIL(ERR_FAIL, "collective: unknown op \"%s\"", op);
  x.op = &collective_ops[i];
  x.name = op_names[i];
  x.warmup = warmup;
  x.iters = iters;
  TRY(comm_open(&x.c, b));
  x.rank = comm_rank(x.c);
  x.n = comm_size(x.c);
  x.count = (size_t)(size_mib * 1048576.0) / sizeof(float);
  if (op_blockwise[i]) {
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
