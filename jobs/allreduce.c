/* Job kind `allreduce`: the handout's distributed_communication_single_node.
 * Times an fp32 all-reduce of size_mib MiB per rank, MPI between CPU ranks
 * or NCCL between GPUs: the collective kind's benchmark (jobs/collective.c,
 * whose header comment gives the method: buffers, timing, how ranks are
 * combined, nccl-tests' bandwidths, the exact check after timing) at op
 * all_reduce, under the settings and CSV columns this problem's rows have
 * always had. */
#include "config.h"
#include "harness/kind.h"
#include "jobs/common.h"

typedef struct allreduce_settings {
  run_settings run;
  const char *backend;
  int warmup;
  int iters;
  double size_mib;
} allreduce_settings;

static const param_def params[] = {
    COMMON_PARAMS(allreduce_settings),
    COLLECTIVE_RUN_PARAMS(allreduce_settings),
    {"allreduce", "size_mib", FLOAT_FIELD(allreduce_settings, size_mib),
     4.0 / 1048576.0, 65536, NULL, "MiB", NULL,
     "bytes of fp32 data per rank, in MiB (2^20 bytes)"},
};

static const char *const metrics[] = {COLLECTIVE_METRICS, NULL};

static int validate(const void *settings, char *err, size_t n) {
  const allreduce_settings *s = settings;
  if (collective_size_error(s->size_mib, err, n) != 0)
    return BLAME(allreduce_settings, size_mib);
  return 0;
}

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

static int run(const void *settings, result *r) {
  const allreduce_settings *s = settings;
  return collective_bench(s->backend, "all_reduce", s->size_mib, s->warmup,
                          s->iters, r);
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_allreduce = {
    .name = "allreduce",
    .summary = "time an fp32 all-reduce: MPI between CPU ranks or NCCL "
               "between GPUs",
    .gpu_backend = "nccl",
    KIND_TABLES(allreduce_settings, validate),
};
