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
const char *resultfile_get(const resultfile *rf, const char *key);
void resultfile_free(resultfile *rf);

/* Copy s into dst (size n) with newlines, CRs and tabs turned to spaces:
 * messages travel in one line of a result file and one CSV cell. */
void text_one_line(char *dst, size_t n, const char *s);

#endif
