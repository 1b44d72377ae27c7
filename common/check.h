/* Error handling shared by every layer.
 *
 * A failing call records one message, "file:line: what failed: the library's
 * own words", in a per-thread buffer and returns a negative code up the stack;
 * each level that passes it on with TRY() appends "  at file:line", so the
 * failure reads like a stack trace and every rank can shut down cleanly.
 * Functions that can fail return int: 0 on success, ERR_FAIL or ERR_OOM.
 * Out of memory has its own code because a job that runs out of memory is a
 * result (status "oom"), not a crash. */
#ifndef TL_CHECK_H
#define TL_CHECK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { ERR_OK = 0, ERR_FAIL = -1, ERR_OOM = -2 };

/* Record a new error (replacing any earlier one) and return code. */
int err_set(int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Append "  at file:line" to the current error; returns the current code. */
int err_trace(const char *file, int line);
const char *err_msg(void);      /* whole message, possibly several lines */
void err_first_line(char *buf, size_t n); /* the first line, for CSV cells */
void err_clear(void);

/* Fail here with a message. */
#define FAIL(code, ...) return err_set((code), __FILE__, __LINE__, __VA_ARGS__)
/* Pass a failure of `call` (an int-returning function of ours) upwards. */
#define TRY(call)                                                            \
  do {                                                                       \
    int try_rc_ = (call);                                                    \
    if (try_rc_ < 0) { err_trace(__FILE__, __LINE__); return try_rc_; }      \
  } while (0)
/* A system call or C library call that returns -1 / NULL and sets errno. */
#define CHECK_SYS(cond, ...)                                                 \
  do {                                                                       \
    if (!(cond)) return err_set(ERR_FAIL, __FILE__, __LINE__, "%s: %s",     \
                                 check_fmt_(__VA_ARGS__), check_errno_()); \
  } while (0)
/* malloc/calloc result: NULL means out of host memory. */
#define CHECK_ALLOC(ptr, bytes)                                              \
  do {                                                                       \
    if ((ptr) == NULL)                                                       \
      return err_set(ERR_OOM, __FILE__, __LINE__,                           \
                     "out of host memory allocating %zu bytes",              \
                     (size_t)(bytes));                                       \
  } while (0)

const char *check_fmt_(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
const char *check_errno_(void);

/* Programming errors (a bad argument from our own code) abort loudly. */
#define ASSERT(cond)                                                         \
  do {                                                                       \
    if (!(cond)) check_abort_(__FILE__, __LINE__, #cond);                    \
  } while (0)
void check_abort_(const char *file, int line, const char *what)
    __attribute__((noreturn));

#ifdef __cplusplus
}
#endif

#endif
