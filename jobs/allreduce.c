/* Job kind `allreduce`: the handout's distributed_communication_single_node.
 * (Parameter table fixed here; the measuring routine is being written.) */
#include "config.h"
#include "common/check.h"
#include "runner/kind.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const backends[] = {"mpi", "nccl", NULL};

static const param_def params[] = {
    COMMON_PARAMS,
    {"run", "backend", P_STRING, 0, 0, backends,
     "mpi: host buffers reduced by MPI between CPU processes; "
     "nccl: device buffers reduced by NCCL, one GPU per process"},
    {"run", "warmup", P_INT, 0, 1000000, NULL,
     "untimed all-reduces before timing"},
    {"run", "iters", P_INT, 1, 10000000, NULL, "timed all-reduces"},
    {"allreduce", "size_mib", P_FLOAT, 4.0 / 1048576.0, 65536, NULL,
     "bytes of fp32 data per rank, in MiB (2^20 bytes)"},
};

static const char *const metrics[] = {
    "bytes",          "time_ms_mean", "time_ms_std", "time_ms_median",
    "time_ms_min",    "time_ms_max",  "algbw_gbps",  "busbw_gbps",
    NULL,
};

static int gpus_per_rank(const job *j) {
  return strcmp(job_str(j, "backend"), "nccl") == 0 ? 1 : 0;
}

static int validate(const job *j, char *err, size_t n) {
  double bytes = job_float(j, "size_mib") * 1048576.0;
  if (bytes != floor(bytes) || fmod(bytes, 4.0) != 0.0) {
    snprintf(err, n,
             "size_mib = %g is %.17g bytes, not a whole number of fp32 "
             "elements (allowed: sizes that are multiples of 4 bytes)",
             job_float(j, "size_mib"), bytes);
    return 1 + kind_param_index(j->kind, "size_mib");
  }
  return 0;
}

static int run(const job *j, result *r) {
  (void)j;
  (void)r;
  FAIL(ERR_FAIL, "allreduce: not written yet");
}

const kind_def kind_allreduce = {
    .name = "allreduce",
    .summary = "time an fp32 all-reduce: MPI between CPU ranks or NCCL "
               "between GPUs",
    .params = params,
    .nparams = (int)(sizeof params / sizeof params[0]),
    .metrics = metrics,
    .gpus_per_rank = gpus_per_rank,
    .validate = validate,
    .run = run,
};
