#include "config.h"
#include "harness/outlock.h"

#include "common/check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* "pid 123 on host h since 2026-11-25T10:00:00Z", from the holder's note. */
static void holder(int fd, char *buf, size_t n) {
  char note[256];
  ssize_t got = pread(fd, note, sizeof note - 1, 0);
  if (got <= 0) {
    snprintf(buf, n, "a runner that has not yet said who it is");
    return;
  }
  note[got] = '\0';
  note[strcspn(note, "\n")] = '\0';
  snprintf(buf, n, "%s", note);
}

static int write_note(int fd) {
  char host[128] = "unknown", now[64], note[256];
  if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
  host[sizeof host - 1] = '\0';
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", &tm);
  int len = snprintf(note, sizeof note, "pid %d on host %s since %s\n",
                     (int)getpid(), host, now);
  CHECK_SYS(ftruncate(fd, 0) == 0, "cannot write the lock file");
  CHECK_SYS(pwrite(fd, note, (size_t)len, 0) == len, "cannot write the lock file");
  return 0;
}

int outlock_take(outlock *l, const char *path, int wait,
                 volatile sig_atomic_t *stop, char *who, size_t who_len) {
  l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  CHECK_SYS(l->fd >= 0, "cannot open the lock file %s", path);
  struct stat st;
  if (fstat(l->fd, &st) != 0) {
    outlock_release(l);
    CHECK_SYS(0, "cannot stat %s", path);
  }
  snprintf(l->id, sizeof l->id, "%llx.%llx", (unsigned long long)st.st_dev,
           (unsigned long long)st.st_ino);
  if (flock(l->fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    holder(l->fd, who, who_len);
    if (e != EWOULDBLOCK) {
      outlock_release(l);
      errno = e;
      CHECK_SYS(0, "cannot lock %s", path);
    }
    if (!wait) {
      outlock_release(l);
      return 1;
    }
    fprintf(stderr, "runner: waiting for the runner writing this output "
            "(%s; lock %s)\n", who, path);
    while (flock(l->fd, LOCK_EX) != 0) {
      if (errno == EINTR && !(stop && *stop)) continue;
      e = errno;
      outlock_release(l);
      if (e == EINTR) FAIL(ERR_FAIL, "interrupted while waiting for %s", path);
      errno = e;
      CHECK_SYS(0, "cannot lock %s", path);
    }
  }
  int rc = write_note(l->fd);
  if (rc < 0) {
    outlock_release(l);
    return err_trace(__FILE__, __LINE__);
  }
  return 0;
}

void outlock_release(outlock *l) {
  if (l->fd >= 0) close(l->fd);   /* closing drops the flock */
  l->fd = -1;
}
