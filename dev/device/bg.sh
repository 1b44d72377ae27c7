#!/bin/bash
# There: run SCRIPT once per machine in a session of its own, so that it
# outlives this call (a call ends at its time limit, and the machine goes
# back 30 s after a call returns unless another call comes), then wait up
# to WAIT seconds (default 480) for it and send /tmp/res back as
# $OUT/r.tgz ($OUT returns at most 8 files). SCRIPT writes its results
# under /tmp/res; /tmp/res/done appears when it ends. Call again with
# the same SCRIPT to wait for more: it is not started twice. Another
# SCRIPT on the same warm machine starts afresh once the last one is done.
#   WAIT=480 bash .devgit/bg.sh .devgit/batch.sh      (timeout_s >= WAIT + build + 60)
script=${1:?usage: bg.sh SCRIPT}
D=/tmp/res
# another script's finished results (a warm machine's last batch): gone,
# so that this one starts rather than polls; while it runs, refuse
# (FRESH=1: the same SCRIPT again, once done, e.g. with other settings)
if [ -f "$D/started" ] && { [ "$(cat "$D/started")" != "$script" ] || [ "${FRESH:-0}" = 1 ]; }; then
  [ -f "$D/done" ] || { echo "== $(cat "$D/started") is still running; poll it first"; exit 1; }
  rm -rf "$D"
fi
mkdir -p "$D"
if [ ! -f "$D/started" ]; then
  printf '%s' "$script" > "$D/started"
  # done: when SCRIPT ends, whether or not it touched it
  # shellcheck disable=SC2016 # $1, $2: the inner shell's arguments
  setsid nohup bash -c 'bash "$1"; touch "$2/done"' bg "$script" "$D" > "$D/log" 2>&1 < /dev/null &
  echo "== started $script on $(hostname) (a poll that says this again is on a fresh machine: what the last one had is gone)"
else
  echo "== polling $script on $(hostname), started $(date -u -r "$D/started" +%T)"
fi
end=$((SECONDS + ${WAIT:-480}))
while [ $SECONDS -lt $end ] && [ ! -f "$D/done" ]; do sleep 5; done
tar czf "$OUT/r.tgz" -C "$D" .
[ -f "$D/done" ] && echo "== done" || echo "== still running"
tail -c 6000 "$D/log"
