/* harness/csv.c: quoting round trips, header parsing, torn lines, appends,
 * atomic rewrites and the error messages for malformed files.
 * Exit 0 when every check passes, 1 when one fails, 99 when the test itself
 * cannot run (no temporary folder). */
#include "config.h"
#include "tests/testlib.h"
#include "harness/csv.h"
#include "harness/resultfile.h"

#include "common/check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];


/* The error's first line: the "at file:line" trace adds nothing here. */
static const char *msg(void) {
  static char buf[1024];
  err_first_line(buf, sizeof buf);
  return buf;
}

static void hard_error(const char *what) {
  fprintf(stderr, "test_csv: %s: %s\n", what, strerror(errno));
  exit(99);
}

static void path_of(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static void write_raw(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f) hard_error(path);
  if (fputs(text, f) == EOF || fclose(f) != 0) hard_error(path);
}

/* The whole table equals the expected header and rows. */
static int table_is(const csv_table *t, int ncols, const char *const *header,
                    size_t nrows, const char *const *cells) {
  if (t->ncols != ncols || t->nrows != nrows) return 0;
  for (int j = 0; j < ncols; j++)
    if (strcmp(t->header[j], header[j]) != 0) return 0;
  for (size_t i = 0; i < nrows; i++)
    for (int j = 0; j < ncols; j++)
      if (strcmp(t->rows[i][j], cells[i * (size_t)ncols + (size_t)j]) != 0)
        return 0;
  return 1;
}

static const char *const tricky_header[] = {"name", "note", "value"};
static const char *const tricky[] = {
    "plain",        "has,comma",             "1.5",
    "",             "quote \"inside\"",      "",
    "multi\nline",  "crlf\r\ninside",        "\"",
    " spaced ",     ",",                     "\"\"",
    "utf-8: \xc3\xa9", "trailing comma,",    "end",
};
enum { TRICKY_ROWS = 5 };

static void test_format(void) {
  const char *f[] = {"a", "b c", "x,y", "q\"r", "", NULL};
  char *line = csv_format_row(f, 6);
  int ok = line && strcmp(line, "a,b c,\"x,y\",\"q\"\"r\",,\n") == 0;
  check(ok, "csv_format_row quotes only fields with , \" CR LF%s%s",
        ok ? "" : "; got: ", ok ? "" : line ? line : "NULL");
  free(line);
  const char *one[] = {""};
  line = csv_format_row(one, 1);
  check(line && strcmp(line, "\"\"\n") == 0,
        "a row of one empty field is written as \"\" (not a blank line)");
  free(line);
}

static void test_roundtrip(void) {
  char path[512];
  path_of(path, sizeof path, "tricky.csv");
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd < 0) hard_error(path);
  int ok = csv_append_row(fd, tricky_header, 3) == 0;
  for (int i = 0; i < TRICKY_ROWS && ok; i++)
    ok = csv_append_row(fd, tricky + 3 * i, 3) == 0;
  if (close(fd) != 0) hard_error(path);
  check(ok, "append header and %d rows of awkward fields%s%s", TRICKY_ROWS,
        ok ? "" : ": ", ok ? "" : msg());

  csv_table t;
  int rc = csv_read(path, &t);
  check(rc == 0 && !t.torn &&
            table_is(&t, 3, tricky_header, TRICKY_ROWS, tricky),
        "commas, quotes, newlines, CRLF, empty fields read back unchanged");
  check(rc == 0 && csv_col(&t, "name") == 0 && csv_col(&t, "value") == 2 &&
            csv_col(&t, "Value") == -1 && csv_col(&t, "") == -1,
        "csv_col finds header names, -1 for others (case-sensitive)");
  if (rc == 0) csv_free(&t);
  check(t.header == NULL && t.rows == NULL && t.nrows == 0,
        "csv_free leaves an empty table");
}

