/* Job kinds: what a job measures. One file per kind under jobs/ supplies its
 * settings struct and the table that fills it (harness/param.h), its
 * metric columns and the routine every worker rank runs. The runner reads
 * the tables (validation, defaults, CSV header, skip decisions); the
 * worker fills the struct from the job's values and calls run(). Adding a
 * kind = one file + one line in jobs/registry.c (+ the file in
 * jobs/local.am); adding a setting = one member and one table row in the
 * kind's file.
 *
 * Each kind file is compiled twice. The worker and the tests link it whole.
 * The runner links it compiled with KIND_DECLARATION_ONLY defined: the
 * parameter table, the metrics and validate, without the measurement code,
 * which needs CUDA, NCCL or MPI, libraries the runner must not load. So a
 * kind file puts its settings, params, metrics, validate and what they
 * call first, then the run side in one `#ifndef KIND_DECLARATION_ONLY`
 * block, then its kind_def with KIND_TABLES. */
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

/* The settings every kind has: every kind's settings struct begins with a
 * run_settings member named run, filled by COMMON_PARAMS, the first two
 * rows of its table (kind_table_check enforces both). */
typedef struct run_settings {
  int world_size;               /* processes (ranks) launched for the job */
  double timeout_s;             /* wall-clock limit; the group is killed */
} run_settings;

typedef struct kind_def {
  const char *name;
  const char *summary;
  const param_def *params;      /* includes the common ones (COMMON_PARAMS) */
  int nparams;
  size_t settings_size;         /* sizeof the struct params fill */
  const char *const *metrics;   /* CSV metric columns, units in the names;
                                   NULL-terminated */
  /* The value of the kind's `backend` setting whose jobs take one GPU a
   * rank ("cuda", "nccl"); NULL for a kind that never needs a GPU. The
   * runner turns a job that needs more GPUs than the machine has into a
   * "skipped" row (job_gpus_per_rank). */
  const char *gpu_backend;
  /* The kind runs on one rank: the runner refuses world_size != 1 (after
   * validate), blaming world_size. */
  bool one_rank;
  /* Cross-parameter check beyond each parameter's own range (may be NULL),
   * on the filled settings struct: returns 0 if the job is valid, else
   * BLAME(struct, member) naming the setting to blame (its file:line is
   * reported), with "what is wrong (what is allowed)" in err. */
  int (*validate)(const void *settings, char *err, size_t errlen);
  /* Runs on every rank inside MPI_Init/Finalize with the filled settings
   * struct. Returns 0, ERR_FAIL or ERR_OOM with the message in err_msg();
   * fills r (rank 0's is kept). NULL in the runner's build (KIND_RUN),
   * never in the worker's. */
  int (*run)(const void *settings, result *r);
} kind_def;

/* validate()'s answer for a failed check: the member of settings struct st
 * to blame (never 0, so 0 still means valid). */
#define BLAME(st, member) (1 + (int)offsetof(st, member))

/* A kind_def's run: the function, or NULL where the run side is left out. */
#ifdef KIND_DECLARATION_ONLY
#define KIND_RUN(fn) NULL
#else
#define KIND_RUN(fn) (fn)
#endif

/* The members of a kind_def that come from its file's declarations, by
 * the names every kind file uses: `params`, `metrics` and `run`, the
 * settings struct st and the validate function (or NULL). */
#define KIND_TABLES(st, validate_fn)                                  \
  .params = params, .nparams = (int)(sizeof params / sizeof params[0]), \
  .settings_size = sizeof(st), .metrics = metrics,                    \
  .validate = (validate_fn), .run = KIND_RUN(run)

/* The first two rows of every kind's table (st: its settings struct). */
#define COMMON_PARAMS(st)                                                   \
  {"run", "world_size", INT_FIELD(st, run.world_size), 1, 4096, NULL, NULL, \
   "1", "number of processes (ranks) the job is launched with"},           \
  {"run", "timeout_s", FLOAT_FIELD(st, run.timeout_s), 1, 604800, NULL,     \
   "s", "600",                                                             \
   "wall-clock limit of the job; the process group is killed"}

/* The registry (jobs/registry.c). */
const kind_def *kind_find(const char *name);
const kind_def *const *kind_all(void);        /* NULL-terminated */

/* Table access for the runner and the worker (jobs/job.c). */
int kind_param_index(const kind_def *k, const char *name);  /* -1 if absent */
/* The parameter a validate() answer names: its index, or -1 when blame is
 * not BLAME() of any row's field. */
int kind_blamed_param(const kind_def *k, int blame);
/* The table's own invariants (types, ranges, defaults, fields, the common
 * rows first): 0, or -1 with what is wrong in err. For the tests: a table
 * that breaks one is a bug, not bad input. */
int kind_table_check(const kind_def *k, char *err, size_t n);
int kind_metric_index(const kind_def *k, const char *name); /* -1 if absent */

/* j's settings struct (k->settings_size bytes at out); strings point into
 * j->v. */
void job_settings(const job *j, void *out);
/* The common settings of a job, which the runner reads to launch it. */
int job_world_size(const job *j);
double job_timeout_s(const job *j);
/* For one_rank kinds: 0 if world_size is 1, else BLAME of world_size with
 * "what is wrong (allowed: 1)" in err. */
int job_need_one_rank(const job *j, char *err, size_t n);
/* GPUs each rank of j needs: 1 when its backend is its kind's gpu_backend,
 * else 0. */
int job_gpus_per_rank(const job *j);

void result_init(result *r, const kind_def *k);
/* Set a metric by column name; an unknown name aborts (programming error). */
void result_set(result *r, const char *metric, double value);
/* Record the n samples behind a metric under `name` (e.g. "fwd_ms"). */
void result_samples(result *r, const char *name, const double *v, int n);

#endif
