/* One runner per experiment output at a time.
 *
 * A runner that will write OUT/NAME.csv first takes an exclusive flock on
 * OUT/NAME.lock (created beside it and never removed: removing it would
 * let two runners lock two different files of one name). The kernel
 * releases the lock when the holder dies, however it dies, so a crashed
 * runner never blocks the next one. The holder writes its pid, host and
 * start time into the file, so a refused runner can say who holds it.
 *
 * While the lock is held nothing else appends to the CSV, so the holder may
 * rewrite it, and whatever an earlier run of this output left behind
 * (result files, job processes carrying its tag) is stale by definition. */
#ifndef TL_OUTLOCK_H
#define TL_OUTLOCK_H

#include <signal.h>
#include <stddef.h>

typedef struct outlock {
  int fd;               /* -1 when not held */
  char id[64];          /* "<dev>.<ino>" of the lock file: names this output
                           in job tags, across runs */
} outlock;

/* Take the lock of path: 0 once held. Busy: with wait, block until it is
 * free (or *stop is set by a signal: ERR_FAIL "interrupted"), printing once
 * who holds it; without, return 1 at once with the holder ("pid 12 on host
 * h since <utc>") in who. */
int outlock_take(outlock *l, const char *path, int wait,
                 volatile sig_atomic_t *stop, char *who, size_t who_len);
void outlock_release(outlock *l);

#endif
