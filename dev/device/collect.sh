#!/bin/sh
# Here, after a GPU call: bring a batch's results into the tree. Unpacks
# TGZ (bg.sh's r.tgz, which holds the newest of everything, or a batch's
# own part*.tgz from inside one, or run_exps.sh's res.tgz) and
# copies what it holds of ours: each experiment's NAME.csv, NAME.json and
# NAME.samples.jsonl from its data/ folder into reports/data (never the
# runner's NAME.csv.lock; never a file that lacks rows reports/data has:
# see below), and each anchor file at its top (or in its .devres/) whose
# name is one in reports/anchors/ over that one (a batch copies the committed
# anchor file there before its script appends to it). Then it lists what
# changed, and the dirty rows among the new ones, so they are checked
# before a commit.
#   sh dev/device/collect.sh /work/.device/N/r.tgz
set -eu
tgz=${1:?usage: collect.sh RESULT.tgz}
top=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$tgz" -C "$tmp"
# A CSV or samples file of ours must come back whole: the committed file
# a byte prefix of the returned one (a batch copies it in before the runner
# appends). One that lacks committed rows (a subset run into an empty
# out-dir) is left out, with its .json, unless PARTIAL=ok.
find "$tmp" -path '*/data/*' \( -name '*.csv' -o -name '*.samples.jsonl' \) |
  while read -r f; do
    ours="$top/reports/data/${f##*/}"
    if [ -f "$ours" ] && [ "${PARTIAL:-}" != ok ] &&
       ! head -c "$(wc -c < "$ours")" "$f" | cmp -s - "$ours"; then
      echo "collect.sh: ${f##*/} does not hold reports/data's rows: left out (PARTIAL=ok takes it)" >&2
      touch "$tmp/skip.${f##*/}"
    fi
  done
find "$tmp" -path '*/data/*' \( -name '*.csv' -o -name '*.json' -o -name '*.samples.jsonl' \) |
  while read -r f; do
    base=${f##*/} name=${base%%.*}
    [ -e "$tmp/skip.$name.csv" ] || [ -e "$tmp/skip.$base" ] || cp "$f" "$top/reports/data/"
  done
for f in "$tmp"/*.csv "$tmp"/.devres/*.csv; do
  [ -f "$f" ] && [ -f "$top/reports/anchors/${f##*/}" ] && cp "$f" "$top/reports/anchors/"
done
cd "$top"
git status --short reports/data reports/anchors
# rows added to a tracked experiment CSV from an uncommitted tree
for f in $(git diff --name-only -- 'reports/data/*.csv'); do
  # (a header that gained columns shows as added: not a row)
  n=$(git diff -U0 -- "$f" | grep '^+[^+]' | grep -v -x -F "+$(head -1 "$f")" |
      awk -F, -v col="$(head -1 "$f" | tr ',' '\n' | grep -n -x git_dirty | cut -d: -f1)" \
        'col && $col != 0 { n++ } END { print n + 0 }')
  [ "$n" -eq 0 ] || echo "collect.sh: $f: $n new rows from a dirty tree (git_dirty != 0)"
done
