/* The MPI backend: collectives between CPU ranks on host buffers.
 *
 * Built with MPI, a communicator is a duplicate of MPI_COMM_WORLD (so our
 * traffic never matches the caller's own messages) whose error handler
 * returns codes instead of aborting, so every failure comes back through
 * CHECK_MPI with MPI's message. Synchronous calls are the blocking
 * collectives; asynchronous ones the MPI-3 MPI_I* calls, whose MPI_Request
 * is the handle that comm_wait completes.
 *
 * Built without MPI, the same backend is a world of one rank where every
 * collective is a copy, so single-process jobs and tests still run.
 *
 * MPI counts are int: a call with more than INT_MAX elements is refused with
 * a message rather than split. fp16 / bf16 have no MPI datatype (and MPI's
 * reductions cannot add them), so they are refused too, in both builds, so
 * that a job behaves the same with and without MPI. */
#include "config.h"
#include "collective/comm_internal.h"
#include "common/check.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_MPI
#include "common/check_mpi.h"
#endif

static const char *dtype_name(comm_dtype t) {
  switch (t) {
  case COMM_F32: return "f32";
  case COMM_F64: return "f64";
  case COMM_I32: return "i32";
  case COMM_F16: return "f16";
  case COMM_BF16: return "bf16";
  }
  return "?";
}

/* A reduction's dtype: MPI has no 16-bit float to add. Collectives that
 * only move data (broadcast, all-gather, all-to-all) take f16 and bf16 as
 * 2-byte words (mpi_type). */
static int check_reducible(comm_dtype t) {
  if (t == COMM_F16 || t == COMM_BF16)
    FAIL(ERR_FAIL,
         "backend mpi cannot reduce %s (MPI has no such datatype; use f32, "
         "f64 or i32, or backend nccl)",
         dtype_name(t));
  return 0;
}

static int check_count(size_t count, int *n) {
  if (count > (size_t)INT_MAX)
    FAIL(ERR_FAIL,
         "backend mpi: %zu elements in one call exceed MPI's int count "
         "limit (%d); use fewer elements per call or backend nccl",
         count, INT_MAX);
  *n = (int)count;
  return 0;
}

/* Host memory, the same in both builds. malloc(0) may return NULL, which
 * is not running out of memory, so a zero-byte buffer gets one byte. */
static int host_alloc(comm *c, size_t bytes, void **p) {
  *p = malloc(bytes ? bytes : 1);
  CHECK_ALLOC(*p, bytes);
  return 0;
}

static void host_free(comm *c, void *p) { free(p); }

#ifdef HAVE_MPI

typedef struct {
  MPI_Comm comm;
  int *counts;   /* one count a rank: the blocking reduce-scatter's */
} mpi_state;

typedef struct {
  comm_req base;
  MPI_Request r;
  /* In-place reduce-scatter: MPI leaves the result in block 0, NCCL's
   * convention wants it in block rank, so it moves there on completion. */
  void *move_dst;
  const void *move_src;
  size_t move_bytes;
  /* COMM_AVG: MPI sums; the result is divided by the ranks on completion. */
  void *avg_buf;
  size_t avg_n;
  comm_dtype avg_t;
} mpi_req;

static MPI_Comm mcomm(const comm *c) { return ((mpi_state *)c->impl)->comm; }

