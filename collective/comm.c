/* The backend-independent half of the collective layer: names, element
 * sizes, opening a communicator of the asked-for backend, and the public
 * calls, which check what every backend would check alike and then dispatch
 * through the backend's ops table (comm_internal.h). */
#include "config.h"
#include "collective/comm_internal.h"
#include "common/check.h"

#include <stdlib.h>
#include <string.h>

int comm_backend_parse(const char *name, comm_backend *b) {
  if (strcmp(name, "mpi") == 0) *b = COMM_MPI;
  else if (strcmp(name, "nccl") == 0) *b = COMM_NCCL;
  else return -1;
  return 0;
}

const char *comm_backend_name(comm_backend b) {
  return b == COMM_NCCL ? "nccl" : "mpi";
}

size_t comm_dtype_size(comm_dtype t) {
  switch (t) {
  case COMM_F32: return 4;
  case COMM_F64: return 8;
  case COMM_I32: return 4;
  case COMM_F16: return 2;
  case COMM_BF16: return 2;
  }
  ASSERT(!"unknown comm_dtype");
  return 0;
}

int comm_open(comm **out, comm_backend b) {
  return comm_open_ex(out, b, NULL);
}

int comm_open_ex(comm **out, comm_backend b, const comm_options *o) {
  *out = NULL;
  if (o && o->max_ctas < 0)
    FAIL(ERR_FAIL, "comm_open: max_ctas = %d (allowed: 0 for the library's "
         "default, or a positive count)", o->max_ctas);
  if (o && o->zero_cta && o->max_ctas > 0)
    FAIL(ERR_FAIL, "comm_open: zero_cta with max_ctas = %d (allowed with "
         "zero_cta: max_ctas 0; the policy chooses the blocks)", o->max_ctas);
  comm *c = calloc(1, sizeof *c);
  CHECK_ALLOC(c, sizeof *c);
  c->backend = b;
  c->device = -1;
  if (o) c->opt = *o;
  int rc;
  if (b == COMM_MPI) {
    rc = comm_mpi_open(c);
  } else {
#ifdef HAVE_NCCL
    rc = comm_nccl_open(c);
#else
    rc = err_set(ERR_FAIL, __FILE__, __LINE__,
                 "backend nccl is not available: trainlab was built without "
                 "NCCL (configure needs CUDA, MPI and NCCL; see its summary)");
#endif
  }
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    if (c->ops) c->ops->close(c);
    free(c);
    return rc;
  }
  *out = c;
  return 0;
}

void comm_close(comm *c) {
  if (!c) return;
  c->ops->close(c);
  free(c);
}

int comm_rank(const comm *c) { return c->rank; }
int comm_size(const comm *c) { return c->size; }
int comm_local_size(const comm *c) { return c->local_size; }
comm_backend comm_get_backend(const comm *c) { return c->backend; }
int comm_device(const comm *c) { return c->device; }
void *comm_cuda_stream(const comm *c) { return c->stream; }

int comm_alloc(comm *c, size_t bytes, void **p) {
  *p = NULL;
  TRY(c->ops->alloc(c, bytes, p));
  return 0;
}

void comm_free(comm *c, void *p) {
  if (p) c->ops->free(c, p);
}

int comm_sym_alloc(comm *c, size_t bytes, void **p) {
  *p = NULL;
  TRY(c->ops->sym_alloc(c, bytes, p));
  return 0;
}

void comm_sym_free(comm *c, void *p) {
  if (p) c->ops->sym_free(c, p);
}

int comm_window_register(comm *c, void *p, size_t bytes) {
  ASSERT(p != NULL);
  if (c->ops->window_register) TRY(c->ops->window_register(c, p, bytes));
  return 0;
}

int comm_window_deregister(comm *c, void *p) {
  if (p && c->ops->window_deregister) TRY(c->ops->window_deregister(c, p));
  return 0;
}

/* A NULL buffer with elements to move is a bug in the caller; a zero count
 * is a legal no-op that both libraries accept. */
static void check_bufs(const void *a, const void *b, size_t count) {
  if (count > 0) ASSERT(a != NULL && b != NULL);
}

/* An average of integers would round; only float types average. */
static int check_op(const char *what, comm_dtype t, comm_op op) {
  if (op == COMM_AVG && t == COMM_I32)
    FAIL(ERR_FAIL, "%s: average of i32 elements (allowed for avg: f32, f64, "
         "f16, bf16)", what);
  return 0;
}

int comm_allreduce(comm *c, const void *send, void *recv, size_t count,
                   comm_dtype t, comm_op op, comm_req **req) {
  if (req) *req = NULL;
  check_bufs(send, recv, count);
  TRY(check_op("allreduce", t, op));
  TRY(c->ops->allreduce(c, send, recv, count, t, op, req));
  return 0;
}

int comm_broadcast(comm *c, void *buf, size_t count, comm_dtype t, int root,
                   comm_req **req) {
  if (req) *req = NULL;
  check_bufs(buf, buf, count);
  if (root < 0 || root >= c->size)
    FAIL(ERR_FAIL, "broadcast: root %d is not a rank (there are %d ranks)",
         root, c->size);
  TRY(c->ops->broadcast(c, buf, count, t, root, req));
  return 0;
}

int comm_reduce_scatter(comm *c, const void *send, void *recv,
                        size_t recvcount, comm_dtype t, comm_op op,
                        comm_req **req) {
  if (req) *req = NULL;
  check_bufs(send, recv, recvcount);
  TRY(check_op("reduce_scatter", t, op));
  TRY(c->ops->reduce_scatter(c, send, recv, recvcount, t, op, req));
  return 0;
}

int comm_allgather(comm *c, const void *send, void *recv, size_t sendcount,
                   comm_dtype t, comm_req **req) {
  if (req) *req = NULL;
  check_bufs(send, recv, sendcount);
  TRY(c->ops->allgather(c, send, recv, sendcount, t, req));
  return 0;
}

int comm_alltoall(comm *c, const void *send, void *recv, size_t count,
                  comm_dtype t, comm_req **req) {
  if (req) *req = NULL;
  check_bufs(send, recv, count);
  size_t bytes = count * (size_t)c->size * comm_dtype_size(t);
  const char *a = send, *b = recv;
  if (bytes && a < b + bytes && b < a + bytes)
    FAIL(ERR_FAIL, "alltoall: send and receive buffers overlap (allowed: "
         "disjoint buffers of size x count elements each)");
  TRY(c->ops->alltoall(c, send, recv, count, t, req));
  return 0;
}

int comm_barrier(comm *c) {
  TRY(c->ops->barrier(c));
  return 0;
}

int comm_wait(comm *c, comm_req *req) {
  if (!req) return 0;
  ASSERT(req->owner == c);
  TRY(c->ops->wait(c, req));
  return 0;
}
