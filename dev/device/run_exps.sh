#!/bin/bash
# There, after refresh.sh: run each experiment named in EXPS into
# .devres/data within BUDGET seconds, then return .devres as $OUT/res.tgz.
# At the deadline the runner gets SIGINT: it keeps every row written, and
# a later call (with the rows that came back untarred here and carried
# again) resumes the sweep without repeating them.
#   . .devdeps/env.sh && sh dev/device/refresh.sh > /tmp/rf.log 2>&1; tail -2 /tmp/rf.log;
#   EXPS="cuda_graphs toy_dtypes" BUDGET=480 bash dev/device/run_exps.sh
# with carry [".devdeps", ".devgit", ".devres"]; here: tar xzf FILES_AT/res.tgz.
# RESUME=1: an experiment with no CSV in .devres/data yet starts from the
# committed one (reports/data/NAME.*), so only its missing jobs run (the
# runner refuses, exit 2, if those rows are another GPU's).
# RUNNER_ARGS: more runner options for every experiment, e.g.
# "--force --only precision=bf16" with RESUME=1 re-measures those rows in
# the committed CSV (the NAME.json it writes then describes that run).
# BUDGET counts from the start of this script, after the build: keep it
# under the call's limit less the build (about 45 s on a fresh machine)
# and a margin, or the call is cut off (the tarball written after each
# experiment still comes back).
set -u
: "${EXPS:?EXPS: the experiments to run, by name}"
git checkout -q -- . 2> /dev/null   # rows from a copy equal to its commit
echo "dirty before running: $(git status --porcelain --untracked-files=no | wc -l) files"
mkdir -p .devres/data .devres/logs
end=$((SECONDS + ${BUDGET:-480}))
for e in $EXPS; do
  left=$((end - SECONDS))
  if [ $left -lt 20 ]; then echo "$e: no time left"; continue; fi
  t0=$SECONDS
  if [ "${RESUME:-0}" = 1 ] && [ ! -f ".devres/data/$e.csv" ] && [ -f "reports/data/$e.csv" ]; then
    for x in csv json samples.jsonl; do
      [ ! -f "reports/data/$e.$x" ] || cp "reports/data/$e.$x" .devres/data/
    done
  fi
  # shellcheck disable=SC2086 # RUNNER_ARGS: words, split on purpose
  timeout -s INT -k 15 $left ./runner --out-dir .devres/data ${RUNNER_ARGS:-} "experiments/$e.cfg" \
    > ".devres/logs/$e.log" 2>&1
  rc=$?
  rows=$(($(wc -l < ".devres/data/$e.csv" 2> /dev/null || echo 1) - 1))
  echo "$e: rc $rc, $((SECONDS - t0)) s, $rows rows"
  tail -n 2 ".devres/logs/$e.log"
  tar czf "$OUT/res.tgz" .devres
done
