/* Provenance without CUDA, NCCL or MPI (env.h): the host's part, the
 * columns, and asking the worker for the rest. The runner links this file
 * and must not load those libraries; common/env_libs.c, linked by the
 * worker only, asks them. */
#include "config.h"
#include "common/env.h"
#include "harness/resultfile.h"

#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

const char *const env_columns[ENV_NCOLS] = {
    "host",         "machine",        "gpu_name",
    "gpu_count",    "cpu_model",      "cpu_cores",
    "driver_version", "cuda_runtime_version", "nccl_version",
    "mpi_library",
};

static void copy(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src);
  dst[strcspn(dst, "\r\n")] = '\0';
}

static void probe_cpu(env_info *e) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  e->cpu_cores = n > 0 ? (int)n : 0;
  copy(e->cpu_model, sizeof e->cpu_model, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *colon = strchr(line, ':');
    if (colon) {
      colon++;
      while (*colon == ' ' || *colon == '\t') colon++;
      copy(e->cpu_model, sizeof e->cpu_model, colon);
    }
    break;
  }
  fclose(f);
}

/* The kernel driver's version: "NVRM version: ... Kernel Module  580.159.04". */
static void probe_driver(env_info *e) {
  copy(e->driver_version, sizeof e->driver_version, "none");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (!f) return;
  char line[512];
  if (fgets(line, sizeof line, f)) {
    /* The first token shaped like 580.159.04: the line's wording varies
     * ("Kernel Module", "Open Kernel Module for x86_64"). */
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t\n", &save); tok;
         tok = strtok_r(NULL, " \t\n", &save)) {
      unsigned a, b;
      if (sscanf(tok, "%u.%u", &a, &b) == 2) {
        copy(e->driver_version, sizeof e->driver_version, tok);
        break;
      }
    }
  }
  fclose(f);
}

void env_probe_host(env_info *e) {
  memset(e, 0, sizeof *e);
  if (gethostname(e->host, sizeof e->host) != 0)
    copy(e->host, sizeof e->host, "unknown");
  e->host[sizeof e->host - 1] = '\0';
  probe_cpu(e);
  probe_driver(e);
  e->gpu_count = 0;
  copy(e->gpu_name, sizeof e->gpu_name, "none");
  copy(e->cuda_runtime_version, sizeof e->cuda_runtime_version, "none");
  copy(e->nccl_version, sizeof e->nccl_version, "none");
  copy(e->mpi_library, sizeof e->mpi_library, "none");
  /* env_probe_in_process names the GPUs here when it finds some. */
  snprintf(e->machine, sizeof e->machine, "CPU: %d cores %s", e->cpu_cores,
           e->cpu_model);
}

/* Runs `worker --env` with its stdout on a pipe, reads all of it, waits for
 * the worker and fills e from its lines. 0, or -1 with the reason in why
 * (e then partly written). */
