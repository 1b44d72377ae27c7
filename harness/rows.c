#include "config.h"
#include "harness/rows.h"

#include "common/check.h"
#include "common/env.h"
#include "harness/csv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const tail_cols[] = {"git_commit", "git_dirty",
                                        "runner_version"};

const char *rows_provenance_column(int i) {
  if (i == 0) return "utc";
  if (i <= ENV_NCOLS) return env_columns[i - 1];
  return tail_cols[i - 1 - ENV_NCOLS];
}

int rows_columns(const experiment *e, rows *r) {
  const kind_def *k = e->kind;
  int nmetrics = 0;
  while (k->metrics[nmetrics]) nmetrics++;
  r->ncols = k->nparams + nmetrics + 2 + ROWS_NPROVENANCE;
  r->cols = calloc((size_t)r->ncols, sizeof *r->cols);
  CHECK_ALLOC(r->cols, (size_t)r->ncols * sizeof *r->cols);
  int c = 0;
  for (int i = 0; i < k->nparams; i++) r->cols[c++] = strdup(k->params[i].name);
  for (int i = 0; i < nmetrics; i++) r->cols[c++] = strdup(k->metrics[i]);
  r->cols[c++] = strdup("status");
  r->cols[c++] = strdup("message");
  for (int i = 0; i < ROWS_NPROVENANCE; i++)
    r->cols[c++] = strdup(rows_provenance_column(i));
  for (int i = 0; i < c; i++) CHECK_ALLOC(r->cols[i], 32);
  /* A metric named like a parameter would make two columns of one name. */
  for (int i = 0; i < c; i++)
    for (int j = i + 1; j < c; j++) ASSERT(strcmp(r->cols[i], r->cols[j]) != 0);
  r->fd = -1;
  return 0;
}

char *rows_job_key(const job *j) {
  size_t cap = 64, len = 0;
  char *key = malloc(cap);
  if (!key) return NULL;
  key[0] = '\0';
  for (int i = 0; i < j->kind->nparams; i++) {
    char buf[PVALUE_STR_MAX + 32];
    pvalue_format(&j->v[i], buf, sizeof buf);
    size_t need = len + strlen(buf) + 2;
    if (need > cap) {
      cap = need * 2;
      char *k = realloc(key, cap);
      if (!k) { free(key); return NULL; }
      key = k;
    }
    len += (size_t)sprintf(key + len, "%s%s", i ? "\x1f" : "", buf);
  }
  return key;
}

/* A row's key: the texts of the parameter columns, in the kind's order;
 * a column the file predates (from[i] < 0) reads as its default's text. */
static char *row_key(char **row, const int *from, char *const *dtext,
                     int nparams) {
  size_t len = 1;
  for (int i = 0; i < nparams; i++)
    len += strlen(from[i] >= 0 ? row[from[i]] : dtext[i]) + 1;
  char *key = malloc(len);
  if (!key) return NULL;
  char *w = key;
  for (int i = 0; i < nparams; i++) {
    if (i) *w++ = '\x1f';
    const char *cell = from[i] >= 0 ? row[from[i]] : dtext[i];
    size_t l = strlen(cell);
    memcpy(w, cell, l);
    w += l;
  }
  *w = '\0';
  return key;
}

/* Jobs by key: open addressing over FNV-1a hashes, so matching the CSV's
 * rows against the sweep costs rows + jobs lookups, not rows x jobs string
 * comparisons (a 1M-job sweep against 100k rows decides in seconds). A
 * sweep's jobs have distinct keys (its lists hold distinct values). */
typedef struct job_index {
  size_t cap;           /* a power of two, at least twice the jobs */
  size_t *slot;         /* job + 1, 0 = empty */
  uint64_t *hash;       /* of the job in the slot */
  char **keys;          /* per job */
} job_index;

