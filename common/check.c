#include "config.h"
#include "common/check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One error per thread: the worker's threads (none yet) stay independent. */
static _Thread_local char err_buf[4096];
static _Thread_local int err_rc;

int err_set(int code, const char *file, int line, const char *fmt, ...) {
  int n = snprintf(err_buf, sizeof err_buf, "%s:%d: ", file, line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < sizeof err_buf)
    vsnprintf(err_buf + n, sizeof err_buf - (size_t)n, fmt, ap);
  va_end(ap);
  err_rc = code;
  return code;
}

int err_trace(const char *file, int line) {
  size_t len = strlen(err_buf);
  if (len < sizeof err_buf)
    snprintf(err_buf + len, sizeof err_buf - len, "\n  at %s:%d", file, line);
  return err_rc;
}

const char *err_msg(void) { return err_buf; }
void err_clear(void) { err_buf[0] = '\0'; err_rc = 0; }

void err_first_line(char *buf, size_t n) {
  size_t len = strcspn(err_buf, "\n");
  if (n == 0) return;
  if (len >= n) len = n - 1;
  memcpy(buf, err_buf, len);
  buf[len] = '\0';
}

const char *check_fmt_(const char *fmt, ...) {
  static _Thread_local char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

const char *check_errno_(void) { return strerror(errno); }

void check_abort_(const char *file, int line, const char *what) {
  fprintf(stderr, "%s:%d: internal error: assertion failed: %s\n", file, line,
          what);
  abort();
}