static void test_header_and_padding(void) {
  char path[512];
  path_of(path, sizeof path, "short.csv");
  /* CRLF endings (RFC 4180's own), a blank line, a short row. */
  write_raw(path, "world_size,backend,busbw_gbps\r\n2,nccl,316.2\r\n\r\n4,mpi\r\n");
  csv_table t;
  int rc = csv_read(path, &t);
  static const char *const h[] = {"world_size", "backend", "busbw_gbps"};
  static const char *const c[] = {"2", "nccl", "316.2", "4", "mpi", ""};
  check(rc == 0 && table_is(&t, 3, h, 2, c) && !t.torn,
        "CRLF header parsed, blank line skipped, short row padded with \"\"");
  if (rc == 0) csv_free(&t);
}

static void test_torn(void) {
  char path[512];
  csv_table t;
  static const char *const h[] = {"a", "b"};
  static const char *const c[] = {"1", "2"};

  path_of(path, sizeof path, "torn1.csv");
  write_raw(path, "a,b\n1,2\n3,4");
  int rc = csv_read(path, &t);
  check(rc == 0 && t.torn && table_is(&t, 2, h, 1, c),
        "last line without newline is dropped and flagged torn");
  if (rc == 0) csv_free(&t);

  path_of(path, sizeof path, "torn2.csv");
  write_raw(path, "a,b\n1,2\n3,\"cut\nin the middle\n");
  rc = csv_read(path, &t);
  check(rc == 0 && t.torn && table_is(&t, 2, h, 1, c),
        "file ending inside an open quoted field is torn (even after a LF)");
  if (rc == 0) csv_free(&t);

  path_of(path, sizeof path, "torn3.csv");
  write_raw(path, "a,b\n1,2\n3,");
  rc = csv_read(path, &t);
  check(rc == 0 && t.torn && table_is(&t, 2, h, 1, c),
        "file ending in a comma is torn");
  if (rc == 0) csv_free(&t);

  path_of(path, sizeof path, "whole.csv");
  write_raw(path, "a,b\n1,2\n");
  rc = csv_read(path, &t);
  check(rc == 0 && !t.torn && table_is(&t, 2, h, 1, c),
        "a file ending in a newline is not torn");
  if (rc == 0) csv_free(&t);
}

static void test_append_many(void) {
  char path[512];
  path_of(path, sizeof path, "append.csv");
  static const char *const h[] = {"job", "status", "message"};
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (fd < 0) hard_error(path);
  int ok = csv_append_row(fd, h, 3) == 0;
  char cells[50][3][32];
  const char *expect[150];
  for (int i = 0; i < 50 && ok; i++) {
    snprintf(cells[i][0], 32, "%d", i);
    snprintf(cells[i][1], 32, "%s", i % 7 ? "ok" : "oom");
    snprintf(cells[i][2], 32, i % 7 ? "" : "needs %d MiB, \"free\" 0", i);
    const char *row[3] = {cells[i][0], cells[i][1], cells[i][2]};
    for (int j = 0; j < 3; j++) expect[3 * i + j] = cells[i][j];
    ok = csv_append_row(fd, row, 3) == 0;
  }
  if (close(fd) != 0) hard_error(path);
  csv_table t;
  int rc = csv_read(path, &t);
  check(ok && rc == 0 && !t.torn && table_is(&t, 3, h, 50, expect),
        "50 rows appended one by one read back in order");
  if (rc == 0) csv_free(&t);

  /* Appending to an fd opened without O_APPEND still goes to the end. */
  fd = open(path, O_WRONLY);
  if (fd < 0) hard_error(path);
  const char *extra[] = {"50", "ok", ""};
  ok = csv_append_row(fd, extra, 3) == 0;
  if (close(fd) != 0) hard_error(path);
  rc = csv_read(path, &t);
  check(ok && rc == 0 && t.nrows == 51 && strcmp(t.rows[0][0], "0") == 0 &&
            strcmp(t.rows[50][0], "50") == 0,
        "append through a non-O_APPEND fd lands after the existing rows");
  if (rc == 0) csv_free(&t);

  /* A write cut short (here by a file size limit, as by a full disk) must
   * not leave a fragment that the next row would be glued onto. */
  struct rlimit old;
  struct stat st;
  if (getrlimit(RLIMIT_FSIZE, &old) != 0 || stat(path, &st) != 0)
    hard_error(path);
  struct rlimit small = old;
  small.rlim_cur = (rlim_t)st.st_size + 5;
  if (signal(SIGXFSZ, SIG_IGN) == SIG_ERR || setrlimit(RLIMIT_FSIZE, &small))
    hard_error("setrlimit");
  fd = open(path, O_WRONLY | O_APPEND);
  if (fd < 0) hard_error(path);
  const char *big[] = {"51", "error", "a message longer than five bytes"};
  rc = csv_append_row(fd, big, 3);
  if (setrlimit(RLIMIT_FSIZE, &old) != 0) hard_error("setrlimit");
  check(rc == ERR_FAIL && strstr(err_msg(), "short write") != NULL &&
            strstr(err_msg(), "append.csv") != NULL,
        "a short write is an error naming the file (%s)", msg());
  rc = csv_append_row(fd, extra, 3);
  if (close(fd) != 0) hard_error(path);
  csv_table t2;
  int rc2 = csv_read(path, &t2);
  check(rc == 0 && rc2 == 0 && !t2.torn && t2.nrows == 52 &&
            strcmp(t2.rows[51][0], "50") == 0,
        "the partial row was cut off: the next append reads back whole");
  if (rc2 == 0) csv_free(&t2);

  /* A read-only fd: the error names the file. */
  fd = open(path, O_RDONLY);
  if (fd < 0) hard_error(path);
  rc = csv_append_row(fd, extra, 3);
  check(rc == ERR_FAIL && strstr(err_msg(), "append.csv") != NULL,
        "append failure names the file (%s)", msg());
  close(fd);
}