static MPI_Datatype mpi_type(comm_dtype t) {
  switch (t) {
  case COMM_F32: return MPI_FLOAT;
  case COMM_F64: return MPI_DOUBLE;
  case COMM_I32: return MPI_INT;
  case COMM_F16:
  case COMM_BF16: return MPI_UINT16_T;   /* moved, never reduced */
  }
  ASSERT(!"mpi_type: dtype not checked");
  return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(comm_op op) {
  switch (op) {
  case COMM_SUM: return MPI_SUM;
  case COMM_MAX: return MPI_MAX;
  case COMM_MIN: return MPI_MIN;
  case COMM_AVG: return MPI_SUM;
  }
  ASSERT(!"unknown comm_op");
  return MPI_OP_NULL;
}

/* The sum of a COMM_AVG over the ranks becomes their mean (check_reducible
 * has limited MPI's sums to f32, f64, i32, and comm.c refuses avg of i32). */
static void average(comm *c, void *buf, size_t n, comm_dtype t) {
  if (t == COMM_F32) {
    float *p = buf, k = 1.0f / (float)c->size;
    for (size_t i = 0; i < n; i++) p[i] *= k;
  } else if (t == COMM_F64) {
    double *p = buf, k = 1.0 / (double)c->size;
    for (size_t i = 0; i < n; i++) p[i] *= k;
  }
}

/* Wrap a started request in a handle. If the handle cannot be allocated the
 * operation is completed here first, so no request is left behind. */
static int wrap(comm *c, MPI_Request r, comm_req **req, void *move_dst,
                const void *move_src, size_t move_bytes, void *avg_buf,
                size_t avg_n, comm_dtype avg_t) {
  mpi_req *q = malloc(sizeof *q);
  if (!q) {
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_ALLOC(q, sizeof *q);
  }
  q->base.owner = c;
  q->r = r;
  q->move_dst = move_dst;
  q->move_src = move_src;
  q->move_bytes = move_bytes;
  q->avg_buf = avg_buf;
  q->avg_n = avg_n;
  q->avg_t = avg_t;
  *req = &q->base;
  return 0;
}

static int mpi_wait(comm *c, comm_req *req) {
  mpi_req q = *(mpi_req *)req;
  free(req);
  CHECK_MPI(MPI_Wait(&q.r, MPI_STATUS_IGNORE));
  if (q.move_bytes) memmove(q.move_dst, q.move_src, q.move_bytes);
  if (q.avg_buf) average(c, q.avg_buf, q.avg_n, q.avg_t);
  return 0;
}

static int mpi_allreduce(comm *c, const void *send, void *recv, size_t count,
                         comm_dtype t, comm_op op, comm_req **req) {
  int n = 0;
  TRY(check_reducible(t));
  TRY(check_count(count, &n));
  const void *s = send == recv ? MPI_IN_PLACE : send;
  if (!req) {
    CHECK_MPI(MPI_Allreduce(s, recv, n, mpi_type(t), mpi_op(op), mcomm(c)));
    if (op == COMM_AVG) average(c, recv, count, t);
    return 0;
  }
  MPI_Request r;
  CHECK_MPI(MPI_Iallreduce(s, recv, n, mpi_type(t), mpi_op(op), mcomm(c),
                           &r));
  TRY(wrap(c, r, req, NULL, NULL, 0, op == COMM_AVG ? recv : NULL, count,
           t));
  return 0;
}

static int mpi_broadcast(comm *c, void *buf, size_t count, comm_dtype t,
                         int root, comm_req **req) {
  int n = 0;
  TRY(check_count(count, &n));
  if (!req) {
    CHECK_MPI(MPI_Bcast(buf, n, mpi_type(t), root, mcomm(c)));
    return 0;
  }
  MPI_Request r;
  CHECK_MPI(MPI_Ibcast(buf, n, mpi_type(t), root, mcomm(c), &r));
  TRY(wrap(c, r, req, NULL, NULL, 0, NULL, 0, t));
  return 0;
}

static int mpi_reduce_scatter(comm *c, const void *send, void *recv,
                              size_t recvcount, comm_dtype t, comm_op op,
                              comm_req **req) {
  int n = 0;
  TRY(check_reducible(t));
  TRY(check_count(recvcount, &n));
  size_t block = recvcount * comm_dtype_size(t);
  int inplace =
      block && (const char *)recv == (const char *)send + c->rank * block;
  /* In place, MPI reads the whole input from its receive buffer and writes
   * the result over block 0; the move to block rank happens on completion. */
  const void *s = inplace ? MPI_IN_PLACE : send;
  void *out = inplace ? (void *)send : recv;
  size_t move = inplace && c->rank != 0 ? block : 0;
  if (!req) {
    /* MPI_Reduce_scatter, every count n, rather than its _block form: Open
     * MPI 4.1 runs the blocking _block form as a reduce to one rank and a
     * scatter at every size (10 MiB on 2 CPU ranks: 50 ms, where this takes
     * 2.3 and an all-reduce 2.8); its nonblocking form (below) is not so. */
    int *counts = ((mpi_state *)c->impl)->counts;
    for (int i = 0; i < c->size; i++) counts[i] = n;
    CHECK_MPI(MPI_Reduce_scatter(s, out, counts, mpi_type(t), mpi_op(op),
                                 mcomm(c)));
    if (move) memmove(recv, send, move);
    if (op == COMM_AVG) average(c, recv, recvcount, t);
    return 0;
  }
  MPI_Request r;
  CHECK_MPI(MPI_Ireduce_scatter_block(s, out, n, mpi_type(t), mpi_op(op),
                                      mcomm(c), &r));
  TRY(wrap(c, r, req, recv, send, move, op == COMM_AVG ? recv : NULL,
           recvcount, t));
  return 0;
}

static int mpi_allgather(comm *c, const void *send, void *recv,
                         size_t sendcount, comm_dtype t, comm_req **req) {
  int n = 0;
  TRY(check_count(sendcount, &n));
  size_t block = sendcount * comm_dtype_size(t);
  const void *s =
      block && (const char *)send == (const char *)recv + c->rank * block
          ? MPI_IN_PLACE : send;
  if (!req) {
    CHECK_MPI(MPI_Allgather(s, n, mpi_type(t), recv, n, mpi_type(t),
                            mcomm(c)));
    return 0;
  }
  MPI_Request r;
  CHECK_MPI(MPI_Iallgather(s, n, mpi_type(t), recv, n, mpi_type(t), mcomm(c),
                           &r));
  TRY(wrap(c, r, req, NULL, NULL, 0, NULL, 0, t));
  return 0;
}

static int mpi_alltoall(comm *c, const void *send, void *recv, size_t count,
                        comm_dtype t, comm_req **req) {
  int n = 0;
  TRY(check_count(count, &n));
  if (!req) {
    CHECK_MPI(MPI_Alltoall(send, n, mpi_type(t), recv, n, mpi_type(t),
                           mcomm(c)));
    return 0;
  }
  MPI_Request r;
  CHECK_MPI(MPI_Ialltoall(send, n, mpi_type(t), recv, n, mpi_type(t),
                          mcomm(c), &r));
  TRY(wrap(c, r, req, NULL, NULL, 0, NULL, 0, t));
  return 0;
}

static int mpi_barrier(comm *c) {
  CHECK_MPI(MPI_Barrier(mcomm(c)));
  return 0;
}

static void mpi_close(comm *c) {
  mpi_state *st = c->impl;
  if (!st) return;
  if (st->comm != MPI_COMM_NULL) MPI_Comm_free(&st->comm);
  free(st->counts);
  free(st);
  c->impl = NULL;
}

static const comm_ops mpi_ops = {
    .alloc = host_alloc,
    .free = host_free,
    .sym_alloc = host_alloc,
    .sym_free = host_free,
    .allreduce = mpi_allreduce,
    .broadcast = mpi_broadcast,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .alltoall = mpi_alltoall,
    .barrier = mpi_barrier,
    .wait = mpi_wait,
    .close = mpi_close,
};

int comm_node_place(MPI_Comm world, int *local_rank, int *local_size) {
  MPI_Comm node;
  CHECK_MPI(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0,
                                MPI_INFO_NULL, &node));
  int rc_rank = MPI_Comm_rank(node, local_rank);
  int rc_size = MPI_Comm_size(node, local_size);
  CHECK_MPI(MPI_Comm_free(&node));
  CHECK_MPI(rc_rank);
  CHECK_MPI(rc_size);
  return 0;
}

