/* The NCCL backend: collectives between GPUs, one GPU per MPI rank, on
 * device buffers. Plain C over the CUDA runtime and NCCL; MPI only sets it up
 * (the NCCL id is made on rank 0 and broadcast) and provides the barrier.
 *
 * Device choice: a rank uses GPU (its rank among the ranks on its node) of
 * the GPUs visible to it. On one node that is rank % device_count; across
 * nodes it stays distinct however the launcher places ranks. NCCL refuses
 * two ranks on one GPU, so more ranks on a node than visible GPUs is
 * refused up front, with the counts in the message.
 *
 * Every step of opening that can fail on some ranks but not others (no GPU,
 * too many ranks, the id, NCCL's init) is followed by an agreement over MPI,
 * so all ranks fail together instead of the healthy ones waiting forever
 * for the failed one in the next collective.
 *
 * Operations go to the communicator's own non-blocking stream in call order.
 * A synchronous call ends with cudaStreamSynchronize (so a timed call
 * includes the whole operation, as torch.distributed's op + synchronize
 * does) and then asks NCCL for asynchronous errors; an asynchronous call
 * records an event after the operation, and comm_wait synchronizes on it. */
#include "config.h"
#include "collective/comm_internal.h"
#include "common/check.h"
#include "common/check_cuda.h"
#include "common/check_mpi.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

/* Copy-engine collectives (zero-CTA policy, symmetric windows) came with
 * NCCL 2.28; older headers build without them and refuse zero_cta. */
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define TL_NCCL_SYMMETRIC 1
#else
#define TL_NCCL_SYMMETRIC 0
#endif

enum { MAX_WINDOWS = 16 };

typedef struct {
  MPI_Comm mpi;            /* a duplicate of MPI_COMM_WORLD */
  ncclComm_t nccl;
  cudaStream_t stream;
#if TL_NCCL_SYMMETRIC
  struct { void *p; ncclWindow_t w; } win[MAX_WINDOWS];   /* registered */
  int nwin;
#endif
} nccl_state;

typedef struct {
  comm_req base;
  cudaEvent_t done;        /* recorded on the stream after the operation */
} nccl_req;

static nccl_state *state(const comm *c) { return c->impl; }

static ncclDataType_t nccl_type(comm_dtype t) {
  switch (t) {
  case COMM_F32: return ncclFloat32;
  case COMM_F64: return ncclFloat64;
  case COMM_I32: return ncclInt32;
  case COMM_F16: return ncclFloat16;
  case COMM_BF16: return ncclBfloat16;
  }
  ASSERT(!"unknown comm_dtype");
  return ncclFloat32;
}

static ncclRedOp_t nccl_op(comm_op op) {
  switch (op) {
  case COMM_SUM: return ncclSum;
  case COMM_MAX: return ncclMax;
  case COMM_MIN: return ncclMin;
  case COMM_AVG: return ncclAvg;
  }
  ASSERT(!"unknown comm_op");
  return ncclSum;
}

/* An error NCCL met in the background (a peer gone, a network fault) shows
 * only here, not in the stream's status. */
static int check_async_error(nccl_state *s) {
  ncclResult_t async_rc = ncclSuccess;
  CHECK_NCCL(ncclCommGetAsyncError(s->nccl, &async_rc));
  CHECK_NCCL(async_rc);
  return 0;
}

static int event_new(cudaEvent_t *ev) {
  CHECK_CUDA(cudaEventCreateWithFlags(ev, cudaEventDisableTiming));
  return 0;
}

static int event_record(cudaEvent_t ev, cudaStream_t s) {
  CHECK_CUDA(cudaEventRecord(ev, s));
  return 0;
}

static int event_wait(cudaEvent_t ev) {
  CHECK_CUDA(cudaEventSynchronize(ev));
  return 0;
}

/* End of every operation: wait for it (req == NULL) or hand out an event. */
static int finish(comm *c, comm_req **req) {
  nccl_state *s = state(c);
  if (!req) {
    CHECK_CUDA(cudaStreamSynchronize(s->stream));
    TRY(check_async_error(s));
    return 0;
  }
  nccl_req *q = malloc(sizeof *q);
  CHECK_ALLOC(q, sizeof *q);
  int rc = event_new(&q->done);
  if (rc == 0 && (rc = event_record(q->done, s->stream)) < 0)
    cudaEventDestroy(q->done);
  if (rc < 0) free(q);
  TRY(rc);
  q->base.owner = c;
  *req = &q->base;
  return 0;
}

