/* Job kinds: what a job measures. One file per kind under jobs/ supplies its
 * parameter table, its metric columns and the routine every worker rank runs.
 * The runner reads the tables (validation, CSV header, skip decisions); the
 * worker calls run(). Adding a kind = one file + one line in jobs/registry.c.
 *
 * Each kind file is compiled twice. The worker and the tests link it whole.
 * The runner links it compiled with KIND_DECLARATION_ONLY defined: the
 * parameter table, the metrics and validate, without the measurement code,
 * which needs CUDA, NCCL or MPI, libraries the runner must not load. So a
 * kind file puts params, metrics, validate and what they call first, then the run side in one
 * `#ifndef KIND_DECLARATION_ONLY` block, then its kind_def with
 * `.run = KIND_RUN(run)`. */
#ifndef TL_KIND_H
#define TL_KIND_H

#include "harness/param.h"

struct kind_def;

typedef struct job {
  const struct kind_def *kind;
  int index;                    /* position in the expanded job list */
  pvalue *v;                    /* one value per kind->params entry */
} job;

/* What a job measured. Rank 0's copy is written to the result file. */
#define RESULT_MAX_METRICS 64
typedef struct result {
  const struct kind_def *kind;
  double metric[RESULT_MAX_METRICS];   /* NaN = not measured */
  char message[1024];                  /* notes for an ok row, may be empty */
  /* Per-step samples behind the metrics ("fwd_ms=1.2 1.3 ..." lines): the
   * runner keeps them in NAME.samples.jsonl beside the CSV. */
  char samples[32768];
} result;

typedef struct kind_def {
  const char *name;
  const char *summary;
  const param_def *params;      /* includes the common ones (COMMON_PARAMS) */
  int nparams;
  const char *const *metrics;   /* CSV metric columns, units in the names;
                                   NULL-terminated */
  /* The value of the kind's `backend` setting whose jobs take one GPU a
   * rank ("cuda", "nccl"); NULL for a kind that never needs a GPU. The
   * runner turns a job that needs more GPUs than the machine has into a
   * "skipped" row (job_gpus_per_rank). */
  const char *gpu_backend;
  /* Cross-parameter check beyond each parameter's own range (may be NULL):
   * returns 0 if the job is valid, else 1 + the index (in params) of the
   * parameter to blame (its file:line is reported), with "what is wrong
   * (what is allowed)" in err. */
  int (*validate)(const job *j, char *err, size_t errlen);
  /* Runs on every rank inside MPI_Init/Finalize. Returns 0, ERR_FAIL or
   * ERR_OOM with the message in err_msg(); fills r (rank 0's is kept).
   * NULL in the runner's build (KIND_RUN), never in the worker's. */
  int (*run)(const job *j, result *r);
} kind_def;

/* A kind_def's run: the function, or NULL where the run side is left out. */
#ifdef KIND_DECLARATION_ONLY
#define KIND_RUN(fn) NULL
#else
#define KIND_RUN(fn) (fn)
#endif

/* Parameters every kind has, first in its table:
 *   run.world_size  processes (ranks) launched for the job
 *   run.timeout_s   wall-clock limit; the whole process group is killed */
#define COMMON_PARAMS                                                        \
  {"run", "world_size", P_INT, 1, 4096, NULL,                                \
   "number of processes (ranks) the job is launched with"},                  \
  {"run", "timeout_s", P_FLOAT, 1, 604800, NULL,                             \
   "wall-clock limit of the job in seconds; the process group is killed"}

/* The registry (jobs/registry.c). */
const kind_def *kind_find(const char *name);
const kind_def *const *kind_all(void);        /* NULL-terminated */

int kind_param_index(const kind_def *k, const char *name);  /* -1 if absent */
/* validate() helper for kinds that run on one rank: 0 if world_size is 1,
 * else 1 + world_size's index with "what is wrong (allowed: 1)" in err. */
int job_need_one_rank(const job *j, char *err, size_t n);
/* GPUs each rank of j needs: 1 when its backend is its kind's gpu_backend,
 * else 0. */
int job_gpus_per_rank(const job *j);
int kind_metric_index(const kind_def *k, const char *name); /* -1 if absent */

/* Typed access to a job's values by leaf name; a wrong name or type is a
 * programming error and aborts. */
long long job_int(const job *j, const char *name);
double job_float(const job *j, const char *name);
const char *job_str(const job *j, const char *name);
int job_bool(const job *j, const char *name);

void result_init(result *r, const kind_def *k);
/* Set a metric by column name; an unknown name aborts (programming error). */
void result_set(result *r, const char *metric, double value);
/* Record the n samples behind a metric under `name` (e.g. "fwd_ms"). */
void result_samples(result *r, const char *name, const double *v, int n);

#endif