int comm_mpi_open(comm *c) {
  c->ops = &mpi_ops;
  int inited = 0;
  CHECK_MPI(MPI_Initialized(&inited));
  if (!inited)
    FAIL(ERR_FAIL, "comm_open(mpi): MPI is not initialised (MPI_Init first)");
  mpi_state *st = malloc(sizeof *st);
  CHECK_ALLOC(st, sizeof *st);
  st->comm = MPI_COMM_NULL;
  st->counts = NULL;
  c->impl = st;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &st->comm));
  CHECK_MPI(MPI_Comm_set_errhandler(st->comm, MPI_ERRORS_RETURN));
  CHECK_MPI(MPI_Comm_rank(st->comm, &c->rank));
  CHECK_MPI(MPI_Comm_size(st->comm, &c->size));
  st->counts = malloc(sizeof *st->counts * (size_t)c->size);
  CHECK_ALLOC(st->counts, sizeof *st->counts * (size_t)c->size);
  int local_rank;
  TRY(comm_node_place(st->comm, &local_rank, &c->local_size));
  return 0;
}

#else /* !HAVE_MPI: a world of one rank */

/* A collective over one rank is its input: a copy where the output is
 * elsewhere. The checks are the MPI build's, so code that passes here does
 * not fail there for a reason a single rank cannot show. */
