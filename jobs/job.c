/* A kind's table as the runner and the worker use it: lookups, the
 * settings struct, the common settings; and a result's metrics. */
#include "config.h"
#include "common/check.h"
#include "harness/kind.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kind_param_index(const kind_def *k, const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].name, name) == 0) return i;
  return -1;
}

int kind_blamed_param(const kind_def *k, int blame) {
  for (int i = 0; blame > 0 && i < k->nparams; i++)
    if (k->params[i].field == (size_t)(blame - 1)) return i;
  return -1;
}

/* The common rows: what COMMON_PARAMS writes, where run_settings says. */
static int common_row_ok(const param_def *d, const char *name, ptype t,
                         size_t field) {
  return strcmp(d->group, "run") == 0 && strcmp(d->name, name) == 0 &&
         d->type == t && d->field == field;
}

int kind_table_check(const kind_def *k, char *err, size_t n) {
  if (k->nparams < 2 ||
      !common_row_ok(&k->params[0], "world_size", P_INT,
                     offsetof(run_settings, world_size)) ||
      !common_row_ok(&k->params[1], "timeout_s", P_FLOAT,
                     offsetof(run_settings, timeout_s))) {
    snprintf(err, n, "kind %s: its table must start with COMMON_PARAMS and "
             "its settings with run_settings run", k->name);
    return -1;
  }
  for (int i = 0; i < k->nparams; i++) {
    const param_def *d = &k->params[i];
    size_t size = d->type == P_FLOAT    ? sizeof(double)
                  : d->type == P_STRING ? sizeof(const char *)
                  : d->type == P_BOOL   ? sizeof(bool)
                                        : sizeof(int);
    if (d->field + size > k->settings_size) {
      snprintf(err, n, "kind %s: %s's field lies outside its settings "
               "struct", k->name, d->name);
      return -1;
    }
    if (d->type == P_INT && (d->min < INT_MIN || d->max > INT_MAX)) {
      snprintf(err, n, "kind %s: %s's range does not fit its int field",
               k->name, d->name);
      return -1;
    }
    if (!d->help || !d->help[0]) {
      snprintf(err, n, "kind %s: %s has no help", k->name, d->name);
      return -1;
    }
    pvalue v;
    char why[512];
    if (d->def && pvalue_parse(d, d->def, &v, why, sizeof why) != 0) {
      snprintf(err, n, "kind %s: the default of %s: %s", k->name, d->name,
               why);
      return -1;
    }
    for (int j = 0; j < i; j++) {
      if (strcmp(k->params[j].name, d->name) == 0) {
        snprintf(err, n, "kind %s: two parameters named %s", k->name,
                 d->name);
        return -1;
      }
      /* Distinct fields: a blame names one row, and no row overwrites
       * another's member. */
      if (k->params[j].field == d->field) {
        snprintf(err, n, "kind %s: %s and %s fill the same field", k->name,
                 k->params[j].name, d->name);
        return -1;
      }
    }
  }
  return 0;
}

void job_settings(const job *j, void *out) {
  settings_fill(j->kind->params, j->kind->nparams, j->v, out);
}

/* COMMON_PARAMS are rows 0 and 1 of every table (kind_table_check). */
int job_world_size(const job *j) { return (int)j->v[0].i; }
double job_timeout_s(const job *j) { return j->v[1].f; }

int job_need_one_rank(const job *j, char *err, size_t n) {
  int w = job_world_size(j);
  if (w == 1) return 0;
  snprintf(err, n, "world_size = %d, but kind %s runs on one rank "
           "(allowed: 1)", w, j->kind->name);
  return BLAME(run_settings, world_size);
}

/* The setting named `backend` picks the engine, in every kind that has a
 * gpu_backend. */
int job_gpus_per_rank(const job *j) {
  const char *gpu = j->kind->gpu_backend;
  int b = gpu ? kind_param_index(j->kind, "backend") : -1;
  return b >= 0 && strcmp(j->v[b].s, gpu) == 0;
}

int kind_metric_index(const kind_def *k, const char *name) {
  for (int i = 0; k->metrics[i]; i++)
    if (strcmp(k->metrics[i], name) == 0) return i;
  return -1;
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
