/* An experiment file, read and validated: every parameter of the job kind
 * with either one fixed value or a sweep list, and the cartesian expansion of
 * the sweep into jobs.
 *
 * File format (libconfig 1.5):
 *   name = "allreduce";            # names the CSV: <out-dir>/<name>.csv
 *   kind = "allreduce";            # a job kind of jobs/registry.c
 *   run = { warmup = 5; iters = 20; timeout_s = 300.0; };
 *   allreduce = { ... };           # the kind's own group(s)
 *   sweep = { backend = ["mpi", "nccl"]; world_size = [2, 4, 6]; };
 * Sweep keys are leaf names; every parameter is given at most once, either
 * fixed in its group or as a sweep list; one left out takes its kind's
 * default (param_def.def), and one without a default must be given. The
 * first sweep key written varies slowest. A relative @include path resolves
 * against the experiment file's own folder, an absolute one as given. */
#ifndef TL_EXPERIMENT_H
#define TL_EXPERIMENT_H

#include <stddef.h>
#include <stdio.h>

#include "harness/kind.h"

typedef struct setting {
  const param_def *def;
  int swept;            /* given under `sweep` (possibly narrowed by --only) */
  int nvalues;          /* 1 when fixed */
  pvalue *values;
  char *file;           /* where it was given ("command line" for --set;
                           for a default, the kind line's file) */
  int line;
  int defaulted;        /* the value is the kind's default: not given */
} setting;

typedef struct experiment {
  char *path;           /* as given on the command line */
  char *name;
  const kind_def *kind;
  setting *settings;    /* kind->nparams entries, in the kind's table order */
  int *sweep_order;     /* parameter indices in the order written in sweep */
  int nsweep;
} experiment;

/* Read, validate, apply overrides, and check every expanded job with
 * kind->validate. sets: "name=value" (name is a leaf name or group.name);
 * onlys: "name=v1,v2,..." restricting a swept list to those values (each
 * in the list, once; one --only per parameter). On the first mistake
 * returns -1 and writes "file:line: what is wrong (what is allowed)" to err
 * (no newline); for command-line mistakes "file" is "command line". */
int experiment_load(experiment *e, const char *path, char *const *sets,
                    int nsets, char *const *onlys, int nonlys, char *err,
                    size_t errlen);
void experiment_free(experiment *e);

/* What is wrong with a kind name no kind has: 'unknown kind "NAME" (did
 * you mean KIND? kinds: ...)', for experiment files and runner --kinds. */
void experiment_unknown_kind(const char *name, char *buf, size_t n);

/* Number of jobs: the product of the sweep lists' lengths (1 if no sweep). */
size_t experiment_njobs(const experiment *e);
/* Job i of the expansion; j->v must hold kind->nparams values. */
void experiment_job(const experiment *e, size_t i, job *j);

/* The resolved experiment as a JSON object (name, kind, file, each
 * parameter's fixed value or sweep list with its file:line, unit, default
 * and whether the value is that default, the sweep order, and the list of
 * defaulted parameters). */
void experiment_write_json(const experiment *e, FILE *f, int indent);

#endif
