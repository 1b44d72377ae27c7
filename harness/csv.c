/* RFC 4180 CSV: reading whole files, formatting rows, appending them
 * crash-safely and rewriting files atomically.
 *
 * Ownership: every string of a csv_table (header names, cells) and every
 * array (header, rows, rows[i]) is a separate malloc'd block, so csv_free()
 * also frees a table that a caller built the same way before calling
 * csv_write_file(). */
#include "config.h"
#include "harness/csv.h"

#include "common/check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- reading ----------------------------------------------------------- */

/* A growing byte buffer, for the file and for the field being parsed. */
typedef struct buf {
  char *p;
  size_t len, cap;
} buf;

static int buf_reserve(buf *b, size_t extra) {
  if (b->len + extra <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra) cap *= 2;
  char *p = realloc(b->p, cap);
  CHECK_ALLOC(p, cap);
  b->p = p;
  b->cap = cap;
  return 0;
}

static int buf_push(buf *b, char c) {
  TRY(buf_reserve(b, 1));
  b->p[b->len++] = c;
  return 0;
}

/* A record being assembled: its fields, each malloc'd. */
typedef struct record {
  char **f;
  int n, cap;
} record;

static void record_clear(record *r) {
  for (int i = 0; i < r->n; i++) free(r->f[i]);
  r->n = 0;
}

static int record_push(record *r, const buf *field) {
  if (r->n == r->cap) {
    int cap = r->cap ? 2 * r->cap : 32;
    char **f = realloc(r->f, (size_t)cap * sizeof *f);
    CHECK_ALLOC(f, (size_t)cap * sizeof *f);
    r->f = f;
    r->cap = cap;
  }
  char *s = malloc(field->len + 1);
  CHECK_ALLOC(s, field->len + 1);
  if (field->len) memcpy(s, field->p, field->len);
  s[field->len] = '\0';
  r->f[r->n++] = s;
  return 0;
}

static int read_all(const char *path, buf *b) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  CHECK_SYS(fd >= 0, "cannot open %s", path);
  for (;;) {
    int rc = buf_reserve(b, 65536);
    if (rc < 0) {
      close(fd);
      return rc;
    }
    ssize_t got = read(fd, b->p + b->len, b->cap - b->len);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int e = errno;
      close(fd);
      errno = e;
      CHECK_SYS(0, "cannot read %s", path);
    }
    if (got == 0) break;
    b->len += (size_t)got;
  }
  CHECK_SYS(close(fd) == 0, "cannot close %s", path);
  return 0;
}

/* Adds a complete record to t: the first becomes the header. */
static int take_record(const char *path, long line, record *r, csv_table *t) {
  if (t->header == NULL) {
    for (int i = 0; i < r->n; i++)
      for (int j = 0; j < i; j++)
        if (strcmp(r->f[i], r->f[j]) == 0)
          FAIL(ERR_FAIL, "%s:%ld: column name \"%s\" appears twice in the header",
               path, line, r->f[i]);
    t->header = r->f;
    t->ncols = r->n;
    *r = (record){0};
    return 0;
  }
  if (r->n > t->ncols)
    FAIL(ERR_FAIL, "%s:%ld: %d fields, but the header has %d", path, line,
         r->n, t->ncols);
  /* Pad a short row so every row has ncols cells. */
  while (r->n < t->ncols) TRY(record_push(r, &(buf){0}));
  if (t->nrows % 64 == 0) {
    size_t cap = t->nrows + 64;
    char ***rows = realloc(t->rows, cap * sizeof *rows);
    CHECK_ALLOC(rows, cap * sizeof *rows);
    t->rows = rows;
  }
  t->rows[t->nrows++] = r->f;
  *r = (record){0};
  return 0;
}

