#include "config.h"
#include "common/env.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_MPI
#include <mpi.h>
#endif
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

const char *const env_columns[ENV_NCOLS] = {
    "host",         "machine",        "gpu_name",
    "gpu_count",    "cpu_model",      "cpu_cores",
    "driver_version", "cuda_runtime_version", "nccl_version",
    "mpi_library",
};

static void copy(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src);
  dst[strcspn(dst, "\r\n")] = '\0';
}

static void probe_cpu(env_info *e) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  e->cpu_cores = n > 0 ? (int)n : 0;
  copy(e->cpu_model, sizeof e->cpu_model, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *colon = strchr(line, ':');
    if (colon) {
      colon++;
      while (*colon == ' ' || *colon == '\t') colon++;
      copy(e->cpu_model, sizeof e->cpu_model, colon);
    }
    break;
  }
  fclose(f);
}

/* The kernel driver's version: "NVRM version: ... Kernel Module  580.159.04". */
static void probe_driver(env_info *e) {
  copy(e->driver_version, sizeof e->driver_version, "none");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[512];
  if (fgets(line, sizeof line, f)) {
    /* The first token shaped like 580.159.04: the line's wording varies
     * ("Kernel Module", "Open Kernel Module for x86_64"). */
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\n", &save); tok;
         tok = strtok_r(NULL, " \t\n", &save)) {
      unsigned a, b;
      if (sscanf(tok, "%u.%u", &a, &b) == 2) {
        copy(e->driver_version, sizeof e->driver_version, tok);
        break;
      }
    }
  }
  fclose(f);
}

static void probe_gpu(env_info *e) {
  e->gpu_count = 0;
  copy(e->gpu_name, sizeof e->gpu_name, "none");
  copy(e->cuda_runtime_version, sizeof e->cuda_runtime_version, "none");
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
  if (n > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
    copy(e->gpu_name, sizeof e->gpu_name, p.name);
#endif
}

static void probe_libs(env_info *e) {
  copy(e->nccl_version, sizeof e->nccl_version, "none");
  copy(e->mpi_library, sizeof e->mpi_library, "none");
#ifdef HAVE_NCCL
  int v = 0;
  if (ncclGetVersion(&v) == ncclSuccess)
    snprintf(e->nccl_version, sizeof e->nccl_version, "%d.%d.%d",
             v / 10000, (v / 100) % 100, v % 100);
#endif
#ifdef HAVE_MPI
  /* Allowed before MPI_Init (MPI-3). */
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
    lib[strcspn(lib, ",\r\n")] = '\0';
    copy(e->mpi_library, sizeof e->mpi_library, lib);
  }
#endif
}

void env_probe(env_info *e) {
  memset(e, 0, sizeof *e);
  if (gethostname(e->host, sizeof e->host) != 0)
    copy(e->host, sizeof e->host, "unknown");
  e->host[sizeof e->host - 1] = '\0';
  probe_cpu(e);
  probe_driver(e);
  probe_gpu(e);
  probe_libs(e);
  if (e->gpu_count > 0)
    snprintf(e->machine, sizeof e->machine, "%dx %s", e->gpu_count,
             e->gpu_name);
  else
    snprintf(e->machine, sizeof e->machine, "CPU: %d cores %s", e->cpu_cores,
             e->cpu_model);
}

const char *env_value(const env_info *e, int col, char *buf, int n) {
  switch (col) {
    case 0: return e->host;
    case 1: return e->machine;
    case 2: return e->gpu_name;
    case 3: snprintf(buf, (size_t)n, "%d", e->gpu_count); return buf;
    case 4: return e->cpu_model;
    case 5: snprintf(buf, (size_t)n, "%d", e->cpu_cores); return buf;
    case 6: return e->driver_version;
    case 7: return e->cuda_runtime_version;
    case 8: return e->nccl_version;
    case 9: return e->mpi_library;
  }
  return "";
}
