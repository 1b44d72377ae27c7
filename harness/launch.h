/* Launching one job: the launcher command (mpirun, srun, ...) with the
 * worker's arguments, in its own process group, output to the job log, with
 * a wall-clock limit that kills everything the job started. */
#ifndef TL_LAUNCH_H
#define TL_LAUNCH_H

#include <signal.h>

typedef struct launch_outcome {
  int exit_code;      /* when the launcher exited normally */
  int signo;          /* when it was killed by a signal (0 otherwise) */
  int timed_out;      /* the limit passed and the job was killed */
  int interrupted;    /* the runner was asked to stop and killed the job */
  double seconds;     /* wall time */
} launch_outcome;

/* Build the command: the launcher template split on blanks with "{np}"
 * replaced by np (an empty template runs the worker directly), then the
 * worker and its arguments. Returns a NULL-terminated malloc'd array. */
char **launch_command(const char *launcher, int np, const char *worker,
                      char *const *args, int nargs);
void launch_command_free(char **argv);
/* The command as one shell-quoted line, for --dry-run and logs. */
void launch_command_text(char *const *argv, char *buf, size_t n);

/* Run argv; stdout and stderr go to log_fd. Every process of the job gets
 * TRAINLAB_JOB_TAG=tag in its environment (tag ends in '/'): on timeout or
 * interruption the process group gets SIGTERM, then SIGKILL after a grace
 * period, and any process still carrying the tag (a launcher may put ranks
 * in groups of their own) is killed too. The launcher gets SIGTERM when the
 * runner dies. Returns 0, or ERR_FAIL if fork/exec failed. */
int launch_run(char *const *argv, int log_fd, double timeout_s,
               const char *tag, volatile sig_atomic_t *stop,
               launch_outcome *out);

/* Send sig to every process whose TRAINLAB_JOB_TAG starts with prefix;
 * returns how many were signalled. */
int launch_kill_tagged(const char *prefix, int sig);

#endif