static int nccl_wait(comm *c, comm_req *req) {
  nccl_req *q = (nccl_req *)req;
  cudaEvent_t done = q->done;
  free(q);
  int rc = event_wait(done);
  cudaEventDestroy(done);
  TRY(rc);
  TRY(check_async_error(state(c)));
  return 0;
}

static int device_malloc(void **p, size_t bytes) {
  CHECK_CUDA(cudaMalloc(p, bytes));
  return 0;
}

/* Out of device memory is ERR_OOM (CHECK_CUDA maps it); the message says
 * how much was asked for where, which the job's "oom" row then shows. */
static int nccl_alloc(comm *c, size_t bytes, void **p) {
  int rc = device_malloc(p, bytes ? bytes : 1);
  if (rc < 0) {
    char why[512];
    err_first_line(why, sizeof why);
    *p = NULL;
    FAIL(rc, "allocating %zu bytes on GPU %d (rank %d): %s", bytes,
         c->device, c->rank, why);
  }
  return 0;
}

static void nccl_free(comm *c, void *p) { cudaFree(p); }

#if TL_NCCL_SYMMETRIC
static int sym_malloc(void **p, size_t bytes) {
  CHECK_NCCL(ncclMemAlloc(p, bytes));
  return 0;
}

/* ncclMemAlloc reports running out of memory as a CUDA error inside NCCL;
 * ask the device whether that is what happened, so the row says "oom". */
static int nccl_sym_alloc(comm *c, size_t bytes, void **p) {
  int rc = sym_malloc(p, bytes ? bytes : 1);
  if (rc < 0) {
    char why[512];
    size_t free_b = 0, total = 0;
    err_first_line(why, sizeof why);
    *p = NULL;
    int oom = cudaMemGetInfo(&free_b, &total) == cudaSuccess && free_b < bytes;
    FAIL(oom ? ERR_OOM : rc, "ncclMemAlloc of %zu bytes on GPU %d (rank %d, "
         "%zu bytes free): %s", bytes, c->device, c->rank, free_b, why);
  }
  return 0;
}

static void nccl_sym_free(comm *c, void *p) {
  (void)cudaStreamSynchronize(state(c)->stream);
  (void)ncclMemFree(p);
}

static int nccl_window_register(comm *c, void *p, size_t bytes) {
  nccl_state *s = state(c);
  if (s->nwin == MAX_WINDOWS)
    FAIL(ERR_FAIL, "comm_window_register: %d windows already (allowed: at "
         "most %d per communicator)", s->nwin, (int)MAX_WINDOWS);
  CHECK_NCCL(ncclCommWindowRegister(s->nccl, p, bytes, &s->win[s->nwin].w,
                                    NCCL_WIN_COLL_SYMMETRIC));
  s->win[s->nwin++].p = p;
  return 0;
}

static int nccl_window_deregister(comm *c, void *p) {
  nccl_state *s = state(c);
  for (int i = 0; i < s->nwin; i++)
    if (s->win[i].p == p) {
      ncclWindow_t w = s->win[i].w;
      s->win[i] = s->win[--s->nwin];
      CHECK_CUDA(cudaStreamSynchronize(s->stream));
      CHECK_NCCL(ncclCommWindowDeregister(s->nccl, w));
      return 0;
    }
  FAIL(ERR_FAIL, "comm_window_deregister: %p is not a registered window", p);
}
#else
static int nccl_sym_alloc(comm *c, size_t bytes, void **p) {
  return nccl_alloc(c, bytes, p);
}
static void nccl_sym_free(comm *c, void *p) { cudaFree(p); }
#endif

static int nccl_allreduce(comm *c, const void *send, void *recv,
                          size_t count, comm_dtype t, comm_op op,
                          comm_req **req) {
  nccl_state *s = state(c);
  CHECK_NCCL(ncclAllReduce(send, recv, count, nccl_type(t), nccl_op(op),
                           s->nccl, s->stream));
  TRY(finish(c, req));
  return 0;
}

static int nccl_broadcast(comm *c, void *buf, size_t count, comm_dtype t,
                          int root, comm_req **req) {
  nccl_state *s = state(c);
  CHECK_NCCL(ncclBroadcast(buf, buf, count, nccl_type(t), root, s->nccl,
                           s->stream));
  TRY(finish(c, req));
  return 0;
}

