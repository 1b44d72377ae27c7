#include "config.h"
#include "harness/launch.h"

#include "common/check.h"
#include "common/clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Seconds between SIGTERM and SIGKILL: mpirun needs a moment to take its
 * ranks down cleanly. */
#define GRACE_S 5.0

char **launch_command(const char *launcher, int np, const char *worker,
                      char *const *args, int nargs) {
  char *copy = strdup(launcher ? launcher : "");
  size_t cap = strlen(launcher ? launcher : "") / 2 + (size_t)nargs + 4;
  char **argv = calloc(cap, sizeof *argv);
  if (!copy || !argv) { free(copy); free(argv); return NULL; }
  int n = 0;
  for (char *save = NULL, *tok = strtok_r(copy, " \t", &save); tok;
       tok = strtok_r(NULL, " \t", &save)) {
    char *np_at = strstr(tok, "{np}");
    if (np_at) {
      char buf[256];
      snprintf(buf, sizeof buf, "%.*s%d%s", (int)(np_at - tok), tok, np,
               np_at + 4);
      argv[n++] = strdup(buf);
    } else {
      argv[n++] = strdup(tok);
    }
  }
  free(copy);
  argv[n++] = strdup(worker);
  for (int i = 0; i < nargs; i++) argv[n++] = strdup(args[i]);
  argv[n] = NULL;
  /* launch_command_free stops at the first NULL: free all n here. */
  for (int i = 0; i < n; i++)
    if (!argv[i]) {
      for (int j = 0; j < n; j++) free(argv[j]);
      free(argv);
      return NULL;
    }
  return argv;
}

void launch_command_free(char **argv) {
  if (!argv) return;
  for (int i = 0; argv[i]; i++) free(argv[i]);
  free(argv);
}

void launch_command_text(char *const *argv, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; argv[i] && len + 4 < n; i++) {
    const char *a = argv[i];
    int plain = a[0] != '\0';
    for (const char *p = a; *p; p++)
      if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789-_./=:,+@%", *p))
        plain = 0;
    int w = plain ? snprintf(buf + len, n - len, "%s%s", i ? " " : "", a)
                  : snprintf(buf + len, n - len, "%s'%s'", i ? " " : "", a);
    if (w < 0) break;
    len += (size_t)w;
    if (len >= n) { buf[n - 1] = '\0'; break; }
  }
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Signal every process whose environment carries TRAINLAB_JOB_TAG=<value>
 * with value starting with prefix; returns how many. Tags end in '/' so
 * that one job's tag is never the prefix of another's. */
int launch_kill_tagged(const char *prefix, int sig) {
  char want[256];
  int wlen = snprintf(want, sizeof want, "TRAINLAB_JOB_TAG=%s", prefix);
  DIR *d = opendir("/proc");
  if (!d) return 0;
  struct dirent *de;
  pid_t self = getpid();
  int n = 0;
  while ((de = readdir(d))) {
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    static char env[1 << 16];
    ssize_t got = read(fd, env, sizeof env - 1);
    close(fd);
    if (got <= 0) continue;
    env[got] = '\0';
    for (ssize_t i = 0; i < got; i += (ssize_t)strlen(env + i) + 1)
      if (strncmp(env + i, want, (size_t)wlen) == 0) {
        n += kill((pid_t)pid, sig) == 0;
        break;
      }
  }
  closedir(d);
  return n;
}

int launch_run(char *const *argv, int log_fd, double timeout_s,
               const char *tag, volatile sig_atomic_t *stop,
               launch_outcome *out) {
  memset(out, 0, sizeof *out);
  double t0 = clock_now_s();
  pid_t parent = getpid();
  pid_t pid = fork();
  CHECK_SYS(pid >= 0, "fork");
  if (pid == 0) {
    setpgid(0, 0);
    /* The launcher dies with the runner, however the runner dies (kill -9
     * included): SIGTERM lets mpirun take its ranks down. The check after
     * closes the race with a runner that died before prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(126);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    setenv("TRAINLAB_JOB_TAG", tag, 1);
    execvp(argv[0], argv);
    dprintf(STDERR_FILENO, "runner: cannot run %s: %s\n", argv[0],
            strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid); /* both sides, so killpg works whoever runs first */

  int status = 0, killing = 0;
  double kill_at = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      launch_kill_tagged(tag, SIGKILL);
      FAIL(ERR_FAIL, "waitpid: %s", strerror(errno));
    }
    double now = clock_now_s();
    if (!killing && (now - t0 > timeout_s || (stop && *stop))) {
      if (stop && *stop) out->interrupted = 1; else out->timed_out = 1;
      killpg(pid, SIGTERM);
      killing = 1;
      kill_at = now + GRACE_S;
    } else if (killing == 1 && now > kill_at) {
      killpg(pid, SIGKILL);
      launch_kill_tagged(tag, SIGKILL);
      killing = 2;
    }
    sleep_ms(now - t0 < 1.0 ? 5 : 25);
  }
  out->seconds = clock_now_s() - t0;
  /* The launcher is gone; its ranks must be too. */
  killpg(pid, SIGKILL);
  launch_kill_tagged(tag, SIGKILL);
  if (WIFEXITED(status)) out->exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) out->signo = WTERMSIG(status);
  return 0;
}
