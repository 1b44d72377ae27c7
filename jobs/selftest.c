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

typedef struct selftest_settings {
  run_settings run;
  const char *action;
  double sleep_s;
  double value;
} selftest_settings;

static const param_def params[] = {
    COMMON_PARAMS(selftest_settings),
    {"selftest", "action", STRING_FIELD(selftest_settings, action), 0, 0,
     actions, NULL, NULL, "what the job does after sleeping"},
    {"selftest", "sleep_s", FLOAT_FIELD(selftest_settings, sleep_s), 0, 3600,
     NULL, "s", "0", "seconds each rank sleeps first"},
    {"selftest", "value", FLOAT_FIELD(selftest_settings, value), -1e300,
     1e300, NULL, NULL, "0", "a number echoed into the `echoed` metric"},
};

static const char *const metrics[] = {"echoed", "ranks", NULL};

/* ---- the run side: left out of the runner's build (harness/kind.h) ------- */
#ifndef KIND_DECLARATION_ONLY

static void sleep_for(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int run(const void *settings, result *r) {
  const selftest_settings *s = settings;
  sleep_for(s->sleep_s);
  if (strcmp(s->action, "fail") == 0)
    FAIL(ERR_FAIL, "selftest: failing as asked");
  if (strcmp(s->action, "oom") == 0)
    FAIL(ERR_OOM, "selftest: out of memory, as asked");
  if (strcmp(s->action, "crash") == 0) raise(SIGSEGV);
  if (strcmp(s->action, "hang") == 0)
    for (;;) pause();
  result_set(r, "echoed", s->value);
  result_set(r, "ranks", (double)s->run.world_size);
  return 0;
}

#endif /* KIND_DECLARATION_ONLY */

const kind_def kind_selftest = {
    .name = "selftest",
    .summary = "the runner's own test job: sleep, then ok/fail/crash/hang/oom",
    .gpu_backend = NULL,
    KIND_TABLES(selftest_settings, NULL),
};
