#!/bin/sh
# A full or read-only disk stops the sweep with a message that names the
# folder and what is needed (exit 3), keeps every row written, leaves no
# temporary file, and the next run resumes once there is room. A CSV that a
# full disk left empty counts as a new one.
#
# Needs a small file system of its own: a tmpfs mounted in a private mount
# namespace (root, unshare); skips (77) where that is not possible.
if [ "${TL_MOUNT_NS:-}" != 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "not root: cannot mount a small file system"; exit 77; }
  unshare -m true 2> /dev/null || { echo "no mount namespaces here"; exit 77; }
  TL_MOUNT_NS=1 exec unshare -m sh "$0" "$@"
fi
. "${top_srcdir:-.}/tests/lib.sh"

cfg="$scratch/df.cfg"
cat > "$cfg" <<'CFG'
name = "df";
kind = "selftest";
run = { timeout_s = 60.0; world_size = 1; };
selftest = { action = "ok"; sleep_s = 0.3; };
sweep = { value = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]; };
CFG

# An empty CSV (what a full disk leaves when even the header did not fit).
mkdir -p "$scratch/empty"
: > "$scratch/empty/df.csv"
"$RUNNER" --launcher "" --out-dir "$scratch/empty" --only value=1,2 --set sleep_s=0 "$cfg" 2> "$scratch/empty.err"
check "an empty CSV is a new one" [ $? -eq 0 ] && [ "$(rows "$scratch/empty/df.csv")" -eq 2 ]

fs="$scratch/fs"
mkdir -p "$fs"
mount -t tmpfs -o size=4m tmpfs "$fs" || { echo "cannot mount a tmpfs"; exit 77; }
trap 'umount "$fs"; rm -rf "$scratch"' EXIT
out="$fs/out"
csv="$out/df.csv"
"$RUNNER" --launcher "" --out-dir "$out" "$cfg" 2> "$scratch/full.err" &
pid=$!
i=0
while [ "$(rows "$csv")" -lt 2 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
dd if=/dev/zero of="$fs/fill" bs=65536 2> /dev/null
wait $pid
check "a full disk stops the sweep with exit 3" [ $? -eq 3 ]
check "and says so, naming the folder" grep -q "runner: stopping.*the file system of $out is full" "$scratch/full.err"
n=$(rows "$csv")
check "rows written before are kept ($n)" [ "$n" -ge 2 ] && [ "$n" -lt 8 ]
check "no torn row" [ "$(tail -c 1 "$csv" | od -An -c | tr -d ' ')" = '\n' ]
check "no temporary file left" [ -z "$(find "$out" -name '*tmp*')" ]
check "no result file left" [ -z "$(find "$out" -name '*.result*')" ]
rm -f "$fs/fill"
"$RUNNER" --launcher "" --out-dir "$out" "$cfg" 2> "$scratch/resume.err"
check "with room again the sweep resumes" [ $? -eq 0 ]
check "8 rows, one per job" [ "$(rows "$csv")" -eq 8 ] && [ "$(column "$csv" value | sort -u | wc -l)" -eq 8 ]

# A read-only file system: refused before any job, with the reason.
# A process of the last run may still be closing its files on a loaded
# machine (remount says "busy" while a file is open for writing): retry.
i=0
until mount -o remount,ro "$fs" 2> "$scratch/remount.err"; do
  i=$((i + 1))
  if [ $i -ge 50 ]; then
    cat "$scratch/remount.err"
    ls -l /proc/[0-9]*/fd 2> /dev/null | grep -F "$fs" | head -n 5
    break
  fi
  sleep 0.1
done
"$RUNNER" --launcher "" --out-dir "$out" --force --only value=1 "$cfg" 2> "$scratch/ro.err"
check "a read-only output exits 3" [ $? -eq 3 ]
check "and says it is read-only" grep -q "the file system of $out is read-only" "$scratch/ro.err"
cat "$scratch/full.err" "$scratch/ro.err"
finish
