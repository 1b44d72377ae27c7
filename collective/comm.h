/* The collective layer: one interface over MPI (host buffers, CPU ranks) and
 * NCCL (device buffers, one GPU per rank, NCCL id shared over MPI).
 *
 * Counts are always ELEMENTS of the given dtype, never bytes; the typed
 * helpers at the bottom make the element type part of the call. Every
 * operation can run synchronously (req == NULL: the result is in place when
 * the call returns) or asynchronously (req != NULL: *req is a wait handle
 * that comm_wait() completes and frees).
 *
 * Ordering on NCCL: operations run on the communicator's own stream
 * (comm_cuda_stream) in call order; the caller makes sure the input is ready
 * (e.g. cudaDeviceSynchronize or an event) before calling. */
#ifndef TL_COMM_H
#define TL_COMM_H

#include <stddef.h>

typedef enum { COMM_MPI, COMM_NCCL } comm_backend;
/* MPI has no 16-bit float: it moves f16 and bf16 (broadcast, all-gather,
 * all-to-all) as 2-byte words and refuses to reduce them. */
typedef enum { COMM_F32, COMM_F64, COMM_I32, COMM_F16, COMM_BF16 } comm_dtype;
/* COMM_AVG: the sum divided by the number of ranks, in the reduction itself
 * (NCCL's ncclAvg; MPI scales the result on completion); float dtypes only.
 * Data parallelism averages gradients with it instead of a separate pass. */
typedef enum { COMM_SUM, COMM_MAX, COMM_MIN, COMM_AVG } comm_op;

typedef struct comm comm;
typedef struct comm_req comm_req;

/* Parse "mpi" / "nccl"; -1 if neither. */
int comm_backend_parse(const char *name, comm_backend *b);
const char *comm_backend_name(comm_backend b);
size_t comm_dtype_size(comm_dtype t);

/* Open a communicator over all ranks of MPI_COMM_WORLD (MPI must be
 * initialised). NCCL: rank r uses GPU r % device_count; fails with a clear
 * message if NCCL or CUDA is not built in or there are fewer GPUs than ranks
 * on a node. Without MPI built in, only a world of one rank exists. */
int comm_open(comm **out, comm_backend b);
/* Options of a communicator; zero fields keep the library's defaults.
 * max_ctas (NCCL): at most this many thread blocks per collective (NCCL's
 * ncclConfig_t.maxCTAs). Each block holds an SM for the whole collective, so
 * a collective overlapped with compute slows that compute by about
 * blocks/SMs; fewer blocks trade bandwidth for the compute's speed. MPI
 * ignores it.
 * zero_cta (NCCL >= 2.28): NCCL's zero-CTA policy: collectives NCCL can
 * run on the copy engines (all-gather within a node, over buffers in
 * symmetric windows: comm_sym_alloc + comm_window_register) use no thread
 * blocks at all, so compute beside them keeps every SM. Others run as
 * usual. MPI ignores it. */
typedef struct {
  int max_ctas;
  int zero_cta;
} comm_options;
int comm_open_ex(comm **out, comm_backend b, const comm_options *o);
void comm_close(comm *c);
int comm_rank(const comm *c);
int comm_size(const comm *c);
int comm_local_size(const comm *c);   /* ranks on this rank's node */
comm_backend comm_get_backend(const comm *c);
int comm_device(const comm *c);       /* CUDA device, -1 for MPI */
void *comm_cuda_stream(const comm *c); /* cudaStream_t of NCCL ops; NULL MPI */

/* Buffers in the memory this backend reduces: malloc for MPI, cudaMalloc on
 * the communicator's device for NCCL. Allocation failure is ERR_OOM. */
int comm_alloc(comm *c, size_t bytes, void **p);
void comm_free(comm *c, void *p);
/* Buffers that can join a symmetric window (NCCL: ncclMemAlloc, whose
 * cuMem allocations peers can map; MPI: malloc). Free with comm_sym_free. */
int comm_sym_alloc(comm *c, size_t bytes, void **p);
void comm_sym_free(comm *c, void *p);
/* Collective (every rank, same order): register [p, p + bytes) of a
 * comm_sym_alloc buffer as a symmetric window (NCCL_WIN_COLL_SYMMETRIC),
 * so collectives whose buffers sit at the same offset in it on every rank
 * may take the copy engines (comm_options.zero_cta). MPI: nothing to do.
 * Deregister (also collective) before freeing the buffer. */
int comm_window_register(comm *c, void *p, size_t bytes);
int comm_window_deregister(comm *c, void *p);

/* recv[i] = op over ranks of send[i], i < count. send == recv is in place. */
int comm_allreduce(comm *c, const void *send, void *recv, size_t count,
                   comm_dtype t, comm_op op, comm_req **req);
/* buf on every rank becomes root's buf. */
int comm_broadcast(comm *c, void *buf, size_t count, comm_dtype t, int root,
                   comm_req **req);
/* send holds size*recvcount elements; rank r receives the op-reduction of
 * block r (elements [r*recvcount, (r+1)*recvcount)). */
int comm_reduce_scatter(comm *c, const void *send, void *recv,
                        size_t recvcount, comm_dtype t, comm_op op,
                        comm_req **req);
/* recv (size*sendcount elements) gets rank r's send at block r. */
int comm_allgather(comm *c, const void *send, void *recv, size_t sendcount,
                   comm_dtype t, comm_req **req);
/* send holds size*count elements, block j for rank j; recv block r gets
 * rank r's block for this rank (this rank's own block is copied). Not in
 * place: send and recv must not overlap. With NCCL >= 2.28, a zero-CTA
 * communicator and both buffers in symmetric windows, the copy engines
 * move the bytes. */
int comm_alltoall(comm *c, const void *send, void *recv, size_t count,
                  comm_dtype t, comm_req **req);
int comm_barrier(comm *c);
/* v[i] = its maximum over every rank of MPI_COMM_WORLD (host values,
 * outside any communicator: the slowest rank's time is a job's time).
 * Without MPI there is one rank and v stays as it is. */
int comm_world_max(double *v, int n);
/* Complete an asynchronous operation and free its handle. */
int comm_wait(comm *c, comm_req *req);

/* Typed helpers: the element type is in the name, counts are elements. */
static inline int comm_allreduce_f32(comm *c, const float *send, float *recv,
                                     size_t n, comm_req **req) {
  return comm_allreduce(c, send, recv, n, COMM_F32, COMM_SUM, req);
}
static inline int comm_broadcast_f32(comm *c, float *buf, size_t n, int root,
                                     comm_req **req) {
  return comm_broadcast(c, buf, n, COMM_F32, root, req);
}
static inline int comm_allreduce_avg_f32(comm *c, const float *send,
                                         float *recv, size_t n,
                                         comm_req **req) {
  return comm_allreduce(c, send, recv, n, COMM_F32, COMM_AVG, req);
}
static inline int comm_reduce_scatter_avg_f32(comm *c, const float *send,
                                              float *recv, size_t recvcount,
                                              comm_req **req) {
  return comm_reduce_scatter(c, send, recv, recvcount, COMM_F32, COMM_AVG,
                             req);
}
static inline int comm_allgather_f32(comm *c, const float *send, float *recv,
                                     size_t sendcount, comm_req **req) {
  return comm_allgather(c, send, recv, sendcount, COMM_F32, req);
}
static inline int comm_alltoall_f32(comm *c, const float *send, float *recv,
                                    size_t count, comm_req **req) {
  return comm_alltoall(c, send, recv, count, COMM_F32, req);
}

#endif
