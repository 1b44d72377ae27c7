/* What the backends of the collective layer share with comm.c: the
 * communicator's fields and a table of operations each backend fills in.
 *
 * comm.c validates arguments that do not depend on the backend (root in
 * range, non-NULL buffers, dtype known) and then calls through c->ops, so a
 * backend sees only calls that make sense. A backend's open() sets c->ops
 * before anything that can fail: comm_open then calls c->ops->close on the
 * half-built communicator, which must therefore cope with any fields still
 * zero.
 *
 * Asynchronous handles: struct comm_req is the common head of each
 * backend's own handle (MPI: MPI_Request; NCCL: a cudaEvent_t), which puts it
 * first and casts back in its wait().
 *
 * In-place conventions are NCCL's, on both backends:
 *   allreduce       send == recv
 *   reduce_scatter  recv == send + rank * recvcount
 *   allgather       send == recv + rank * sendcount
 * After an in-place reduce-scatter the other blocks of the buffer are
 * undefined (MPI uses block 0 for its result before moving it). */
#ifndef TL_COMM_INTERNAL_H
#define TL_COMM_INTERNAL_H

#include "collective/comm.h"

typedef struct comm_ops {
  int (*alloc)(comm *c, size_t bytes, void **p);
  void (*free)(comm *c, void *p);
  int (*sym_alloc)(comm *c, size_t bytes, void **p);
  void (*sym_free)(comm *c, void *p);
  int (*window_register)(comm *c, void *p, size_t bytes);   /* NULL: none */
  int (*window_deregister)(comm *c, void *p);
  int (*allreduce)(comm *c, const void *send, void *recv, size_t count,
                   comm_dtype t, comm_op op, comm_req **req);
  int (*broadcast)(comm *c, void *buf, size_t count, comm_dtype t, int root,
                   comm_req **req);
  int (*reduce_scatter)(comm *c, const void *send, void *recv,
                        size_t recvcount, comm_dtype t, comm_op op,
                        comm_req **req);
  int (*allgather)(comm *c, const void *send, void *recv, size_t sendcount,
                   comm_dtype t, comm_req **req);
  int (*alltoall)(comm *c, const void *send, void *recv, size_t count,
                  comm_dtype t, comm_req **req);
  int (*barrier)(comm *c);
  int (*wait)(comm *c, comm_req *req);   /* completes and frees req */
  void (*close)(comm *c);                /* frees impl, not c itself */
} comm_ops;

struct comm {
  const comm_ops *ops;
  comm_backend backend;
  int rank, size;
  int local_size;  /* ranks of this communicator on this rank's node */
  int device;      /* CUDA device, -1 for MPI */
  void *stream;    /* cudaStream_t of the NCCL ops, NULL for MPI */
  comm_options opt;
  void *impl;      /* the backend's own state */
};

struct comm_req {
  comm *owner;     /* comm_wait checks the handle is waited on its comm */
};

/* Backends: fill c (ops first, then rank, size, local_size, device,
 * stream, impl). */
int comm_mpi_open(comm *c);
#ifdef HAVE_NCCL
int comm_nccl_open(comm *c);
#endif
#ifdef HAVE_MPI
#include <mpi.h>
/* This rank's place among the ranks of `world` on its node (the ranks
 * that share memory with it). */
int comm_node_place(MPI_Comm world, int *local_rank, int *local_size);
#endif

#endif