/* The parser proper; on error the caller frees t and the scratch. */
static int parse(const char *path, const buf *in, csv_table *t, record *rec,
                 buf *field) {
  const char *p = in->p, *end = in->p + in->len;
  long line = 1;        /* physical line of the current position */
  long rec_line = 1;    /* line where the current record started */
  int in_record = 0;    /* some character of the record has been seen */

  while (p < end) {
    if (!in_record) {
      /* Blank lines carry no record (a lone empty field is written as ""). */
      if (*p == '\n') { line++; p++; rec_line = line; continue; }
      if (*p == '\r' && p + 1 < end && p[1] == '\n') {
        line++; p += 2; rec_line = line; continue;
      }
      in_record = 1;
      rec_line = line;
    }
    field->len = 0;
    if (*p == '"') {
      long qline = line;
      p++;
      for (;;) {
        if (p == end) goto torn;   /* EOF inside quotes: a cut-off write */
        if (*p == '"') {
          if (p + 1 < end && p[1] == '"') {
            TRY(buf_push(field, '"'));
            p += 2;
            continue;
          }
          p++;
          break;
        }
        if (*p == '\0')
          FAIL(ERR_FAIL, "%s:%ld: NUL byte inside a field", path, line);
        if (*p == '\n') line++;
        TRY(buf_push(field, *p++));
      }
      if (p < end && *p != ',' && *p != '\n' &&
          !(*p == '\r' && p + 1 < end && p[1] == '\n')) {
        if (*p == '\r' && p + 1 == end) goto torn;
        FAIL(ERR_FAIL,
             "%s:%ld: unexpected character after the closing quote of a "
             "field opened on line %ld (a quote inside a quoted field must be "
             "doubled)", path, line, qline);
      }
    } else {
      while (p < end && *p != ',' && *p != '\n') {
        if (*p == '"')
          FAIL(ERR_FAIL, "%s:%ld: quote inside an unquoted field (fields "
               "holding quotes must be quoted, quotes doubled)", path, line);
        if (*p == '\0')
          FAIL(ERR_FAIL, "%s:%ld: NUL byte inside a field", path, line);
        if (*p == '\r') {
          if (p + 1 == end) goto torn;
          if (p[1] == '\n') break;
          FAIL(ERR_FAIL, "%s:%ld: carriage return inside an unquoted field",
               path, line);
        }
        TRY(buf_push(field, *p++));
      }
    }
    TRY(record_push(rec, field));
    if (p == end) goto torn;   /* the last line has no final newline */
    if (*p == ',') { p++; continue; }
    if (*p == '\r') p++;
    p++;   /* the '\n' */
    TRY(take_record(path, rec_line, rec, t));
    line++;
    in_record = 0;
  }
  /* A file that ends with a comma also has an unfinished record. */
  if (in_record) goto torn;
  goto done;
torn:
  record_clear(rec);
  t->torn = 1;
done:
  if (t->header == NULL)
    FAIL(ERR_FAIL, "%s: no complete header row (the file is empty%s)", path,
         t->torn ? " but for a torn line" : "");
  return 0;
}

int csv_read(const char *path, csv_table *t) {
  *t = (csv_table){0};
  buf in = {0}, field = {0};
  record rec = {0};
  int rc = read_all(path, &in);
  if (rc == 0) rc = parse(path, &in, t, &rec, &field);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    csv_free(t);
  }
  record_clear(&rec);
  free(rec.f);
  free(field.p);
  free(in.p);
  return rc;
}

void csv_free(csv_table *t) {
  if (t->header) {
    for (int j = 0; j < t->ncols; j++) free(t->header[j]);
    free(t->header);
  }
  for (size_t i = 0; i < t->nrows; i++) {
    if (!t->rows[i]) continue;
    for (int j = 0; j < t->ncols; j++) free(t->rows[i][j]);
    free(t->rows[i]);
  }
  free(t->rows);
  *t = (csv_table){0};
}

int csv_col(const csv_table *t, const char *name) {
  for (int j = 0; j < t->ncols; j++)
    if (strcmp(t->header[j], name) == 0) return j;
  return -1;
}

/* ---- writing ----------------------------------------------------------- */

static int needs_quotes(const char *s) { return s[strcspn(s, ",\"\r\n")] != 0; }

/* A NULL field is written as an empty one (a metric that was not measured). */
char *csv_format_row(const char *const *fields, int n) {
  size_t len = 1;
  for (int i = 0; i < n; i++) {
    const char *s = fields[i] ? fields[i] : "";
    len += strlen(s) + 3;   /* quotes and separator */
    for (const char *q = s; *q; q++) len += *q == '"';
  }
  char *out = malloc(len);
  if (!out) {
    err_set(ERR_OOM, __FILE__, __LINE__,
            "out of host memory allocating %zu bytes", len);
    return NULL;
  }
  char *w = out;
  for (int i = 0; i < n; i++) {
    const char *s = fields[i] ? fields[i] : "";
    if (i) *w++ = ',';
    /* A row of one empty field would be a blank line, which readers skip. */
    if (needs_quotes(s) || (n == 1 && !*s)) {
      *w++ = '"';
      for (; *s; s++) {
        if (*s == '"') *w++ = '"';
        *w++ = *s;
      }
      *w++ = '"';
    } else {
      size_t l = strlen(s);
      memcpy(w, s, l);
      w += l;
    }
  }
  *w++ = '\n';
  *w = '\0';
  return out;
}

/* The file behind fd, for messages (Linux); "fd N" elsewhere. */
static const char *fd_name(int fd, char *name, size_t n) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t l = readlink(link, name, n - 1);
  if (l <= 0) snprintf(name, n, "fd %d", fd);
  else name[l] = '\0';
  return name;
}

