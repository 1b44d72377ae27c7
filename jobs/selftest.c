/* Job kind `selftest`: the runner's own test subject. It does nothing but
 * what it is told (sleep, then succeed, fail, crash, hang, or report out of
 * memory as an allocator would), so the tests can drive every path a real
 * job can take: a row per outcome, timeouts killing the process group,
 * resume after the runner is killed. */
#include "config.h"
#include "common/check.h"
#include "harness/kind.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const actions[] = {"ok", "fail", "crash", "hang", "oom",
                                      NULL};

static const param_def params[] = {
    COMMON_PARAMS,
    {"selftest", "action", P_STRING, 0, 0, actions,
     "what the job does after sleeping"},
    {"selftest", "sleep_s", P_FLOAT, 0, 3600, NULL,
     "seconds each rank sleeps first"},
    {"selftest", "value", P_FLOAT, -1e300, 1e300, NULL,
     "a number echoed into the `echoed` metric"},
};

static const char *const metrics[] = {"echoed", "ranks", NULL};

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int run(const job *j, result *r) {
  const char *action = job_str(j, "action");
  sleep_s(job_float(j, "sleep_s"));
  if (strcmp(action, "fail") == 0)
    FAIL(ERR_FAIL, "selftest: failing as asked");
  if (strcmp(action, "oom") == 0)
    FAIL(ERR_OOM, "selftest: out of memory, as asked");
  if (strcmp(action, "crash") == 0) raise(SIGSEGV);
  if (strcmp(action, "hang") == 0)
    for (;;) pause();
  result_set(r, "echoed", job_float(j, "value"));
  result_set(r, "ranks", (double)job_int(j, "world_size"));
  return 0;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_selftest = {
    .name = "selftest",
    .summary = "the runner's own test job: sleep, then ok/fail/crash/hang/oom",
    .params = params,
    .nparams = (int)(sizeof params / sizeof params[0]),
    .metrics = metrics,
    .gpu_backend = NULL,
    .validate = NULL,
    .run = KIND_RUN(run),
};
