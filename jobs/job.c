/* Typed access to a job's parameter values and a result's metrics. */
#include "config.h"
#include "common/check.h"
#include "harness/kind.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kind_param_index(const kind_def *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].name, name) == 0) return i;
  return -1;
}

int job_need_one_rank(const job *j, char *err, size_t n) {
  long long w = job_int(j, "world_size");
  if (w == 1) return 0;
  snprintf(err, n, "world_size = %lld, but kind %s runs on one rank "
           "(allowed: 1)", w, j->kind->name);
  return 1 + kind_param_index(j->kind, "world_size");
}

int job_gpus_per_rank(const job *j) {
  const char *gpu = j->kind->gpu_backend;
  return gpu && strcmp(job_str(j, "backend"), gpu) == 0;
}

int kind_metric_index(const kind_def *k, const char *name) {
  for (int i = 0; k->metrics[i]; i++)
    if (strcmp(k->metrics[i], name) == 0) return i;
  return -1;
}

static const pvalue *lookup(const job *j, const char *name, ptype t) {
  int i = kind_param_index(j->kind, name);
  if (i < 0 || j->kind->params[i].type != t) {
    fprintf(stderr, "internal error: job kind %s has no %s parameter %s\n",
            j->kind->name, ptype_name(t), name);
    abort();
  }
  return &j->v[i];
}

long long job_int(const job *j, const char *name) {
  return lookup(j, name, P_INT)->i;
}
double job_float(const job *j, const char *name) {
  return lookup(j, name, P_FLOAT)->f;
}
const char *job_str(const job *j, const char *name) {
  return lookup(j, name, P_STRING)->s;
}
int job_bool(const job *j, const char *name) {
  return (int)lookup(j, name, P_BOOL)->i;
}

void result_init(result *r, const kind_def *k) {
  memset(r, 0, sizeof *r);
  r->kind = k;
  for (int i = 0; i < RESULT_MAX_METRICS; i++) r->metric[i] = NAN;
}

void result_samples(result *r, const char *name, const double *v, int n) {
  size_t len = strlen(r->samples);
  int w = snprintf(r->samples + len, sizeof r->samples - len, "%s=", name);
  for (int i = 0; i < n && w > 0; i++) {
    len = strlen(r->samples);
    w = snprintf(r->samples + len, sizeof r->samples - len, "%s%.6g",
                 i ? " " : "", v[i]);
  }
  len = strlen(r->samples);
  if (len + 1 < sizeof r->samples) strcat(r->samples, "\n");
}

void result_set(result *r, const char *metric, double value) {
  int i = kind_metric_index(r->kind, metric);
  if (i < 0) {
    fprintf(stderr, "internal error: job kind %s has no metric %s\n",
            r->kind->name, metric);
    abort();
  }
  r->metric[i] = value;
}
