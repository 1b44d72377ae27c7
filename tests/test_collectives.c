/* The collective layer on several ranks:
 *
 *   mpirun -np N tests/test_collectives [mpi|nccl]
 *
 * For element counts that divide nothing evenly (1, 7, 1000, 65537,
 * 1000003) every collective is checked against patterns made from (seed,
 * rank, index): all-reduce sync / async / in place / out of place with sum,
 * max and min and every dtype the backend reduces, broadcast from the last
 * rank, reduce-scatter and all-gather (also in place, NCCL's convention),
 * all-to-all,
 * two asynchronous operations in flight at once; then the barrier and the
 * errors the layer must report instead of calling the library. Results are
 * compared exactly; every output buffer starts as another seed's pattern so
 * an operation that writes nothing fails.
 *
 * Every rank prints its own failures (stderr); rank 0 prints one line per
 * check, "ok  ..." or "FAIL ...", and a summary. Exit 0 when every check
 * passed on every rank, 1 otherwise (agreed over ranks), 77 for nccl when
 * there are fewer GPUs than ranks on a node or no NCCL in the build.
 * Built without MPI it runs as a world of one rank. */
#include "config.h"
#include "collective/comm.h"
#include "collective/pattern.h"
#include "common/check.h"
#include "common/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

typedef struct {
  comm *c;
  int rank, size;
  int checks, failed;
  uint32_t seed;          /* a new one per check: stale data cannot pass */
} suite;

static const char *dtype_name(comm_dtype t) {
  static const char *const names[] = {"f32", "f64", "i32", "f16", "bf16"};
  return names[t];
}

static const char *op_name(comm_op op) {
  return op == COMM_SUM ? "sum" : op == COMM_MAX ? "max"
         : op == COMM_MIN ? "min" : "avg";
}

