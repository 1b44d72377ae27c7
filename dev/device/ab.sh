#!/bin/bash
# There, after refresh.sh: experiments from two commits on the same
# host, BASE against this checkout's HEAD, in the order base, head, base,
# head, so that a change is judged against its base without another
# machine's clocks in the difference (two lent H200s ran the same uncut
# flash kernels 1-3% apart). BASE is a commit id from HEAD's history (the
# bundle carries no branch names: here, `git rev-parse --short main`); it
# is built once per machine in a tree of its own. Run it alone: beside
# compute-sanitizer on the machine's other GPU its times swung up to 3x
# either way.
#   BASE=abc1234 EXP="flash_benchmarking flash_multihead" \
#     ARGS_flash_benchmarking="--only impl=flash --only precision=bf16" bash dev/device/ab.sh
# EXP: one name or several; each runs with ARGS_<name> if set, else ARGS
# (runner options: --only takes swept settings only, which differ).
# ALSO: more candidates (commit ids in HEAD's history), each built in a
# tree of its own and run in the same rotation, so that one machine
# judges several variants of a change against one base.
# Rows go to .devres/ab/SIDE{1,2}/EXP.csv (SIDE: base, head, each ALSO
# id), returned as $OUT/res.tgz. Printed: per candidate and job (the keys
# of the experiment's sweep), each time column's base and candidate value
# (the lower of each side's two runs) and candidate / base, marked
# "slower" past 1.02 and "faster" under 0.98. COLS (comma-separated)
# picks the columns; default every column whose name holds "_ms" (but not
# the standard deviations).
set -u
: "${BASE:?BASE: the commit to compare with (a commit id in the history of HEAD)}"
: "${EXP:?EXP: the experiments to run, by name}"
# tree_at DIR REV: DIR holds REV, built (kept while the machine is): a
# copy of this checkout, built by refresh.sh, moved to REV, so that make
# rebuilds only what REV changes (a flash kernel: one file, not the whole
# tree). The copy's runner records this checkout's commit unless told
# (TRAINLAB_GIT_COMMIT, below).
tree_at() {
  if [ ! -x "$1/runner" ] || [ "$(git -C "$1" rev-parse HEAD)" != "$(git rev-parse "$2")" ]; then
    rm -rf "$1"
    mkdir -p "$1"
    tar -c --exclude=./.devres --exclude=./.devgit . | tar -x -C "$1" &&
      git -C "$1" checkout -q -f --detach "$2" || exit 1
    (cd "$1" && make -j"$(nproc)") > /tmp/ab-build.log 2>&1 ||
      { tail -n 30 /tmp/ab-build.log; exit 1; }
  fi
}
top_of() {
  case $1 in
    base) echo /tmp/ab-base ;;
    head) echo "$PWD" ;;
    *) echo "/tmp/ab-$1" ;;
  esac
}
wt=/tmp/ab-base
tree_at "$wt" "$BASE"
sides="base head"
for r in ${ALSO:-}; do
  tree_at "/tmp/ab-$r" "$r"
  sides="$sides $r"
done
# PRETEST: a command run in each candidate's tree (HEAD's, each ALSO's)
# before any timing; a candidate that fails it is not timed
if [ -n "${PRETEST:-}" ]; then
  kept=base
  for side in ${sides#base }; do
    top=$(top_of "$side")
    (cd "$top" && eval "$PRETEST") > /tmp/ab-pretest.log 2>&1
    rc=$?
    echo "pretest at $(git -C "$top" rev-parse --short HEAD): rc $rc, $(tail -n 1 /tmp/ab-pretest.log)"
    if [ $rc = 0 ]; then kept="$kept $side"; else grep -m 5 FAIL /tmp/ab-pretest.log; fi
  done
  sides=$kept
  [ "$sides" != base ] || { echo "no candidate passed the pretest"; exit 1; }
fi
echo "base $(git -C "$wt" rev-parse --short HEAD), timed: ${sides#base }"
git checkout -q -- .   # rows from a copy equal to its commit
mkdir -p .devres/ab
for run in 1 2; do
  for side in $sides; do
    dir=$PWD/.devres/ab/$side$run
    rm -rf "$dir"
    mkdir -p "$dir"
    top=$(top_of "$side")
    for e in $EXP; do
      a=ARGS_$e
      a=${!a-${ARGS:-}}
      # shellcheck disable=SC2086 # the options: words, split on purpose
      (cd "$top" && TRAINLAB_GIT_COMMIT=$(git rev-parse HEAD) TRAINLAB_GIT_DIRTY=0 \
        ./runner --out-dir "$dir" $a "experiments/$e.cfg") >> "$dir/log" 2>&1
      echo "$side $run $e: rc $?, $(($(wc -l < "$dir/$e.csv" 2> /dev/null || echo 1) - 1)) rows"
    done
    tar czf "$OUT/res.tgz" .devres
  done
done
for e in $EXP; do
for side in $sides; do
[ "$side" = base ] && continue
python3 - "$e" "${COLS:-}" "$side" <<'PY'
import csv, json, sys
exp, cols, cand = sys.argv[1], [c for c in sys.argv[2].split(",") if c], sys.argv[3]
try:
    keys = json.load(open(f".devres/ab/head1/{exp}.json"))["experiment"]["sweep_order"]
except (OSError, KeyError, ValueError) as err:
    sys.exit(f"{exp}: no description of the head's first run ({err})")
def best(side):
    out = {}
    for run in (1, 2):
        try:
            rows = list(csv.DictReader(open(f".devres/ab/{side}{run}/{exp}.csv")))
        except FileNotFoundError:
            continue
        for r in rows:
            if r["status"] != "ok":
                continue
            k = tuple(r[c] for c in keys)
            for c in cols or [c for c in r if "_ms" in c and not c.endswith("_std")]:
                if r.get(c):
                    v = float(r[c])
                    out.setdefault(k, {})[c] = min(v, out.get(k, {}).get(c, v))
    return out
b, h = best("base"), best(cand)
worse = better = 0
for k in sorted(set(b) & set(h), key=lambda k: [float(x) if x.replace(".", "").isdigit() else x for x in k]):
    cells = []
    for c in sorted(set(b[k]) & set(h[k])):
        ratio = h[k][c] / b[k][c] if b[k][c] else float("nan")
        mark = " slower" if ratio > 1.02 else " faster" if ratio < 0.98 else ""
        worse += mark == " slower"
        better += mark == " faster"
        cells.append(f"{c} {b[k][c]:.4g} -> {h[k][c]:.4g} ({ratio:.3f}{mark})")
    print(f"{cand} {exp}: " + " ".join(f"{n}={v}" for n, v in zip(keys, k)) + ": " + "; ".join(cells))
print(f"{cand} {exp}: {len(set(b) & set(h))} jobs on both sides; {better} values faster, {worse} slower (2% either way)")
PY
done
done
