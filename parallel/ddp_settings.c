/* The data-parallel settings an experiment names (ddp.h): strategy,
 * optimizer and grad_sync, their names, and which combinations are allowed.
 * Apart from parallel/ddp.c because the runner checks experiments with
 * them and must not link the container's collectives (NCCL, MPI) or
 * engines (CUDA). Invariant: nothing here calls into a communicator or an
 * engine. */
#include "config.h"
#include "parallel/ddp.h"

#include <stdio.h>
#include <string.h>

const char *const ddp_strategy_names[] = {"naive", "flat", "overlap",
                                          "bucketed", NULL};
const char *const ddp_optimizer_names[] = {"adamw", "sharded", "zero1",
                                           NULL};
const char *const ddp_sync_names[] = {"allreduce", "allgather", "alltoall",
                                      NULL};

static int parse(const char *const *names, const char *s) {
  for (int i = 0; names[i]; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

int ddp_strategy_parse(const char *s, ddp_strategy *out) {
  int i = parse(ddp_strategy_names, s);
  if (i < 0) return -1;
  *out = (ddp_strategy)i;
  return 0;
}

int ddp_optimizer_parse(const char *s, ddp_optimizer *out) {
  int i = parse(ddp_optimizer_names, s);
  if (i < 0) return -1;
  *out = (ddp_optimizer)i;
  return 0;
}

int ddp_sync_parse(const char *s, ddp_sync *out) {
  int i = parse(ddp_sync_names, s);
  if (i < 0) return -1;
  *out = (ddp_sync)i;
  return 0;
}

int ddp_check_combination(ddp_strategy s, ddp_optimizer o, double bucket_mib,
                          ddp_sync y, char *err, size_t n) {
  if (s == DDP_BUCKETED && !(bucket_mib > 0)) {
    snprintf(err, n, "bucket_mb = %g with strategy bucketed (allowed: a "
             "bucket size > 0 MiB)", bucket_mib);
    return -1;
  }
  if (s != DDP_BUCKETED && bucket_mib != 0) {
    snprintf(err, n, "bucket_mb = %g only applies to strategy bucketed "
             "(allowed with strategy %s: 0)", bucket_mib,
             ddp_strategy_names[s]);
    return -1;
  }
  /* ZeRO-1 replaces the all-reduce by a reduce-scatter of the flat buffer:
   * per-tensor reduce-scatters would cut every tensor W ways for nothing
   * that bucketed with a small bucket does not already do. */
  if (o == DDP_OPT_ZERO1 && s != DDP_FLAT && s != DDP_BUCKETED) {
    snprintf(err, n, "optimizer zero1 with strategy %s (allowed with zero1: "
             "flat, bucketed; per-tensor reduce-scatters are bucketed with "
             "a small bucket_mb)", ddp_strategy_names[s]);
    return -1;
  }
  /* The gathered copies are averaged inside a full AdamW step; the sharded
   * optimizers want reduced (or reduce-scattered) gradients instead. */
  if (y == DDP_SYNC_ALLGATHER && o != DDP_OPT_ADAMW) {
    snprintf(err, n, "optimizer %s with grad_sync allgather (allowed with "
             "allgather: adamw)", ddp_optimizer_names[o]);
    return -1;
  }
  /* The exchanged chunks are what ZeRO-1's reduce-scatter would sum. */
  if (y == DDP_SYNC_ALLTOALL && o != DDP_OPT_ZERO1) {
    snprintf(err, n, "optimizer %s with grad_sync alltoall (allowed with "
             "alltoall: zero1)", ddp_optimizer_names[o]);
    return -1;
  }
  return 0;
}