int csv_append_row(int fd, const char *const *fields, int n) {
  char name[PATH_MAX];
  char *line = csv_format_row(fields, n);
  if (!line) return err_trace(__FILE__, __LINE__);
  size_t len = strlen(line);
  /* Remember where the row starts so a partial write (disk full) can be cut
   * off again: otherwise the next row would be glued onto the fragment. */
  off_t start = lseek(fd, 0, SEEK_END);
  if (start < 0) {
    free(line);
    CHECK_SYS(0, "cannot seek to the end of %s", fd_name(fd, name, sizeof name));
  }
  ssize_t put;
  do put = write(fd, line, len);
  while (put < 0 && errno == EINTR);
  int e = errno;
  free(line);
  if (put < 0) {
    errno = e;
    CHECK_SYS(0, "cannot append a row to %s", fd_name(fd, name, sizeof name));
  }
  if ((size_t)put != len) {
    int cut = ftruncate(fd, start);
    FAIL(ERR_FAIL, "%s: short write appending a row (%zd of %zu bytes; disk "
         "full?)%s", fd_name(fd, name, sizeof name), put, len,
         cut == 0 ? "; the partial row was removed"
                  : "; the partial row could not be removed and will be read "
                    "as a torn line");
  }
  CHECK_SYS(fsync(fd) == 0, "cannot fsync %s", fd_name(fd, name, sizeof name));
  return 0;
}

static int write_full(int fd, const char *p, size_t len, const char *path) {
  while (len) {
    ssize_t put = write(fd, p, len);
    if (put < 0 && errno == EINTR) continue;
    CHECK_SYS(put >= 0, "cannot write %s", path);
    if (put == 0) FAIL(ERR_FAIL, "cannot write %s: no progress (disk full?)", path);
    p += put;
    len -= (size_t)put;
  }
  return 0;
}

static int write_table(int fd, const csv_table *t, const char *tmp) {
  char *line = csv_format_row((const char *const *)t->header, t->ncols);
  if (!line) return err_trace(__FILE__, __LINE__);
  int rc = write_full(fd, line, strlen(line), tmp);
  free(line);
  TRY(rc);
  for (size_t i = 0; i < t->nrows; i++) {
    line = csv_format_row((const char *const *)t->rows[i], t->ncols);
    if (!line) return err_trace(__FILE__, __LINE__);
    rc = write_full(fd, line, strlen(line), tmp);
    free(line);
    TRY(rc);
  }
  return 0;
}

/* Makes the rename itself durable: it lives in the folder's entries. */
static int sync_dir(const char *path) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (!slash) {
    strcpy(dir, ".");
  } else if (slash == path) {
    strcpy(dir, "/");
  } else {
    size_t l = (size_t)(slash - path);
    if (l >= sizeof dir) FAIL(ERR_FAIL, "%s: path too long", path);
    memcpy(dir, path, l);
    dir[l] = '\0';
  }
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  CHECK_SYS(fd >= 0, "cannot open folder %s to sync the new %s", dir, path);
  int rc = fsync(fd);
  int e = errno;
  CHECK_SYS(close(fd) == 0, "cannot close folder %s", dir);
  errno = e;
  CHECK_SYS(rc == 0, "cannot fsync folder %s after writing %s", dir, path);
  return 0;
}

int csv_write_file(const char *path, const csv_table *t) {
  ASSERT(t->header != NULL && t->ncols > 0);
  char tmp[PATH_MAX];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp)
    FAIL(ERR_FAIL, "%s: path too long", path);
  /* Same folder as the target, so rename() replaces it in one step and a
   * reader sees the old file or the new one, never a half-written one. */
  int fd = mkstemp(tmp);
  CHECK_SYS(fd >= 0, "cannot create a temporary file next to %s", path);
  /* mkstemp makes the file 0600; give it the mode a plain create would. */
  mode_t mask = umask(0);
  umask(mask);
  int rc = 0;
  if (fchmod(fd, 0666 & ~mask) != 0)
    rc = err_set(ERR_FAIL, __FILE__, __LINE__, "cannot chmod %s: %s", tmp,
                 strerror(errno));
  if (rc == 0) rc = write_table(fd, t, tmp);
  if (rc == 0 && fsync(fd) != 0)
    rc = err_set(ERR_FAIL, __FILE__, __LINE__, "cannot fsync %s: %s", tmp,
                 strerror(errno));
  if (close(fd) != 0 && rc == 0)
    rc = err_set(ERR_FAIL, __FILE__, __LINE__, "cannot close %s: %s", tmp,
                 strerror(errno));
  if (rc == 0 && rename(tmp, path) != 0)
    rc = err_set(ERR_FAIL, __FILE__, __LINE__, "cannot rename %s to %s: %s",
                 tmp, path, strerror(errno));
  if (rc < 0) {
    /* Best effort: the error being reported matters more than this one. */
    unlink(tmp);
    return err_trace(__FILE__, __LINE__);
  }
  TRY(sync_dir(path));
  return 0;
}
