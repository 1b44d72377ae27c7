/* An experiment's CSV: its columns, the rows already measured, and
 * appending a row per job as it finishes.
 *
 * Columns: the kind's parameters (the job's key), its metrics, status and
 * message, then provenance (utc, env_columns, git_commit, git_dirty,
 * runner_version). A job counts as done when a row with the same parameter
 * values has status ok; reopening drops the rows of the jobs about to run
 * again (failed, skipped, or all with --force), so no job ever has two rows.
 * A file written before a parameter with a default existed lacks its
 * column: its rows read as having the default, and reopening (not a dry
 * run) rewrites the file with the column filled in. */
#ifndef TL_ROWS_H
#define TL_ROWS_H

#include <stddef.h>

#include "common/env.h"
#include "harness/csv.h"
#include "harness/experiment.h"

/* The columns that end every row, after status and message: utc, the
 * machine's (env_columns), git_commit, git_dirty, runner_version. */
#define ROWS_NPROVENANCE (1 + ENV_NCOLS + 3)
const char *rows_provenance_column(int i);

typedef struct rows {
  char *path;
  int ncols;
  char **cols;          /* header */
  int fd;               /* open for appending, -1 for a dry run */
} rows;

/* A look at an existing file's rows (t, the file as read) once done is
 * known, before anything is written: 0 to go on, or a positive status
 * that rows_open returns with the file untouched. */
typedef int rows_vet(const csv_table *t, const char *done, void *ctx);

/* The header for experiment e (malloc'd strings; free with rows_close). */
int rows_columns(const experiment *e, rows *r);
/* Open path for e, reading it once. done[i] is set for jobs already
 * measured ok (all zero with force). vet (may be NULL) sees an existing
 * file's rows and may stop here. Unless dry_run, rewrite the file without
 * the rows of jobs that will run, then open it for appending (creating it
 * with its header). Returns 0, vet's positive status, or < 0 with a
 * message if the file cannot be read or its header differs other than by
 * missing columns of defaulted parameters. */
int rows_open(rows *r, const char *path, const experiment *e,
              const job *jobs, size_t njobs, int force, int dry_run,
              char *done, rows_vet *vet, void *vet_ctx);
int rows_append(rows *r, const char *const *fields);
void rows_close(rows *r);
/* The key text of a job: its parameter values joined by '\x1f'. */
char *rows_job_key(const job *j);

#endif
