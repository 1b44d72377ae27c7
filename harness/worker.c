/* The worker: what each rank of a job runs, under the launcher.
 *
 *   worker --kind KIND --result PATH name=value ...
 *   worker --env
 *
 * The runner passes every parameter of the kind (the resolved job; its dry
 * run prints the same command, so a job can be rerun by hand); one left
 * out takes its default. run() gets the kind's settings struct.
 * Rank 0 writes PATH after all ranks have finished and agreed; a failing
 * rank writes PATH.rank<R> with its status and message, prints the whole
 * trace on stderr and aborts the job, so ranks blocked in a collective do
 * not hang until the timeout. Exit: 0 ok, 2 bad arguments, 3 job failed.
 *
 * --env prints this process's provenance (env.h) as the result file's
 * env.<column>=<value> lines on stdout and exits (0, or 3 if stdout cannot
 * be written): the runner, which does not load CUDA, NCCL or MPI, asks the
 * worker for the GPUs and the libraries' versions this way. It runs
 * without the launcher and never initialises MPI. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#ifdef HAVE_MPI
#include <mpi.h>
#endif

#include "common/check.h"
#include "common/env.h"
#include "harness/kind.h"
#include "harness/resultfile.h"

static int world_rank = 0, world_size = 1;

static void finish(int code) {
#ifdef HAVE_MPI
  if (code == 0)
    MPI_Finalize();
  else
    MPI_Abort(MPI_COMM_WORLD, code);
#endif
  exit(code);
}

static void usage_error(const char *fmt, const char *arg) {
  if (world_rank == 0) {
    fprintf(stderr, "worker: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr,
            "\nusage: worker --kind KIND --result PATH name=value ...\n"
            "       worker --env\n");
  }
  finish(2);
}

/* Fill j from name=value arguments: each parameter at most once, and one
 * left out takes its default (the runner passes every value; a command
 * typed by hand may leave defaults out). */
static void parse_job(const kind_def *k, int argc, char **argv, job *j) {
  char *seen = calloc((size_t)k->nparams, 1);
  if (!seen) usage_error("%s", "out of memory");
  for (int a = 0; a < argc; a++) {
    char *eq = strchr(argv[a], '=');
    if (!eq) usage_error("expected name=value, got \"%s\"", argv[a]);
    *eq = '\0';
    int i = kind_param_index(k, argv[a]);
    if (i < 0) usage_error("unknown parameter \"%s\"", argv[a]);
    if (seen[i]) usage_error("parameter %s given twice", argv[a]);
    char err[512];
    if (pvalue_parse(&k->params[i], eq + 1, &j->v[i], err, sizeof err) != 0)
      usage_error("%s", err);
    seen[i] = 1;
  }
  for (int i = 0; i < k->nparams; i++)
    if (!seen[i] && param_default(&k->params[i], &j->v[i]) != 0)
      usage_error("parameter %s not given (it has no default)",
                  k->params[i].name);
  free(seen);
}

static const char *status_of(int rc) {
  return rc == ERR_OOM ? "oom" : rc < 0 ? "error" : "ok";
}

/* Freed memory stays with the process, to be handed out again: no block
 * of its own mapping (glibc maps blocks above 32 MiB and unmaps them when
 * freed), no heap top given back. MPI's collectives allocate their scratch
 * on every call; mapped afresh, each call page-faults it in again: on the
 * CPU cores of an H200 host (Open MPI 4.1.6, 2 ranks) a 1 GiB all-reduce
 * took 1067 ms, 505 ms with its scratch reused. A job measures the
 * collective in steady state, as a caching allocator would keep it (and
 * its own buffers are allocated once). A malloc that does not take these
 * settings (a sanitizer's) leaves its defaults: jobs run the same. */
static void keep_freed_memory(void) {
#ifdef __GLIBC__
  (void)mallopt(M_MMAP_MAX, 0);
  (void)mallopt(M_TRIM_THRESHOLD, -1);
#endif
}

/* `worker --env`, before and without MPI_Init. */
static int print_env(void) {
  env_info env;
  env_probe_in_process(&env);
  resultfile_put_env(stdout, &env);
  if (ferror(stdout) || fflush(stdout) != 0) {
    perror("worker: writing the environment to stdout");
    return 3;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--env") == 0) {
    if (argc == 2) return print_env();
    /* usage_error() would finish through MPI, which is not initialised. */
    fprintf(stderr, "worker: --env takes no other argument\n"
            "usage: worker --env\n");
    return 2;
  }
  keep_freed_memory();
#ifdef HAVE_MPI
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    fprintf(stderr, "worker: MPI_Init failed\n");
    return 3;
  }
  /* MPI_COMM_WORLD's handler is MPI_ERRORS_ARE_FATAL: a failing call
   * aborts the job rather than return, so these checks are a floor. */
  if (MPI_Comm_rank(MPI_COMM_WORLD, &world_rank) != MPI_SUCCESS ||
      MPI_Comm_size(MPI_COMM_WORLD, &world_size) != MPI_SUCCESS) {
    fprintf(stderr, "worker: MPI_Comm_rank / MPI_Comm_size failed\n");
    finish(3);
  }
#endif
  const char *kind_name = NULL, *result_path = NULL;
  int a = 1;
  for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
    if (strcmp(argv[a], "--kind") == 0)
      kind_name = argv[a + 1];
    else if (strcmp(argv[a], "--result") == 0)
      result_path = argv[a + 1];
    else
      usage_error("unknown option %s", argv[a]);
  }
  if (!kind_name || !result_path) usage_error("%s", "missing --kind or --result");
  const kind_def *k = kind_find(kind_name);
  if (!k) usage_error("unknown kind \"%s\"", kind_name);

  pvalue *v = calloc((size_t)k->nparams, sizeof *v);
  if (!v) usage_error("%s", "out of memory");
  job j = {.kind = k, .index = 0, .v = v};
  parse_job(k, argc - a, argv + a, &j);
  if (job_world_size(&j) != world_size) {
    char msg[128];
    snprintf(msg, sizeof msg, "world_size=%d but the launcher started %d",
             job_world_size(&j), world_size);
    usage_error("%s", msg);
  }
  void *settings = calloc(1, k->settings_size);
  if (!settings) usage_error("%s", "out of memory");
  job_settings(&j, settings);

  /* Only the runner's build of the kinds (KIND_DECLARATION_ONLY) leaves
   * run NULL; the worker links the full one. */
  ASSERT(k->run != NULL);
  result r;
  result_init(&r, k);
  err_clear();
  int rc = k->run(settings, &r);
  if (rc < 0) {
    char path[4096], line[1024];
    snprintf(path, sizeof path, "%s.rank%d", result_path, world_rank);
    err_first_line(line, sizeof line);
    fprintf(stderr, "worker rank %d: %s: %s\n", world_rank, status_of(rc),
            err_msg());
    if (resultfile_write(path, status_of(rc), line, NULL, NULL) < 0)
      fprintf(stderr, "worker rank %d: %s\n", world_rank, err_msg());
    finish(3);
  }
#ifdef HAVE_MPI
  /* Agreement: rank 0 reports success only once every rank got here. */
  if (MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS) {
    fprintf(stderr, "worker rank %d: MPI_Barrier after the job failed\n",
            world_rank);
    finish(3);
  }
#endif
  if (world_rank == 0) {
    env_info env;
    env_probe_in_process(&env);
    if (resultfile_write(result_path, "ok", r.message, &r, &env) < 0) {
      fprintf(stderr, "worker: %s\n", err_msg());
      finish(3);
    }
  }
  free(settings);
  free(v);
  finish(0);
  return 0;
}
