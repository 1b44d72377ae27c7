/* Provenance: what machine and which library versions a row came from.
 * Versions are asked of the libraries actually loaded at run time
 * (cudaRuntimeGetVersion, ncclGetVersion, MPI_Get_library_version), not
 * taken from the headers we compiled against.
 *
 * Only the worker links those libraries, so only the worker can ask them
 * (env_probe_in_process); the runner, which must not load them, asks the
 * worker (env_probe_worker: `worker --env`). */
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

/* What the system tells without CUDA, NCCL or MPI: host, CPU, the NVIDIA
 * kernel driver (/proc); gpu_count 0 and "none" for the GPU's name and the
 * libraries' versions. Never fails: what cannot be found reads "none" or
 * "unknown". (common/env.c) */
void env_probe_host(env_info *e);

/* The host's part and the libraries' as this process loaded them: GPUs
 * through the CUDA runtime, NCCL's and MPI's versions. Never fails: no
 * driver or no device is 0 GPUs. Defined in common/env_libs.c, which only
 * the worker's library holds (it links CUDA, NCCL and MPI); MPI need not
 * be initialised. */
void env_probe_in_process(env_info *e);

/* For a program that must not load CUDA, NCCL or MPI (the runner): the
 * worker's env_probe_in_process, by running `WORKER --env` (worker_path:
 * the worker program) and reading its env.<column>=<value> lines; its
 * stderr goes to ours. 0 if the worker answered every column; -1 if it
 * could not be run, failed or left a column out: then e holds
 * env_probe_host's values and one line on stderr says why. */
int env_probe_worker(const char *worker_path, env_info *e);

/* The provenance columns, in CSV order, and their values for e. */
#define ENV_NCOLS 10
extern const char *const env_columns[ENV_NCOLS];
const char *env_value(const env_info *e, int col, char *buf, int n);
/* The inverse: e's column col from its text (as env_value writes it);
 * -1 if a count column (gpu_count, cpu_cores) is not a count. Longer text
 * is cut to the field's size. */
int env_set(env_info *e, int col, const char *value);

#endif