static int one_copy(void *dst, const void *src, size_t count, comm_dtype t,
                    comm_req **req, comm *c) {
  int n = 0;
  TRY(check_count(count, &n));
  if (dst != src) memmove(dst, src, count * comm_dtype_size(t));
  if (req) {
    comm_req *q = malloc(sizeof *q);
    CHECK_ALLOC(q, sizeof *q);
    q->owner = c;
    *req = q;
  }
  return 0;
}

static int one_allreduce(comm *c, const void *send, void *recv, size_t count,
                         comm_dtype t, comm_op op, comm_req **req) {
  TRY(check_reducible(t));
  TRY(one_copy(recv, send, count, t, req, c));
  return 0;
}

static int one_broadcast(comm *c, void *buf, size_t count, comm_dtype t,
                         int root, comm_req **req) {
  TRY(one_copy(buf, buf, count, t, req, c));
  return 0;
}

static int one_reduce_scatter(comm *c, const void *send, void *recv,
                              size_t recvcount, comm_dtype t, comm_op op,
                              comm_req **req) {
  TRY(check_reducible(t));
  TRY(one_copy(recv, send, recvcount, t, req, c));
  return 0;
}

static int one_allgather(comm *c, const void *send, void *recv,
                         size_t sendcount, comm_dtype t, comm_req **req) {
  TRY(one_copy(recv, send, sendcount, t, req, c));
  return 0;
}

static int one_alltoall(comm *c, const void *send, void *recv,
                        size_t count, comm_dtype t, comm_req **req) {
  TRY(one_copy(recv, send, count, t, req, c));
  return 0;
}

static int one_barrier(comm *c) { return 0; }

static int one_wait(comm *c, comm_req *req) {
  free(req);
  return 0;
}

static void one_close(comm *c) {}

static const comm_ops one_ops = {
    .alloc = host_alloc,
    .free = host_free,
    .sym_alloc = host_alloc,
    .sym_free = host_free,
    .allreduce = one_allreduce,
    .broadcast = one_broadcast,
    .reduce_scatter = one_reduce_scatter,
    .allgather = one_allgather,
    .alltoall = one_alltoall,
    .barrier = one_barrier,
    .wait = one_wait,
    .close = one_close,
};

int comm_mpi_open(comm *c) {
  c->ops = &one_ops;
  c->rank = 0;
  c->size = 1;
  c->local_size = 1;
  return 0;
}

#endif

int comm_world_max(double *v, int n) {
#ifdef HAVE_MPI
  if (n > 0)
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX,
                            MPI_COMM_WORLD));
#else
  (void)v;
  (void)n;
#endif
  return 0;
}
