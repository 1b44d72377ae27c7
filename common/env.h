/* Provenance: what machine and which library versions a row came from.
 * Versions are asked of the libraries actually loaded at run time
 * (cudaRuntimeGetVersion, ncclGetVersion, MPI_Get_library_version), not
 * taken from the headers we compiled against. */
#ifndef TL_ENV_H
#define TL_ENV_H

typedef struct env_info {
  char host[128];
  char machine[256];        /* "2x NVIDIA H200" or "CPU: 2 cores <model>" */
  char gpu_name[128];       /* device 0's name, "none" without a GPU */
  int gpu_count;
  char cpu_model[128];
  int cpu_cores;
  char driver_version[64];  /* NVIDIA kernel driver, "none" without one */
  char cuda_runtime_version[32];
  char nccl_version[32];
  char mpi_library[128];    /* first line of MPI_Get_library_version */
} env_info;

/* Never fails: what cannot be found reads "none" or "unknown". */
void env_probe(env_info *e);

/* The provenance columns, in CSV order, and their values for e. */
#define ENV_NCOLS 10
extern const char *const env_columns[ENV_NCOLS];
const char *env_value(const env_info *e, int col, char *buf, int n);

#endif