/* csv_write_file's temporary files ("X.tmp.XXXXXX") in the test folder. */
static int temp_files(void) {
  DIR *d = opendir(dir);
  if (!d) hard_error(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strstr(e->d_name, ".tmp.") == NULL) continue;
    printf("  left behind: %s\n", e->d_name);
    n++;
  }
  closedir(d);
  return n;
}

static void test_write_file(void) {
  char path[512];
  path_of(path, sizeof path, "rewritten.csv");
  write_raw(path, "old,file\nto be,replaced\n");

  char *h[] = {"name", "note", "value"};
  char *r0[] = {"a", "x,y", "1"};
  char *r1[] = {"b", "line\nbreak", ""};
  char **rows[] = {r0, r1};
  csv_table t = {.ncols = 3, .header = h, .nrows = 2, .rows = rows};
  int rc = csv_write_file(path, &t);
  check(rc == 0, "csv_write_file over an existing file%s%s",
        rc ? ": " : "", rc ? msg() : "");

  csv_table back;
  rc = csv_read(path, &back);
  static const char *const eh[] = {"name", "note", "value"};
  static const char *const ec[] = {"a", "x,y", "1", "b", "line\nbreak", ""};
  check(rc == 0 && !back.torn && table_is(&back, 3, eh, 2, ec),
        "rewritten file reads back as the new table");
  if (rc == 0) csv_free(&back);
  check(temp_files() == 0, "no temporary file left next to it");

  struct stat st;
  if (stat(path, &st) != 0) hard_error(path);
  mode_t mask = umask(0);
  umask(mask);
  check((st.st_mode & 0777) == (0666 & ~mask),
        "rewritten file has the usual mode 0%o (got 0%o)",
        (unsigned)(0666 & ~mask), (unsigned)(st.st_mode & 0777));

  /* rename() onto a folder fails after the temporary file was written. */
  char taken[512];
  path_of(taken, sizeof taken, "a_folder.csv");
  if (mkdir(taken, 0755) != 0) hard_error(taken);
  rc = csv_write_file(taken, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "a_folder.csv") != NULL &&
            temp_files() == 0,
        "a failed rewrite names the file and leaves no temporary file (%s)",
        msg());
  if (rmdir(taken) != 0) hard_error(taken);

  char bad[600];
  snprintf(bad, sizeof bad, "%s/no/such/folder/x.csv", dir);
  rc = csv_write_file(bad, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "no/such/folder/x.csv") != NULL,
        "write into a missing folder fails naming the path");
}