/* Sum of an int over ranks (a world of one without MPI). */
static int sum_over_ranks(int v) {
#ifdef HAVE_MPI
  int total = 0;
  MPI_Allreduce(&v, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
#else
  return v;
#endif
}

/* One check's verdict, agreed over ranks: `bad` is this rank's (its details
 * already printed); rank 0 prints the line. */
static void verdict(suite *s, int bad, const char *name) {
  int nbad = sum_over_ranks(bad != 0);
  s->checks++;
  if (nbad) s->failed++;
  if (s->rank == 0) {
    if (nbad) printf("FAIL %s (on %d of %d ranks)\n", name, nbad, s->size);
    else printf("ok  %s\n", name);
    fflush(stdout);
  }
}

/* A failed call: print the layer's whole trace and count this rank bad. */
static int call_failed(suite *s, const char *name) {
  fprintf(stderr, "rank %d: %s: error:\n%s\n", s->rank, name, err_msg());
  return 1;
}

/* Check n elements at buf (indices from `first`) against want; print the
 * first difference. Returns 1 if this rank saw a difference or an error. */
static int expect(suite *s, const char *name, const void *buf, comm_dtype t,
                  size_t n, size_t first, const pattern_table *want) {
  pattern_mismatch bad;
  if (pattern_check(s->c, buf, t, n, first, s->seed, want, &bad) < 0)
    return call_failed(s, name);
  if (bad.count == 0) return 0;
  fprintf(stderr,
          "rank %d: FAIL %s: %zu of %zu elements wrong, first at index "
          "%zu: got %g, expected %g\n",
          s->rank, name, bad.count, n, bad.index, bad.got, bad.want);
  return 1;
}

/* Buffers for one check, freed by release(). */
typedef struct {
  void *a, *b;
} bufs;

static int acquire(suite *s, bufs *m, size_t bytes_a, size_t bytes_b) {
  m->a = m->b = NULL;
  TRY(comm_alloc(s->c, bytes_a, &m->a));
  TRY(comm_alloc(s->c, bytes_b, &m->b));
  return 0;
}

static void release(suite *s, bufs *m) {
  comm_free(s->c, m->a);
  comm_free(s->c, m->b);
}

/* The end of every check: buffers that could not be had or a call that
 * failed (rc < 0) fail it, else the body's 0 / 1; the buffers go back. */
static void conclude(suite *s, const char *name, bufs *m, int acquired,
                     int rc) {
  int bad = !acquired || rc < 0 ? call_failed(s, name) : rc;
  release(s, m);
  verdict(s, bad, name);
}

/* An asynchronous call must hand out a handle; complete it. */
static int wait_for(suite *s, int async, comm_req *req) {
  if (async && !req)
    FAIL(ERR_FAIL, "an asynchronous call returned no handle");
  TRY(comm_wait(s->c, req));
  return 0;
}

/* ---- the checker itself --------------------------------------------------- */

/* A buffer whose second half holds another seed's values must be reported
 * with the exact count, first index and both values: a checker that always
 * passes would make every other check meaningless. */
static int checker_body(suite *s, const char *name, void *buf, comm_dtype t,
                        size_t n) {
  size_t half = n / 2, sz = comm_dtype_size(t);
  TRY(pattern_fill(s->c, buf, t, half, 0, s->seed, s->rank));
  TRY(pattern_fill(s->c, (char *)buf + half * sz, t, n - half, half,
                   s->seed + 1, s->rank));
  pattern_table want;
  pattern_mismatch bad;
  pattern_expect(&want, s->rank, 1, COMM_SUM);
  TRY(pattern_check(s->c, buf, t, n, 0, s->seed, &want, &bad));
  double got = pattern_value(pattern_key(half, s->seed + 1), s->rank);
  double exp = pattern_value(pattern_key(half, s->seed), s->rank);
  if (bad.count == n - half && bad.index == half && bad.got == got &&
      bad.want == exp)
    return 0;
  fprintf(stderr,
          "rank %d: FAIL %s: reported %zu wrong from index %zu (got %g, "
          "want %g); planted %zu from index %zu (got %g, want %g)\n",
          s->rank, name, bad.count, bad.index, bad.got, bad.want, n - half,
          half, got, exp);
  return 1;
}

static void check_checker(suite *s, comm_dtype t) {
  const size_t n = 1001;
  char name[160];
  snprintf(name, sizeof name, "pattern check finds planted errors (%s)",
           dtype_name(t));
  s->seed++;
  void *buf = NULL;
  int bad;
  if (comm_alloc(s->c, n * comm_dtype_size(t), &buf) < 0)
    bad = call_failed(s, name);
  else {
    int rc = checker_body(s, name, buf, t, n);
    bad = rc < 0 ? call_failed(s, name) : rc;
  }
  comm_free(s->c, buf);
  verdict(s, bad, name);
}

/* ---- all-reduce ----------------------------------------------------------- */

static int allreduce_body(suite *s, const char *name, bufs *m, size_t n,
                          comm_dtype t, comm_op op, int inplace, int async) {
  void *send = m->a, *recv = inplace ? m->a : m->b;
  TRY(pattern_fill(s->c, send, t, n, 0, s->seed, s->rank));
  if (!inplace) TRY(pattern_fill(s->c, recv, t, n, 0, s->seed + 1, s->rank));
  comm_req *req = NULL;
  TRY(comm_allreduce(s->c, send, recv, n, t, op, async ? &req : NULL));
  TRY(wait_for(s, async, req));
  pattern_table want;
  pattern_expect(&want, 0, s->size, op);
  return expect(s, name, recv, t, n, 0, &want);
}

static void check_allreduce(suite *s, size_t n, comm_dtype t, comm_op op,
                            int inplace, int async) {
  char name[160];
  snprintf(name, sizeof name, "allreduce %s %s count=%zu %s %s",
           dtype_name(t), op_name(op), n,
           inplace ? "in-place" : "out-of-place", async ? "async" : "sync");
  s->seed++;
  size_t bytes = n * comm_dtype_size(t);
  bufs m;
  int ok = acquire(s, &m, bytes, bytes) == 0;
  int rc = ok ? allreduce_body(s, name, &m, n, t, op, inplace, async) : 0;
  conclude(s, name, &m, ok, rc);
}

/* Two all-reduces in flight at once, waited for in the reverse order: the
 * handles must be independent. */
static int two_body(suite *s, const char *name, bufs *m, size_t n) {
  float *x = m->a, *y = m->b;
  TRY(pattern_fill(s->c, x, COMM_F32, n, 0, s->seed, s->rank));
  TRY(pattern_fill(s->c, y, COMM_F32, n, 0, s->seed, s->rank));
  comm_req *rx, *ry;
  TRY(comm_allreduce(s->c, x, x, n, COMM_F32, COMM_SUM, &rx));
  TRY(comm_allreduce(s->c, y, y, n, COMM_F32, COMM_MAX, &ry));
  TRY(wait_for(s, 1, ry));
  TRY(wait_for(s, 1, rx));
  pattern_table sum, max;
  pattern_expect(&sum, 0, s->size, COMM_SUM);
  pattern_expect(&max, 0, s->size, COMM_MAX);
  return expect(s, name, x, COMM_F32, n, 0, &sum) |
         expect(s, name, y, COMM_F32, n, 0, &max);
}

static void check_two_in_flight(suite *s, size_t n) {
  char name[160];
  snprintf(name, sizeof name,
           "allreduce f32 sum+max count=%zu two async in flight", n);
  s->seed++;
  bufs m;
  int ok = acquire(s, &m, n * 4, n * 4) == 0;
  int rc = ok ? two_body(s, name, &m, n) : 0;
  conclude(s, name, &m, ok, rc);
}

/* ---- broadcast ------------------------------------------------------------ */

static int broadcast_body(suite *s, const char *name, bufs *m, size_t n,
                          int root, int async) {
  /* Every rank starts with its own values: only root's may remain. */
  TRY(pattern_fill(s->c, m->a, COMM_F32, n, 0, s->seed, s->rank));
  comm_req *req = NULL;
  TRY(comm_broadcast(s->c, m->a, n, COMM_F32, root, async ? &req : NULL));
  TRY(wait_for(s, async, req));
  pattern_table want;
  pattern_expect(&want, root, 1, COMM_SUM);
  return expect(s, name, m->a, COMM_F32, n, 0, &want);
}

static void check_broadcast(suite *s, size_t n, int async) {
  int root = s->size - 1;
  char name[160];
  snprintf(name, sizeof name, "broadcast f32 count=%zu root=%d %s", n, root,
           async ? "async" : "sync");
  s->seed++;
  bufs m;
  int ok = acquire(s, &m, n * 4, 1) == 0;
  int rc = ok ? broadcast_body(s, name, &m, n, root, async) : 0;
  conclude(s, name, &m, ok, rc);
}

/* ---- reduce-scatter ------------------------------------------------------- */

/* send: size blocks of n, indices 0 .. size*n-1; rank r gets block r. In
 * place, the output is block r of the input buffer itself. */
static int reduce_scatter_body(suite *s, const char *name, bufs *m, size_t n,
                               comm_op op, int inplace, int async) {
  float *send = m->a;
  float *recv = inplace ? send + (size_t)s->rank * n : m->b;
  TRY(pattern_fill(s->c, send, COMM_F32, n * s->size, 0, s->seed, s->rank));
  if (!inplace)
    TRY(pattern_fill(s->c, recv, COMM_F32, n, 0, s->seed + 1, s->rank));
  comm_req *req = NULL;
  TRY(comm_reduce_scatter(s->c, send, recv, n, COMM_F32, op,
                          async ? &req : NULL));
  TRY(wait_for(s, async, req));
  pattern_table want;
  pattern_expect(&want, 0, s->size, op);
  return expect(s, name, recv, COMM_F32, n, (size_t)s->rank * n, &want);
}

static void check_reduce_scatter(suite *s, size_t n, comm_op op, int inplace,
                                 int async) {
  char name[160];
  snprintf(name, sizeof name, "reduce_scatter f32 %s recvcount=%zu %s %s",
           op_name(op), n, inplace ? "in-place" : "out-of-place",
           async ? "async" : "sync");
  s->seed++;
  bufs m;
  int ok = acquire(s, &m, n * s->size * 4, n * 4) == 0;
  int rc = ok ? reduce_scatter_body(s, name, &m, n, op, inplace, async) : 0;
  conclude(s, name, &m, ok, rc);
}

/* ---- all-gather ----------------------------------------------------------- */

/* Each rank sends n elements (indices 0 .. n-1 of its own pattern); block r
 * of the output must be rank r's. In place, the input is block rank of the
 * output buffer. */
static int allgather_body(suite *s, const char *name, bufs *m, size_t n,
                          int inplace, int async) {
  float *recv = m->b;
  float *send = inplace ? recv + (size_t)s->rank * n : m->a;
  TRY(pattern_fill(s->c, recv, COMM_F32, n * s->size, 0, s->seed + 1,
                   s->rank));
  TRY(pattern_fill(s->c, send, COMM_F32, n, 0, s->seed, s->rank));
  comm_req *req = NULL;
  TRY(comm_allgather(s->c, send, recv, n, COMM_F32, async ? &req : NULL));
  TRY(wait_for(s, async, req));
  int bad = 0;
  for (int r = 0; r < s->size; r++) {
    pattern_table want;
    pattern_expect(&want, r, 1, COMM_SUM);
    bad |= expect(s, name, recv + (size_t)r * n, COMM_F32, n, 0, &want);
  }
  return bad;
}

static void check_allgather(suite *s, size_t n, int inplace, int async) {
  char name[160];
  snprintf(name, sizeof name, "allgather f32 sendcount=%zu %s %s", n,
           inplace ? "in-place" : "out-of-place", async ? "async" : "sync");
  s->seed++;
  bufs m;
  int ok = acquire(s, &m, n * 4, n * s->size * 4) == 0;
  int rc = ok ? allgather_body(s, name, &m, n, inplace, async) : 0;
  conclude(s, name, &m, ok, rc);
}

/* ---- all-to-all ----------------------------------------------------------- */

/* Each rank sends size*n elements (indices 0 .. size*n-1 of its own
 * pattern), block j for rank j; this rank's block r of the output must be
 * rank r's indices [rank*n, (rank+1)*n). */
static int alltoall_body(suite *s, const char *name, bufs *m, size_t n,
                         int async) {
  float *send = m->a, *recv = m->b;
  size_t all = n * (size_t)s->size;
  TRY(pattern_fill(s->c, recv, COMM_F32, all, 0, s->seed + 1, s->rank));
  TRY(pattern_fill(s->c, send, COMM_F32, all, 0, s->seed, s->rank));
  comm_req *req = NULL;
  TRY(comm_alltoall(s->c, send, recv, n, COMM_F32, async ? &req : NULL));
  TRY(wait_for(s, async, req));
  int bad = 0;
  for (int r = 0; r < s->size; r++) {
    pattern_table want;
    pattern_expect(&want, r, 1, COMM_SUM);
    bad |= expect(s, name, recv + (size_t)r * n, COMM_F32, n,
                  (size_t)s->rank * n, &want);
  }
  return bad;
}

static void check_alltoall(suite *s, size_t n, int async) {
  char name[160];
  snprintf(name, sizeof name, "alltoall f32 count=%zu %s", n,
           async ? "async" : "sync");
  s->seed++;
  size_t bytes = n * (size_t)s->size * 4;
  bufs m;
  int ok = acquire(s, &m, bytes, bytes) == 0;
  int rc = ok ? alltoall_body(s, name, &m, n, async) : 0;
  conclude(s, name, &m, ok, rc);
}

/* ---- barrier -------------------------------------------------------------- */

/* The last rank arrives 200 ms late; nobody may leave before it came. Each
 * rank measures from the end of a first barrier, so no clocks are compared
 * across ranks; 150 ms leaves room for the first barrier's skew. */
static void check_barrier(suite *s) {
  const char *name = "barrier waits for the last rank (200 ms late)";
  if (s->size < 2) {
    if (s->rank == 0) printf("skip barrier (needs 2 ranks)\n");
    return;
  }
  int bad = 0;
  double waited = 0.0;
  if (comm_barrier(s->c) < 0) bad = call_failed(s, name);
  double t0 = clock_now_s();
  if (s->rank == s->size - 1) {
    struct timespec ts = {0, 200 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  if (!bad && comm_barrier(s->c) < 0) bad = call_failed(s, name);
  waited = clock_now_s() - t0;
  if (!bad && waited < 0.150) {
    fprintf(stderr, "rank %d: FAIL %s: left after %.1f ms\n", s->rank, name,
            waited * 1e3);
    bad = 1;
  }
  verdict(s, bad, name);
}

/* comm_local_size counts the ranks sharing this rank's node: under the
 * tests' mpirun every rank is on this machine, so it is the world's size
 * (the CPU engine's default threads divide the cores by it). */
static void check_local_size(suite *s) {
  const char *name = "comm_local_size: every rank on this node";
  int got = comm_local_size(s->c), bad = got != s->size;
  if (bad)
    fprintf(stderr, "rank %d: FAIL %s: %d of %d ranks\n", s->rank, name, got,
            s->size);
  verdict(s, bad, name);
}

/* ---- errors reported by the layer ----------------------------------------- */

/* Each is refused on every rank before any communication, so a failure
 * here cannot hang the others. */
static void check_refusals(suite *s, comm_backend b) {
  float *buf = NULL;
  int bad = 0;
  const char *name = "broadcast from root=size is refused";
  if (comm_alloc(s->c, 16, (void **)&buf) < 0) {
    call_failed(s, "allocating 16 bytes");
    verdict(s, 1, name);
    return;
  }
  err_clear();
  if (comm_broadcast(s->c, buf, 4, COMM_F32, s->size, NULL) >= 0 ||
      !strstr(err_msg(), "root")) {
    fprintf(stderr, "rank %d: FAIL %s: returned success or no message "
                    "naming the root: \"%s\"\n", s->rank, name, err_msg());
    bad = 1;
  }
  verdict(s, bad, name);

  name = "an average of i32 is refused, naming the dtype";
  err_clear();
  bad = 0;
  if (comm_allreduce(s->c, buf, buf, 4, COMM_I32, COMM_AVG, NULL) >= 0 ||
      !strstr(err_msg(), "i32")) {
    fprintf(stderr, "rank %d: FAIL %s: \"%s\"\n", s->rank, name, err_msg());
    bad = 1;
  }
  verdict(s, bad, name);

  if (b == COMM_MPI) {
    name = "mpi refuses bf16 with a message naming it";
    err_clear();
    bad = 0;
    if (comm_allreduce(s->c, buf, buf, 4, COMM_BF16, COMM_SUM, NULL) >= 0 ||
        !strstr(err_msg(), "bf16")) {
      fprintf(stderr, "rank %d: FAIL %s: \"%s\"\n", s->rank, name, err_msg());
      bad = 1;
    }
    verdict(s, bad, name);

    /* ...but moves it: an all-gather and a broadcast carry its 2-byte
     * words unchanged (FSDP gathers 16-bit weights on CPU ranks) */
    name = "mpi all-gathers and broadcasts bf16 words bit for bit";
    err_clear();
    bad = 0;
    enum { W = 3 };
    uint16_t mine[W], all[64 * W], root[W];
    for (int i = 0; i < W; i++) mine[i] = (uint16_t)(0x3f80 + 97 * s->rank + i);
    int many = s->size <= 64;
    if (many && comm_allgather(s->c, mine, all, W, COMM_BF16, NULL) < 0) bad = 1;
    for (int r = 0; many && !bad && r < s->size; r++)
      for (int i = 0; i < W; i++)
        bad |= all[r * W + i] != (uint16_t)(0x3f80 + 97 * r + i);
    memcpy(root, mine, sizeof root);
    if (!bad && comm_broadcast(s->c, root, W, COMM_BF16, 0, NULL) < 0) bad = 1;
    for (int i = 0; !bad && i < W; i++) bad |= root[i] != (uint16_t)(0x3f80 + i);
    if (bad) fprintf(stderr, "rank %d: FAIL %s: %s\n", s->rank, name, err_msg());
    verdict(s, bad, name);

    /* The count is refused before MPI sees the (too small) buffer. */
    name = "mpi refuses counts beyond INT_MAX";
    err_clear();
    bad = 0;
    if (comm_allreduce(s->c, buf, buf, (size_t)1 << 31, COMM_F32, COMM_SUM,
                       NULL) >= 0 ||
        (!strstr(err_msg(), "INT_MAX") && !strstr(err_msg(), "int count"))) {
      fprintf(stderr, "rank %d: FAIL %s: \"%s\"\n", s->rank, name, err_msg());
      bad = 1;
    }
    verdict(s, bad, name);
  }
  comm_free(s->c, buf);
}

/* ---- main ----------------------------------------------------------------- */

/* Exit 77 for nccl where it cannot run: no NCCL in the build, or fewer GPUs
 * than ranks on this node (decided on every rank, agreed). */
static int nccl_unavailable(int rank) {
#ifdef HAVE_NCCL
  MPI_Comm node;
  int local = 1, ndev = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                      &node);
  MPI_Comm_size(node, &local);
  MPI_Comm_free(&node);
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  int short_here = local > ndev;
  if (short_here)
    fprintf(stderr, "rank %d: %d ranks on this node but %d GPU(s)\n", rank,
            local, ndev);
  return sum_over_ranks(short_here) > 0;
#else
  if (rank == 0) fprintf(stderr, "built without NCCL\n");
  return 1;
#endif
}

static void finalize(void) {
#ifdef HAVE_MPI
  MPI_Finalize();
#endif
}

int main(int argc, char **argv) {
  suite s = {0};
#ifdef HAVE_MPI
  MPI_Init(&argc, &argv);
#endif
  comm_backend b = COMM_MPI;
  if (argc > 2 || (argc == 2 && comm_backend_parse(argv[1], &b) != 0)) {
    fprintf(stderr, "usage: %s [mpi|nccl]\n", argv[0]);
    finalize();
    return 99;
  }
  int world_rank = 0;
#ifdef HAVE_MPI
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
#endif
  if (b == COMM_NCCL && nccl_unavailable(world_rank)) {
    if (world_rank == 0) printf("skip: nccl cannot run here\n");
    finalize();
    return 77;
  }
  int open_rc = comm_open(&s.c, b);
  if (open_rc < 0)
    fprintf(stderr, "rank %d: comm_open(%s):\n%s\n", world_rank,
            comm_backend_name(b), err_msg());
  if (sum_over_ranks(open_rc < 0) > 0) {
    if (s.c) comm_close(s.c);
    finalize();
    return 1;
  }
  s.rank = comm_rank(s.c);
  s.size = comm_size(s.c);

  check_checker(&s, COMM_F32);
  check_checker(&s, COMM_I32);
  if (b == COMM_NCCL) check_checker(&s, COMM_BF16);

  static const size_t counts[] = {1, 7, 1000, 65537, 1000003};
  static const comm_op ops[] = {COMM_SUM, COMM_MAX, COMM_MIN, COMM_AVG};
  /* An average is exact (so comparable exactly) over 2^k ranks only. */
  int pow2 = (s.size & (s.size - 1)) == 0;
  int nops = pow2 ? 4 : 3;
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
    size_t n = counts[k];
    for (int o = 0; o < nops; o++)
      for (int inplace = 0; inplace < 2; inplace++)
        for (int async = 0; async < 2; async++)
          check_allreduce(&s, n, COMM_F32, ops[o], inplace, async);
    check_allreduce(&s, n, COMM_F64, COMM_SUM, 0, 0);
    check_allreduce(&s, n, COMM_I32, COMM_SUM, 0, 0);
    check_allreduce(&s, n, COMM_I32, COMM_MIN, 1, 1);
    /* f16 / bf16 sums of the pattern are exact up to 68 / 8 ranks. */
    if (b == COMM_NCCL && s.size <= 68)
      check_allreduce(&s, n, COMM_F16, COMM_SUM, 0, 0);
    if (b == COMM_NCCL && s.size <= 8)
      check_allreduce(&s, n, COMM_BF16, COMM_SUM, 0, 1);
    check_two_in_flight(&s, n);
    for (int async = 0; async < 2; async++) {
      check_broadcast(&s, n, async);
      check_reduce_scatter(&s, n, COMM_SUM, 0, async);
      check_reduce_scatter(&s, n, COMM_SUM, 1, async);
      if (pow2) check_reduce_scatter(&s, n, COMM_AVG, 1, async);
      check_allgather(&s, n, 0, async);
      check_allgather(&s, n, 1, async);
      check_alltoall(&s, n, async);
    }
  }
  check_barrier(&s);
  check_local_size(&s);
  check_refusals(&s, b);

  if (s.rank == 0)
    printf("collectives %s on %d rank(s): %d checks, %d failed\n",
           comm_backend_name(b), s.size, s.checks, s.failed);
  comm_close(s.c);
  finalize();
  return s.failed ? 1 : 0;
}