static uint64_t fnv1a(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static void job_index_free(job_index *x, size_t njobs) {
  for (size_t i = 0; x->keys && i < njobs; i++) free(x->keys[i]);
  free(x->keys);
  free(x->slot);
  free(x->hash);
  memset(x, 0, sizeof *x);
}

static int job_index_build(job_index *x, const job *jobs, size_t njobs) {
  memset(x, 0, sizeof *x);
  x->cap = 16;
  while (x->cap < 2 * njobs) x->cap *= 2;
  x->slot = calloc(x->cap, sizeof *x->slot);
  x->hash = calloc(x->cap, sizeof *x->hash);
  x->keys = calloc(njobs ? njobs : 1, sizeof *x->keys);
  if (!x->slot || !x->hash || !x->keys) {
    job_index_free(x, njobs);
    FAIL(ERR_OOM, "out of memory indexing %zu jobs", njobs);
  }
  for (size_t i = 0; i < njobs; i++) {
    if (!(x->keys[i] = rows_job_key(&jobs[i]))) {
      job_index_free(x, njobs);
      FAIL(ERR_OOM, "out of memory indexing %zu jobs", njobs);
    }
    uint64_t h = fnv1a(x->keys[i]);
    size_t s = (size_t)h & (x->cap - 1);
    while (x->slot[s]) s = (s + 1) & (x->cap - 1);
    x->slot[s] = i + 1;
    x->hash[s] = h;
  }
  return 0;
}

/* The job whose key is key, or -1. */
static long job_index_find(const job_index *x, const char *key) {
  uint64_t h = fnv1a(key);
  for (size_t s = (size_t)h & (x->cap - 1); x->slot[s]; s = (s + 1) & (x->cap - 1))
    if (x->hash[s] == h && strcmp(x->keys[x->slot[s] - 1], key) == 0)
      return (long)(x->slot[s] - 1);
  return -1;
}

/* Where each of r's columns is in the file t: from[c] is its index there,
 * or -1 for a column the file predates: a parameter with a default (its
 * rows read as having the default) or a metric (its rows did not measure
 * it: empty). Any other difference is a mismatch, said in why. The file's
 * columns must otherwise be r's, in r's order. */
static int map_header(const rows *r, const experiment *e, const csv_table *t,
                      int *from, char *why, size_t n) {
  int f = 0, np = e->kind->nparams, nm = 0;
  /* The first of r's columns taken as missing since the file's column f
   * last matched: where the two part if f never matches again. */
  int parted = -1;
  while (e->kind->metrics[nm]) nm++;
  for (int c = 0; c < r->ncols; c++) {
    if (f < t->ncols && strcmp(t->header[f], r->cols[c]) == 0) {
      from[c] = f++;
      parted = -1;
    } else if ((c < np && e->kind->params[c].def) ||
               (c >= np && c < np + nm)) {
      from[c] = -1;
      if (parted < 0) parted = c;
    } else {
      if (parted < 0) parted = c;
      break;
    }
  }
  if (parted < 0 && f == t->ncols) return 1;
  if (f == t->ncols)
    snprintf(why, n, "it ends after %d columns, where this experiment writes "
             "\"%s\"", f, r->cols[parted]);
  else if (parted < 0)
    snprintf(why, n, "column %d is \"%s\", after the last one this "
             "experiment writes", f + 1, t->header[f]);
  else
    snprintf(why, n, "column %d is \"%s\", where this experiment writes "
             "\"%s\"", f + 1, t->header[f], r->cols[parted]);
  return 0;
}

/* The canonical text of each parameter's default (NULL: none), for the
 * columns a file predates; free with free_texts. */
static char **default_texts(const kind_def *k) {
  char **d = calloc((size_t)k->nparams, sizeof *d);
  for (int i = 0; d && i < k->nparams; i++) {
    pvalue v;
    char buf[PVALUE_STR_MAX + 32];
    if (param_default(&k->params[i], &v) != 0) continue;
    pvalue_format(&v, buf, sizeof buf);
    if (!(d[i] = strdup(buf))) {
      for (int j = 0; j < i; j++) free(d[j]);
      free(d);
      return NULL;
    }
  }
  return d;
}

static void free_texts(char **d, int n) {
  for (int i = 0; d && i < n; i++) free(d[i]);
  free(d);
}

static int create_with_header(rows *r, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
  CHECK_SYS(fd >= 0, "cannot create %s", path);
  int rc = csv_append_row(fd, (const char *const *)r->cols, r->ncols);
  close(fd);
  /* Leave no header-less file behind (a full disk): the next run starts
   * afresh either way, but a user looking at the folder sees nothing odd. */
  if (rc < 0) unlink(path);
  TRY(rc);
  return 0;
}

/* A file that a full disk left empty, or holding a cut-off first line of
 * our own header, has no rows to keep: it is treated as a new file. */
static int is_unfinished_start(const rows *r, const char *path,
                               const struct stat *st) {
  if (st->st_size == 0) return 1;
  char *head = csv_format_row((const char *const *)r->cols, r->ncols);
  if (!head) return 0;
  size_t len = strlen(head);
  int unfinished = 0;
  if ((size_t)st->st_size < len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *have = malloc(len);
    if (fd >= 0 && have) {
      ssize_t got = read(fd, have, len);
      unfinished = got == st->st_size && memcmp(have, head, (size_t)got) == 0;
    }
    free(have);
    if (fd >= 0) close(fd);
  }
  free(head);
  return unfinished;
}

/* Rewrite path as t without its dropped rows, in r's columns (a column
 * the file predates filled with the default's text, or left empty for a
 * metric), so that appended rows line up. Safe: the caller holds the
 * output's lock, so no other runner appends to this file. dtext has one
 * entry per parameter (nparams). */
static int rewrite(const char *path, const rows *r, const csv_table *t,
                   const char *drop, size_t kept, const int *from,
                   char *const *dtext, int nparams) {
  /* A view: the cells stay t's and dtext's. */
  csv_table keep = {.ncols = r->ncols, .header = r->cols};
  char **cells = calloc((kept ? kept : 1) * (size_t)r->ncols, sizeof *cells);
  keep.rows = calloc(kept ? kept : 1, sizeof *keep.rows);
  int rc = 0;
  if (!cells || !keep.rows) {
    rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of memory");
  } else {
    for (size_t row = 0; row < t->nrows; row++) {
      if (drop[row]) continue;
      char **out = cells + keep.nrows * (size_t)r->ncols;
      for (int c = 0; c < r->ncols; c++)
        out[c] = from[c] >= 0 ? t->rows[row][from[c]]
                 : c < nparams ? dtext[c] : "";
      keep.rows[keep.nrows++] = out;
    }
    rc = csv_write_file(path, &keep);
  }
  free(cells);
  free(keep.rows);
  return rc;
}

int rows_open(rows *r, const char *path, const experiment *e,
              const job *jobs, size_t njobs, int force, int dry_run,
              char *done, rows_vet *vet, void *vet_ctx) {
  TRY(rows_columns(e, r));
  r->path = strdup(path);
  CHECK_ALLOC(r->path, strlen(path));
  memset(done, 0, njobs);
  struct stat st;
  int fresh = stat(path, &st) != 0;
  if (fresh) CHECK_SYS(errno == ENOENT, "cannot read %s", path);
  if (!fresh && is_unfinished_start(r, path, &st)) {
    if (dry_run) return 0;
    CHECK_SYS(unlink(path) == 0, "cannot remove the unfinished %s", path);
    fresh = 1;
  }
  if (fresh) {
    if (dry_run) return 0;
    TRY(create_with_header(r, path));
  } else {
    csv_table t;
    TRY(csv_read(path, &t));
    char why[512];
    int *from = calloc((size_t)r->ncols, sizeof *from);
    char **dtext = default_texts(e->kind);
    if (!from || !dtext) {
      free(from);
      free_texts(dtext, e->kind->nparams);
      csv_free(&t);
      FAIL(ERR_OOM, "out of memory reading %s", path);
    }
    if (!map_header(r, e, &t, from, why, sizeof why)) {
      free(from);
      free_texts(dtext, e->kind->nparams);
      csv_free(&t);
      FAIL(ERR_FAIL,
           "%s holds other columns than experiment %s writes (%s); move it "
           "away or choose another --out-dir",
           path, e->name, why);
    }
    int nparams = e->kind->nparams, status_col = csv_col(&t, "status");
    int predates = 0;   /* the file lacks a defaulted parameter's column */
    for (int c = 0; c < r->ncols; c++) predates |= from[c] < 0;
    job_index x;
    char *drop = calloc(t.nrows ? t.nrows : 1, 1);
    long *job_of = calloc(t.nrows ? t.nrows : 1, sizeof *job_of);
    int rc = job_index_build(&x, jobs, njobs);
    if (rc == 0 && (!drop || !job_of))
      rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of memory");
    /* A job is done if some row with its key is ok; every row of a job
     * that will run again is dropped. */
    for (size_t row = 0; rc == 0 && row < t.nrows; row++) {
      char *key = row_key(t.rows[row], from, dtext, nparams);
      if (!key) { rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of memory"); break; }
      job_of[row] = job_index_find(&x, key);
      free(key);
      if (job_of[row] >= 0 && !force &&
          strcmp(t.rows[row][status_col], "ok") == 0)
        done[job_of[row]] = 1;
    }
    if (rc == 0 && vet) rc = vet(&t, done, vet_ctx);
    int vetoed = rc > 0;
    size_t kept = 0;
    for (size_t row = 0; rc == 0 && row < t.nrows; row++) {
      drop[row] = job_of[row] >= 0 && !done[job_of[row]];
      kept += !drop[row];
    }
    if (rc == 0 && !dry_run && (kept < t.nrows || t.torn || predates))
      rc = rewrite(path, r, &t, drop, kept, from, dtext, nparams);
    job_index_free(&x, njobs);
    free(drop);
    free(job_of);
    free(from);
    free_texts(dtext, nparams);
    csv_free(&t);
    if (rc < 0) { err_trace(__FILE__, __LINE__); return rc; }
    if (vetoed) return rc;
  }
  if (!dry_run) {
    r->fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    CHECK_SYS(r->fd >= 0, "cannot open %s for appending", path);
  }
  return 0;
}

int rows_append(rows *r, const char *const *fields) {
  TRY(csv_append_row(r->fd, fields, r->ncols));
  return 0;
}

void rows_close(rows *r) {
  if (r->fd >= 0) close(r->fd);
  for (int i = 0; i < r->ncols && r->cols; i++) free(r->cols[i]);
  free(r->cols);
  free(r->path);
  memset(r, 0, sizeof *r);
  r->fd = -1;
}