static int nccl_reduce_scatter(comm *c, const void *send, void *recv,
                               size_t recvcount, comm_dtype t, comm_op op,
                               comm_req **req) {
  nccl_state *s = state(c);
  CHECK_NCCL(ncclReduceScatter(send, recv, recvcount, nccl_type(t),
                               nccl_op(op), s->nccl, s->stream));
  TRY(finish(c, req));
  return 0;
}

static int nccl_allgather(comm *c, const void *send, void *recv,
                          size_t sendcount, comm_dtype t, comm_req **req) {
  nccl_state *s = state(c);
  CHECK_NCCL(ncclAllGather(send, recv, sendcount, nccl_type(t), s->nccl,
                           s->stream));
  TRY(finish(c, req));
  return 0;
}

/* NCCL 2.28's own all-to-all (the one the copy engines can run); before
 * it, the same exchange as grouped point-to-point calls. */
static int nccl_alltoall(comm *c, const void *send, void *recv, size_t count,
                         comm_dtype t, comm_req **req) {
  nccl_state *s = state(c);
#if TL_NCCL_SYMMETRIC
  CHECK_NCCL(ncclAlltoAll(send, recv, count, nccl_type(t), s->nccl,
                          s->stream));
#else
  size_t block = count * comm_dtype_size(t);
  CHECK_NCCL(ncclGroupStart());
  for (int r = 0; r < c->size; r++) {
    CHECK_NCCL(ncclSend((const char *)send + r * block, count, nccl_type(t),
                        r, s->nccl, s->stream));
    CHECK_NCCL(ncclRecv((char *)recv + r * block, count, nccl_type(t), r,
                        s->nccl, s->stream));
  }
  CHECK_NCCL(ncclGroupEnd());
#endif
  TRY(finish(c, req));
  return 0;
}

/* The stream first: a barrier means this rank's queued work is done too. */
static int nccl_barrier(comm *c) {
  nccl_state *s = state(c);
  CHECK_CUDA(cudaStreamSynchronize(s->stream));
  CHECK_MPI(MPI_Barrier(s->mpi));
  return 0;
}

/* Close must work on a half-opened communicator and after failures: after
 * an asynchronous NCCL error the communicator is aborted, since destroying
 * it would wait for peers that may be gone. */
static void nccl_close(comm *c) {
  nccl_state *s = state(c);
  if (!s) return;
  if (s->nccl) {
    ncclResult_t async_rc = ncclSuccess;
#if TL_NCCL_SYMMETRIC
    /* windows left registered (a failed job) go with the communicator */
    s->nwin = 0;
#endif
    if (s->stream) cudaStreamSynchronize(s->stream);
    if (ncclCommGetAsyncError(s->nccl, &async_rc) == ncclSuccess &&
        async_rc == ncclSuccess)
      ncclCommDestroy(s->nccl);
    else
      ncclCommAbort(s->nccl);
  }
  if (s->stream) cudaStreamDestroy(s->stream);
  if (s->mpi != MPI_COMM_NULL) MPI_Comm_free(&s->mpi);
  free(s);
  c->impl = NULL;
  c->stream = NULL;
}

static const comm_ops nccl_ops = {
    .alloc = nccl_alloc,
    .free = nccl_free,
    .sym_alloc = nccl_sym_alloc,
    .sym_free = nccl_sym_free,
#if TL_NCCL_SYMMETRIC
    .window_register = nccl_window_register,
    .window_deregister = nccl_window_deregister,
#endif
    .allreduce = nccl_allreduce,
    .broadcast = nccl_broadcast,
    .reduce_scatter = nccl_reduce_scatter,
    .allgather = nccl_allgather,
    .alltoall = nccl_alltoall,
    .barrier = nccl_barrier,
    .wait = nccl_wait,
    .close = nccl_close,
};

/* Every rank learns whether any rank failed a step. A failed rank keeps its
 * own message; the others get one naming the first failed rank. The worst
 * code wins, so one rank out of memory makes the whole job "oom". */
static int agree(comm *c, int rc, const char *step) {
  int in[2] = {rc < 0 ? rc : 0, c->rank}, out[2];
  CHECK_MPI(MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, state(c)->mpi));
  if (out[0] >= 0) return 0;
  if (rc < 0) return rc;
  FAIL(out[0], "%s failed on rank %d (see that rank's message)", step,
       out[1]);
}

static int device_count(int *n) {
  CHECK_CUDA(cudaGetDeviceCount(n));
  return 0;
}