static void test_errors(void) {
  char path[512];
  csv_table t;

  path_of(path, sizeof path, "wide.csv");
  write_raw(path, "a,b,c\n1,2,3\n\"multi\nline\",5,6\n7,8,9,10\n");
  int rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "wide.csv:5:") != NULL &&
            strstr(err_msg(), "4 fields") != NULL && t.header == NULL,
        "too many fields rejected naming file and line (%s)", msg());

  path_of(path, sizeof path, "wide_crlf.csv");
  write_raw(path, "a,b\r\n1,2\r\n3,4,5\r\n");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "wide_crlf.csv:3:") != NULL,
        "line numbers count CRLF line ends once (%s)", msg());

  path_of(path, sizeof path, "missing.csv");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "missing.csv") != NULL &&
            strstr(err_msg(), strerror(ENOENT)) != NULL,
        "missing file rejected naming it (%s)", msg());

  path_of(path, sizeof path, "quote.csv");
  write_raw(path, "a,b\n1,\"x\"y\n");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "quote.csv:2:") != NULL,
        "text after a closing quote rejected (%s)", msg());

  path_of(path, sizeof path, "stray.csv");
  write_raw(path, "a,b\n1,2\n3,x\"y\n");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "stray.csv:3:") != NULL,
        "quote inside an unquoted field rejected (%s)", msg());

  path_of(path, sizeof path, "dup.csv");
  write_raw(path, "a,b,a\n1,2,3\n");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "dup.csv:1:") != NULL &&
            strstr(err_msg(), "\"a\"") != NULL,
        "duplicate column name rejected (%s)", msg());

  path_of(path, sizeof path, "empty.csv");
  write_raw(path, "");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "empty.csv") != NULL,
        "empty file rejected (%s)", msg());

  path_of(path, sizeof path, "tornhead.csv");
  write_raw(path, "a,b");
  rc = csv_read(path, &t);
  check(rc == ERR_FAIL && strstr(err_msg(), "torn") != NULL,
        "a file holding only a torn header is rejected (%s)", msg());
}

/* Removes the test folder and what the tests wrote in it. */
static void cleanup(void) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char p[600];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    if (unlink(p) != 0) fprintf(stderr, "test_csv: cannot remove %s\n", p);
  }
  closedir(d);
  if (rmdir(dir) != 0) fprintf(stderr, "test_csv: cannot remove %s\n", dir);
}

/* A result file's lines are read whole, however long: a sample line of 2000
 * values (a DDP timeline) must come back with its last value intact. */
static void test_resultfile_long_line(void) {
  char path[4200];
  snprintf(path, sizeof path, "%s/long.result", dir);
  FILE *f = fopen(path, "w");
  if (!f) hard_error(path);
  fprintf(f, "status=ok\nsample.r0_grad_comm_ms=");
  for (int i = 0; i < 2000; i++) fprintf(f, "%s%d.125", i ? " " : "", i);
  fprintf(f, "\nmessage=after\n");
  fclose(f);
  resultfile rf;
  check(resultfile_read(path, &rf) == 0, "the result file reads");
  const char *v = resultfile_get(&rf, "sample.r0_grad_comm_ms");
  const char *last = v ? strrchr(v, ' ') : NULL;
  check(v && strlen(v) > 4096 && last && strcmp(last, " 1999.125") == 0,
        "a %zu-byte sample line is read whole (ends \"%s\")",
        v ? strlen(v) : 0, last ? last : "");
  const char *m = resultfile_get(&rf, "message");
  check(m && strcmp(m, "after") == 0 && rf.n == 3,
        "the line after it is its own key (%d keys)", rf.n);
  resultfile_free(&rf);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/test_csv.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) hard_error(dir);

  test_format();
  test_roundtrip();
  test_header_and_padding();
  test_torn();
  test_append_many();
  test_write_file();
  test_errors();
  test_resultfile_long_line();

  int rc = tl_finish();
  if (rc) printf("test files kept in %s\n", dir);
  else cleanup();
  return rc;
}