static int ask_worker(const char *worker, env_info *e, char *why, size_t n) {
  int fd[2];
  if (pipe(fd) != 0) {
    snprintf(why, n, "pipe: %s", strerror(errno));
    return -1;
  }
  /* The child: the read end closed first (it may be fd 1 when our stdout
   * was closed), the write end becomes its stdout. */
  posix_spawn_file_actions_t fa;
  int rc = posix_spawn_file_actions_init(&fa);
  /* close() below is not checked: Linux releases the descriptor whatever
   * it returns, and a pipe has no data of ours to lose. */
  if (rc != 0) {
    (void)close(fd[0]);
    (void)close(fd[1]);
    snprintf(why, n, "posix_spawn_file_actions_init: %s", strerror(rc));
    return -1;
  }
  rc = posix_spawn_file_actions_addclose(&fa, fd[0]);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  if (rc == 0 && fd[1] != STDOUT_FILENO)
    rc = posix_spawn_file_actions_addclose(&fa, fd[1]);
  pid_t pid = -1;
  char *argv[] = {(char *)worker, (char *)"--env", NULL};
  /* glibc's posix_spawn reports the exec's own failure (ENOENT, EACCES). */
  if (rc == 0) rc = posix_spawn(&pid, worker, &fa, NULL, argv, environ);
  (void)posix_spawn_file_actions_destroy(&fa);   /* fails only on bad fa */
  (void)close(fd[1]);   /* now only the worker holds the write end */
  if (rc != 0) {
    (void)close(fd[0]);
    snprintf(why, n, "cannot run it: %s", strerror(rc));
    return -1;
  }

  /* Read to the end before waiting: the worker must not block on a full
   * pipe. Without a stream its writes fail once the read end is closed. */
  resultfile rf;
  memset(&rf, 0, sizeof rf);
  int read_errno = 0;
  errno = 0;
  FILE *f = fdopen(fd[0], "r");
  if (f) {
    resultfile_read_stream(f, &rf);
    if (ferror(f)) read_errno = errno ? errno : EIO;
    (void)fclose(f);   /* a read stream: its errors were ferror's */
  } else {
    read_errno = errno;
    (void)close(fd[0]);
  }
  int status = 0;
  pid_t w;
  while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  rc = -1;
  if (w < 0)
    snprintf(why, n, "waitpid: %s", strerror(errno));
  else if (WIFSIGNALED(status))
    snprintf(why, n, "killed by signal %d", WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0)
    snprintf(why, n, "exit status %d", WEXITSTATUS(status));
  else if (read_errno != 0)
    snprintf(why, n, "reading its output: %s", strerror(read_errno));
  else
    rc = 0;
  for (int c = 0; c < ENV_NCOLS && rc == 0; c++) {
    char key[64];
    snprintf(key, sizeof key, "env.%s", env_columns[c]);
    const char *v = resultfile_get(&rf, key);
    if (!v) {
      snprintf(why, n, "no %s line in its output", key);
      rc = -1;
    } else if (env_set(e, c, v) != 0) {
      snprintf(why, n, "%s=%s is not a count", key, v);
      rc = -1;
    }
  }
  resultfile_free(&rf);
  return rc;
}

int env_probe_worker(const char *worker_path, env_info *e) {
  char why[512];
  memset(e, 0, sizeof *e);
  if (ask_worker(worker_path, e, why, sizeof why) == 0) return 0;
  env_probe_host(e);
  fprintf(stderr, "runner: warning: %s --env: %s; provenance from this host "
          "only: 0 GPUs, no CUDA, NCCL or MPI versions\n", worker_path, why);
  return -1;
}

const char *env_value(const env_info *e, int col, char *buf, int n) {
  switch (col) {
    case 0: return e->host;
    case 1: return e->machine;
    case 2: return e->gpu_name;
    case 3: snprintf(buf, (size_t)n, "%d", e->gpu_count); return buf;
    case 4: return e->cpu_model;
    case 5: snprintf(buf, (size_t)n, "%d", e->cpu_cores); return buf;
    case 6: return e->driver_version;
    case 7: return e->cuda_runtime_version;
    case 8: return e->nccl_version;
    case 9: return e->mpi_library;
  }
  return "";
}

static int count(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT_MAX)
    return -1;
  *out = (int)v;
  return 0;
}

int env_set(env_info *e, int col, const char *value) {
  switch (col) {
    case 0: copy(e->host, sizeof e->host, value); return 0;
    case 1: copy(e->machine, sizeof e->machine, value); return 0;
    case 2: copy(e->gpu_name, sizeof e->gpu_name, value); return 0;
    case 3: return count(value, &e->gpu_count);
    case 4: copy(e->cpu_model, sizeof e->cpu_model, value); return 0;
    case 5: return count(value, &e->cpu_cores);
    case 6: copy(e->driver_version, sizeof e->driver_version, value); return 0;
    case 7:
      copy(e->cuda_runtime_version, sizeof e->cuda_runtime_version, value);
      return 0;
    case 8: copy(e->nccl_version, sizeof e->nccl_version, value); return 0;
    case 9: copy(e->mpi_library, sizeof e->mpi_library, value); return 0;
  }
  return -1;
}
