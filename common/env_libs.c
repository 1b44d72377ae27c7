/* The libraries' part of the provenance (env.h): GPUs through the CUDA
 * runtime, NCCL's and MPI's versions, as this process loaded them. Only the
 * worker's library holds this file: linking it loads CUDA, NCCL and MPI,
 * which the runner must not (it asks `worker --env` instead). */
#include "config.h"
#include "common/env.h"

#include <stdio.h>
#include <string.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

static void probe_gpu(env_info *e) {
#ifdef HAVE_CUDA
  int v = 0;
  if (cudaRuntimeGetVersion(&v) == cudaSuccess)
    snprintf(e->cuda_runtime_version, sizeof e->cuda_runtime_version, "%d.%d",
             v / 1000, (v % 1000) / 10);
  int n = 0;
  /* No driver or no device is an answer here (0 GPUs), not an error. */
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  e->gpu_count = n;
  struct cudaDeviceProp p;
  if (n > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    snprintf(e->gpu_name, sizeof e->gpu_name, "%s", p.name);
    e->gpu_name[strcspn(e->gpu_name, "\r\n")] = '\0';
  }
#else
  (void)e;
#endif
}

static void probe_libs(env_info *e) {
#ifdef HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess)
    snprintf(e->nccl_version, sizeof e->nccl_version, "%d.%d.%d",
             v / 10000, (v / 100) % 100, v % 100);
#endif
#ifdef HAVE_MPI
  /* Allowed before MPI_Init (MPI-3): `worker --env` never initialises. */
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
    lib[strcspn(lib, ",\r\n")] = '\0';
    snprintf(e->mpi_library, sizeof e->mpi_library, "%s", lib);
  }
#endif
  (void)e;
}

void env_probe_in_process(env_info *e) {
  env_probe_host(e);   /* also "none" for what the libraries do not tell */
  probe_gpu(e);
  probe_libs(e);
  if (e->gpu_count > 0)
    snprintf(e->machine, sizeof e->machine, "%dx %s", e->gpu_count,
             e->gpu_name);
}
