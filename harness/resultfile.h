/* The result file: how a job's ranks hand their outcome to the runner.
 *
 * Rank 0 writes PATH once every rank has finished and agreed; a rank that
 * fails writes PATH.rank<R> before aborting the job. Each file is lines of
 * "key=value" (values never hold a newline):
 *   status=ok|error|oom     message=...
 *   metric.<column>=<number>   env.<column>=<text>
 * A text file rather than stdout because ranks' output interleaves and
 * libraries print on it. */
#ifndef TL_RESULTFILE_H
#define TL_RESULTFILE_H

#include <stdio.h>

#include "common/env.h"
#include "harness/kind.h"

typedef struct resultfile {
  int n;
  char **key, **value;
} resultfile;

/* Write atomically (temp + rename). r and env may be NULL. */
int resultfile_write(const char *path, const char *status,
                     const char *message, const result *r,
                     const env_info *env);
/* 0 and filled rf, or -1 if the file does not exist / cannot be read. */
int resultfile_read(const char *path, resultfile *rf);
/* The lines of f up to its end into rf (as resultfile_read, from a stream:
 * `worker --env`'s output). Stops early, keeping what it has, if out of
 * memory; a caller that needs a key checks for it. */
void resultfile_read_stream(FILE *f, resultfile *rf);
/* env's "env.<column>=<value>" lines, one per env_columns entry, onto f;
 * the caller checks ferror(f). */
void resultfile_put_env(FILE *f, const env_info *env);
const char *resultfile_get(const resultfile *rf, const char *key);
void resultfile_free(resultfile *rf);

/* Copy s into dst (size n) with newlines, CRs and tabs turned to spaces:
 * messages travel in one line of a result file and one CSV cell. */
void text_one_line(char *dst, size_t n, const char *s);

#endif