static int pick_device(comm *c) {
  nccl_state *s = state(c);
  int local_rank, local_size, ndev = 0, len;
  char host[MPI_MAX_PROCESSOR_NAME] = "?";
  TRY(comm_node_place(s->mpi, &local_rank, &local_size));
  c->local_size = local_size;
  CHECK_MPI(MPI_Get_processor_name(host, &len));
  int rc = device_count(&ndev);
  if (rc < 0 || ndev == 0) {
    char why[512] = "cudaGetDeviceCount found none";
    if (rc < 0) err_first_line(why, sizeof why);
    FAIL(ERR_FAIL, "backend nccl: rank %d on %s has no usable CUDA GPU: %s",
         c->rank, host, why);
  }
  if (local_size > ndev)
    FAIL(ERR_FAIL,
         "backend nccl: %d ranks on %s but only %d GPU(s) visible there; "
         "NCCL needs a distinct GPU per rank (launch at most %d ranks per "
         "node, or check CUDA_VISIBLE_DEVICES)",
         local_size, host, ndev, ndev);
  c->device = local_rank;
  CHECK_CUDA(cudaSetDevice(c->device));
  return 0;
}

/* The highest priority: a collective queued behind a long compute grid
 * gets its few blocks onto SMs as soon as any frees up, instead of after
 * the whole grid, so overlapped communication starts when it is issued. */
static int new_stream(comm *c) {
  nccl_state *s = state(c);
  int least, greatest;
  CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CHECK_CUDA(cudaStreamCreateWithPriority(&s->stream, cudaStreamNonBlocking,
                                          greatest));
  c->stream = s->stream;
  return 0;
}

static int make_id(ncclUniqueId *id) {
  CHECK_NCCL(ncclGetUniqueId(id));
  return 0;
}

/* Rank 0 makes the id; its success travels with it, so a failure there
 * stops every rank instead of leaving them in ncclCommInitRank. */
static int share_id(comm *c, ncclUniqueId *id) {
  struct {
    int rc;
    ncclUniqueId id;
  } msg;
  memset(&msg, 0, sizeof msg);
  if (c->rank == 0) msg.rc = make_id(&msg.id);
  CHECK_MPI(MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, state(c)->mpi));
  if (msg.rc < 0) {
    if (c->rank == 0) return msg.rc;
    FAIL(ERR_FAIL, "rank 0 could not create the NCCL id (see its message)");
  }
  *id = msg.id;
  return 0;
}

static int init_nccl(comm *c, ncclUniqueId id) {
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  if (c->opt.max_ctas > 0) {
    cfg.maxCTAs = c->opt.max_ctas;
    cfg.minCTAs = 1;
  }
  if (c->opt.zero_cta) {
#if TL_NCCL_SYMMETRIC
    cfg.CTAPolicy = NCCL_CTA_POLICY_ZERO;
#else
    FAIL(ERR_FAIL, "comm_open: zero_cta needs NCCL >= 2.28 (copy-engine "
         "collectives); this build has NCCL %d.%d", NCCL_MAJOR, NCCL_MINOR);
#endif
  }
  CHECK_NCCL(ncclCommInitRankConfig(&state(c)->nccl, c->size, id, c->rank,
                                    &cfg));
  return 0;
}

int comm_nccl_open(comm *c) {
  c->ops = &nccl_ops;
  int inited = 0;
  CHECK_MPI(MPI_Initialized(&inited));
  if (!inited)
    FAIL(ERR_FAIL, "comm_open(nccl): MPI is not initialised (MPI_Init "
                   "first; it shares the NCCL id)");
  nccl_state *s = calloc(1, sizeof *s);
  CHECK_ALLOC(s, sizeof *s);
  s->mpi = MPI_COMM_NULL;
  c->impl = s;
  CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &s->mpi));
  CHECK_MPI(MPI_Comm_set_errhandler(s->mpi, MPI_ERRORS_RETURN));
  CHECK_MPI(MPI_Comm_rank(s->mpi, &c->rank));
  CHECK_MPI(MPI_Comm_size(s->mpi, &c->size));

  int rc = pick_device(c);
  if (rc == 0) rc = new_stream(c);
  TRY(agree(c, rc, "choosing a GPU"));
  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  TRY(share_id(c, &id));
  TRY(agree(c, init_nccl(c, id), "ncclCommInitRank"));
  return 0;
}
