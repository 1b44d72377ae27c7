#include "config.h"

#include "tests/rank_helpers.h"

#ifdef HAVE_MPI
#include <mpi.h>
#endif

int any_rank(int bad) {
#ifdef HAVE_MPI
  int out = 0;
  MPI_Allreduce(&bad, &out, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  return out;
#else
  return bad;
#endif
}

int rank_engine(const comm *c, engine **e) {
  if (comm_get_backend(c) == COMM_NCCL)
    return engine_cuda_create(e, comm_device(c));
  return engine_cpu_create(e, 1);
}

adamw_config adamw_comparable(void) {
  adamw_config hp = adamw_defaults();
  hp.eps = 1e-3f;
  return hp;
}
