/* SLURM's environment (slurm.h). Only counts are read here; the launcher
 * (--launcher, TRAINLAB_LAUNCHER, or mpirun, which runs over the
 * allocation's nodes by itself) places the ranks. */
#include "config.h"
#include "harness/slurm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "[type:]N[,[type:]N...]" summed (a type may hold colons: "gpu:h100:8"),
 * or -1 if that is not what s holds. */
static long gres_count(const char *s) {
  long sum = 0;
  const char *p = s;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    const char *num = p;   /* after the entry's last colon */
    for (size_t i = 0; i < len; i++)
      if (p[i] == ':') num = p + i + 1;
    size_t digits = len - (size_t)(num - p);
    if (digits == 0 || digits > 7) return -1;
    long v = 0;
    for (size_t i = 0; i < digits; i++) {
      if (num[i] < '0' || num[i] > '9') return -1;
      v = v * 10 + (num[i] - '0');
    }
    sum += v;
    if (!end) return sum;
    p = end + 1;
  }
}

int slurm_gpus(char *how, size_t n) {
  if (n) how[0] = '\0';
  const char *job = getenv("SLURM_JOB_ID");
  if (!job || !*job) return -1;
  const char *per_node[] = {"SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_NODE"};
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(per_node[i]);
    if (!v || !*v) continue;
    const char *nodes = getenv("SLURM_JOB_NUM_NODES");
    /* a node count is a plain number: no type, no list */
    long g = gres_count(v),
         k = nodes && !strpbrk(nodes, ":,") ? gres_count(nodes) : -1;
    if (g < 0 || k < 1 || g * k > 1 << 20) {
      snprintf(how, n, "SLURM job %s: cannot count its GPUs from %s=%s and "
               "SLURM_JOB_NUM_NODES=%s (allowed: [type:]N[,...] GPUs a node "
               "and a node count of 1 or more; --gpus N gives the count)",
               job, per_node[i], v, nodes ? nodes : "(unset)");
      return -2;
    }
    snprintf(how, n, "SLURM job %s: %ld GPU%s a node (%s) x %ld node%s",
             job, g, g == 1 ? "" : "s", per_node[i], k, k == 1 ? "" : "s");
    return (int)(g * k);
  }
  const char *v = getenv("SLURM_GPUS");
  if (v && *v) {
    long g = gres_count(v);
    if (g < 0 || g > 1 << 20) {
      snprintf(how, n, "SLURM job %s: cannot count its GPUs from SLURM_GPUS=%s "
               "(allowed: [type:]N[,...]; --gpus N gives the count)", job, v);
      return -2;
    }
    snprintf(how, n, "SLURM job %s: %ld GPU%s (SLURM_GPUS)", job, g,
             g == 1 ? "" : "s");
    return (int)g;
  }
  return -1;
}
