#!/bin/sh
# Writeup section 3.1 (distributed_communication_single_node): prints the
# Markdown section on stdout and draws OUT/allreduce.svg.
#
# Environment (mkreport.sh sets it):
#   DATA     folder of the result CSVs (reads DATA/allreduce.csv)
#   CSV      the CSV to read instead (a smoke run's smoke_allreduce.csv)
#   OUT      folder of the report (figures go here)
#   CSVTOOL  the csvtool program: every number below comes through it
#   GNUPLOT  gnuplot 5.4+, or empty: then no figure, and the text says why
#
# No number in the text is typed here: measurements come from the CSV, the
# PyTorch figures and goal thresholds from reports/anchors/allreduce_pytorch.csv;
# only the goals' tolerance (5%) is part of the goal's wording.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
reports=$(dirname "$here")
csv="${CSV:-$DATA/allreduce.csv}"
anchor="$reports/anchors/allreduce_pytorch.csv"
gp="$reports/allreduce.gp"
GNUPLOT=${GNUPLOT:-}

echo "## 3.1 distributed_communication_single_node: all-reduce"
echo

if [ ! -f "$csv" ]; then
  echo "_Not yet measured: run \`./runner experiments/allreduce.cfg\` (it writes"
  echo "reports/data/allreduce.csv), then \`make report\`._"
  exit 0
fi
for f in "$anchor" "$gp"; do
  if [ ! -f "$f" ]; then
    echo "allreduce.sh: $f is missing" >&2
    exit 1
  fi
done

# ---- helpers ---------------------------------------------------------------

# tool, calc, is_true, num, d (reports/section_lib.sh).
. "$REPORT_LIB"
count() { tool count "$csv" "$@"; }
# The latest row wins where a configuration was measured more than once.
latest() { tool value "$csv" --sort -utc --agg first --default "" "$@"; }
anchor_value() { tool value "$anchor" --agg first "$@"; }

pretty_backend() {
  case $1 in
    mpi) printf 'MPI+CPU' ;;
    nccl) printf 'NCCL+GPU' ;;
    *) printf '%s' "$1" ;;
  esac
}
# "1024" -> "1 GiB", "100" -> "100 MiB"
size_label() {
  awk -v s="$1" 'BEGIN { if (s >= 1024 && s % 1024 == 0) printf "%g GiB", s / 1024;
                         else printf "%g MiB", s }'
}
# "a\nb\nc" -> "a, b, c"
join_lines() { printf '%s\n' "$1" | awk 'NF { printf "%s%s", (n++ ? ", " : ""), $0 }'; }
# "nccl:2\nmpi:4" -> "NCCL+GPU with 2 ranks, MPI+CPU with 4 ranks"
series_label() {
  printf '%s\n' "$1" | awk -F: 'NF {
      b = ($1 == "mpi") ? "MPI+CPU" : ($1 == "nccl") ? "NCCL+GPU" : $1
      printf "%s%s with %s ranks", (n++ ? ", " : ""), b, $2 }'
}
# The largest size with ok rows for both BACKEND1:WS1 and BACKEND2:WS2
# [on MACHINE].
common_size() {
  sizes=$(tool distinct "$csv" --cols size_mib --where status=ok \
          --where backend="$1" --where world_size="$2" ${5:+--where "machine=$5"} --sort -size_mib)
  for s in $sizes; do
    n=$(count --where status=ok --where backend="$3" --where world_size="$4" \
        ${5:+--where "machine=$5"} --where size_mib="$s")
    if [ "$n" -gt 0 ]; then
      printf '%s' "$s"
      return 0
    fi
  done
}

# The machine whose ok rows of BACKEND span the most rank counts, as
# "COUNT:MACHINE" (ties: the first machine by name); empty if none. Machine
# names may hold colons ("CPU: 2 cores ..."), hence the '|' separator. Trends
# over rank counts are read on one host, so the links stay the same.
most_ranks_machine() {
  tool distinct "$csv" --cols machine,world_size --sep '|' --where status=ok \
      --where backend="$1" --sort machine,world_size |
    awk -F'|' 'NF { c[$1]++; if (c[$1] > n) { n = c[$1]; m = $1 } }
             END { if (n) printf "%d:%s", n, m }'
}

nok=$(count --where status=ok)
nbad=$(count --where status!=ok)
if [ $((nok + nbad)) -eq 0 ]; then
  echo "_Not yet measured: reports/data/allreduce.csv has no rows yet; run"
  echo "\`./runner experiments/allreduce.cfg\`, then \`make report\`._"
  exit 0
fi

# ---- how the numbers were taken -------------------------------------------

runs=$(tool distinct "$csv" --cols warmup,iters --sep ' ' --sort warmup,iters)
if [ "$(printf '%s\n' "$runs" | wc -l)" -eq 1 ]; then
  # shellcheck disable=SC2086 # split "5 20" into warm-up and timed
  set -- $runs
  timing="$1 untimed all-reduces as warm-up, then $2 timed ones"
else
  timing="untimed warm-up all-reduces, then timed ones (warm-up / timed: $(
    printf '%s\n' "$runs" | awk 'NF { printf "%s%s/%s", (n++ ? ", " : ""), $1, $2 }'))"
fi

# Which time the runner's algbw was computed from (it decides the wording):
# the median if every ok row agrees with bytes / time_ms_median to 0.5%.
basis="the time the runner recorded"
if [ "$nok" -gt 0 ]; then
  for col in time_ms_median time_ms_mean; do
    rows=$(tool distinct "$csv" --cols bytes,$col,algbw_gbps --sep ' ' \
           --where status=ok)
    if printf '%s\n' "$rows" | awk 'NF { a = $1 / ($2 * 1e-3) / 1e9
        if (a <= 0 || $3 <= 0 || (a - $3) / $3 > 0.005 || ($3 - a) / $3 > 0.005) bad = 1 }
        END { exit bad }'; then
      case $col in
        time_ms_median) basis="the median time" ;;
        time_ms_mean) basis="the mean time" ;;
      esac
      break
    fi
  done
fi

cat <<EOF
Each job starts \`world_size\` ranks under mpirun and all-reduces (sum) an fp32
buffer of \`size_mib\` MiB per rank: \`mpi\` reduces host buffers with MPI
between CPU processes (the handout's Gloo + CPU), \`nccl\` reduces device
buffers with NCCL, one GPU per rank (NCCL + GPU). A job runs $timing;
an iteration's time is the slowest rank's (the max over ranks, as a collective
is done only when every rank is), and the tables give the median, mean and
standard deviation over the timed iterations. Algorithm bandwidth is
algbw = S / t and bus bandwidth busbw = S / t * 2(n-1)/n, with S the bytes per
rank, t $basis and n the ranks; GB = 10^9 bytes. busbw counts the traffic
each rank's link carries in a ring all-reduce, so it is comparable across rank
counts and with the links' own bandwidth.

Measured on (from the CSV's provenance columns):

EOF

machines=$(tool distinct "$csv" --cols machine --sort machine)
printf '%s\n' "$machines" | while IFS= read -r m; do
  [ -n "$m" ] || continue
  ran=$(tool distinct "$csv" --cols backend,world_size --where machine="$m" \
        --where status=ok --sort backend,world_size)
  hosts=$(tool distinct "$csv" --cols host --where machine="$m" --sort host)
  first=$(tool value "$csv" --col utc --where machine="$m" --agg min)
  last=$(tool value "$csv" --col utc --where machine="$m" --agg max)
  commits=$(tool distinct "$csv" --cols git_commit --where machine="$m")
  dirty=$(count --where machine="$m" --where git_dirty!=0 --where git_dirty!=false --where git_dirty!=)
  nccl=$(tool distinct "$csv" --cols nccl_version --where machine="$m" --where backend=nccl)
  cuda=$(tool distinct "$csv" --cols cuda_runtime_version --where machine="$m" --where backend=nccl)
  driver=$(tool distinct "$csv" --cols driver_version --where machine="$m" --where backend=nccl)
  mpilib=$(tool distinct "$csv" --cols mpi_library --where machine="$m")

  line="- **$m** (host $(join_lines "$hosts"))"
  if [ -n "$ran" ]; then
    line="$line: $(series_label "$ran")"
  else
    line="$line: no successful job"
  fi
  [ -z "$(join_lines "$nccl")" ] || line="$line; NCCL $(join_lines "$nccl")"
  [ -z "$(join_lines "$cuda")" ] || line="$line, CUDA runtime $(join_lines "$cuda")"
  [ -z "$(join_lines "$driver")" ] || line="$line, driver $(join_lines "$driver")"
  [ -z "$(join_lines "$mpilib")" ] || line="$line; MPI: $(join_lines "$mpilib")"
  line="$line; measured $first to $last, trainlab commit $(join_lines "$commits")"
  [ "$dirty" -eq 0 ] || line="$line (with uncommitted changes)"
  printf '%s.\n' "$line"
done
echo

# ---- figure ---------------------------------------------------------------

series=$(tool distinct "$csv" --cols backend,world_size --where status=ok \
         --sort backend,world_size)
a_source=$(anchor_value --col source)
a_machine=$(anchor_value --col machine)
a_ranks=$(anchor_value --col world_size)

if [ "$nok" -eq 0 ]; then
  echo "_No job has succeeded yet, so there is nothing to draw._"
elif [ -z "$GNUPLOT" ]; then
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find:"
  echo "install it, re-run configure, then \`make report\`._"
else
  tmp="$OUT/allreduce.tmp.csv"
  # Sorted so that each backend x ranks series is one run of rows.
  tool select "$csv" --cols backend,world_size,size_mib,time_ms_median,busbw_gbps \
    --where status=ok --sort backend,world_size,size_mib > "$tmp"
  "$GNUPLOT" -c "$gp" "$tmp" "$OUT/allreduce.svg" \
    "$(printf '%s\n' "$series" | tr '\n' ' ')" "$anchor" \
    "PyTorch, $a_ranks ranks (anchor)"
  rm -f "$tmp"
  echo "![All-reduce median time and bus bandwidth against message size](allreduce.svg)"
  echo
  echo "_Median time (left) and bus bandwidth (right) of one all-reduce against"
  echo "the message size per rank, log scales; dashed: $a_source on $a_machine._"
fi
echo

# ---- tables ---------------------------------------------------------------

if [ "$nok" -gt 0 ]; then
  echo "Successful jobs ($nok):"
  echo
  tab=$(tool table "$csv" \
    --cols backend,world_size,size_mib,time_ms_median,time_ms_mean,time_ms_std,algbw_gbps,busbw_gbps,machine \
    --head "backend,ranks,size (MiB),median (ms),mean (ms),std (ms),algbw (GB/s),busbw (GB/s),machine" \
    --where status=ok --sort backend,world_size,size_mib \
    --fmt time_ms_median=%.3f --fmt time_ms_mean=%.3f --fmt time_ms_std=%.3f \
    --fmt algbw_gbps=%.1f --fmt busbw_gbps=%.1f)
  printf '%s\n\n' "$tab"
fi
if [ "$nbad" -gt 0 ]; then
  echo "Jobs without a measurement ($nbad):"
  echo
  tab=$(tool table "$csv" \
    --cols backend,world_size,size_mib,status,message,machine \
    --head "backend,ranks,size (MiB),status,message,machine" \
    --where status!=ok --sort backend,world_size,size_mib)
  printf '%s\n\n' "$tab"
fi

# ---- next to PyTorch --------------------------------------------------------

echo "### Next to PyTorch"
echo
a_sizes=$(tool distinct "$anchor" --cols size_mib --sort size_mib)
goal_bw_size=$(tool value "$anchor" --col size_mib --agg max)
goal_t_size=$(tool value "$anchor" --col size_mib --agg min)
goal_bw=$(anchor_value --col busbw_gbps --where size_mib="$goal_bw_size")
goal_t=$(anchor_value --col time_ms_median --where size_mib="$goal_t_size")
num "the anchor's busbw goal" "$goal_bw"
num "the anchor's time goal" "$goal_t"
goal_bw_text="$(size_label "$goal_bw_size") busbw within 5% of $goal_bw GB/s"
goal_t_text="$(size_label "$goal_t_size") time no worse than $goal_t ms"

echo "The anchor is $a_source on $a_machine with $a_ranks ranks, fp32, median"
echo "times (reports/anchors/allreduce_pytorch.csv, from shared/anchors/README.md)."
echo "Our NCCL+GPU rows with the same number of ranks are set next to it."
echo

vs_machines=$(tool distinct "$csv" --cols machine --where status=ok \
              --where backend=nccl --where world_size="$a_ranks" --sort machine)
if [ -z "$vs_machines" ]; then
  echo "_No successful NCCL+GPU job with $a_ranks ranks yet (rows with"
  echo "backend=nccl, world_size=$a_ranks, status=ok), so there is nothing to"
  echo "compare: the goals \"$goal_bw_text\" and \"$goal_t_text\""
  echo "are not measured yet._"
  echo
else
  printf '%s\n' "$vs_machines" | while IFS= read -r m; do
    [ -n "$m" ] || continue
    echo "On $m:"
    echo
    echo "| size | PyTorch median (ms) | ours median (ms) | ours / PyTorch time | PyTorch busbw (GB/s) | ours busbw (GB/s) | busbw % of PyTorch |"
    echo "|---|--:|--:|--:|--:|--:|--:|"
    # Our latest NCCL row with the anchor's rank count on this machine.
    ours() {
      latest --where status=ok --where backend=nccl \
        --where world_size="$a_ranks" --where machine="$m" "$@"
    }
    for s in $a_sizes; do
      at=$(anchor_value --col time_ms_median --fmt %.3f --where size_mib="$s")
      ab=$(anchor_value --col busbw_gbps --fmt %.1f --where size_mib="$s")
      num "the anchor's time at $s MiB" "$at"
      num "the anchor's busbw at $s MiB" "$ab"
      ot=$(ours --col time_ms_median --fmt %.3f --where size_mib="$s")
      ob=$(ours --col busbw_gbps --fmt %.1f --where size_mib="$s")
      if [ -z "$ot" ]; then
        echo "| $(size_label "$s") | $at | not measured | | $ab | not measured | |"
      else
        num "NCCL's median time at $s MiB" "$ot"
        num "NCCL's busbw at $s MiB" "$ob"
        tr=$(calc "%.2f" "$ot / $at")
        bp=$(calc "%.0f%%" "100 * $ob / $ab")
        echo "| $(size_label "$s") | $at | $ot | $tr | $ab | $ob | $bp |"
      fi
    done
    echo

    ob=$(ours --col busbw_gbps --fmt %.1f --where size_mib="$goal_bw_size")
    if [ -z "$ob" ]; then
      verdict="not measured yet"
    else
      num "NCCL's busbw at $goal_bw_size MiB" "$ob"
      pct=$(calc "%.1f" "100 * $ob / $goal_bw")
      need=$(calc "%.1f" "0.95 * $goal_bw")
      if is_true "$ob >= 0.95 * $goal_bw"; then
        verdict="**met**: $ob GB/s is $pct% of it"
      else
        verdict="**not met**: $ob GB/s is $pct% of it (needs $need)"
      fi
    fi
    echo "- Goal \"$goal_bw_text\": $verdict."
    ot=$(ours --col time_ms_median --fmt %.3f --where size_mib="$goal_t_size")
    if [ -z "$ot" ]; then
      verdict="not measured yet"
    else
      num "NCCL's median time at $goal_t_size MiB" "$ot"
      times=$(calc "%.2f" "$ot / $goal_t")
      if is_true "$ot <= $goal_t"; then
        verdict="**met**: $ot ms, $times times PyTorch's"
      else
        verdict="**not met**: $ot ms, $times times PyTorch's"
      fi
    fi
    echo "- Goal \"$goal_t_text\": $verdict."
    echo
  done
fi

# ---- PyTorch measured beside our rows ---------------------------------------

# reports/anchors/torch_allreduce.py, run under torchrun on the machines our
# NCCL rows come from, appends reports/anchors/allreduce_torch.csv (the
# anchor file's columns plus utc): PyTorch's numbers, not the runner's, so
# they live with the anchors. Only the main experiment is set beside them.
torch_csv="$reports/anchors/allreduce_torch.csv"
if [ -f "$torch_csv" ] && [ "$csv" = "$DATA/allreduce.csv" ]; then
  "$CSVTOOL" check "$torch_csv" > /dev/null
  echo "PyTorch measured on the same machines, in the same sessions as our rows"
  echo "(reports/anchors/torch_allreduce.py under torchrun; 5 warm-ups, then 20"
  echo "iterations of barrier, all_reduce, synchronize; slowest rank; median;"
  echo "rows in reports/anchors/allreduce_torch.csv):"
  echo
  echo "| machine | ranks | size | PyTorch median (ms) | ours median (ms) | PyTorch busbw (GB/s) | ours busbw (GB/s) | ours / PyTorch busbw |"
  echo "|---|--:|---|--:|--:|--:|--:|--:|"
  tool distinct "$torch_csv" --cols machine,world_size,size_mib \
      --sort machine,world_size,size_mib |
  while IFS=: read -r m n s; do
    [ -n "$m" ] || continue
    tv() { tool value "$torch_csv" --sort -utc --agg first --where machine="$m" \
             --where world_size="$n" --where size_mib="$s" "$@"; }
    pt=$(tv --col time_ms_median --fmt %.3f)
    pb=$(tv --col busbw_gbps --fmt %.1f)
    num "PyTorch's measured time" "$pt"
    num "PyTorch's measured busbw" "$pb"
    ot=$(latest --col time_ms_median --fmt %.3f --where status=ok --where backend=nccl \
           --where world_size="$n" --where size_mib="$s" --where machine="$m")
    ob=$(latest --col busbw_gbps --fmt %.1f --where status=ok --where backend=nccl \
           --where world_size="$n" --where size_mib="$s" --where machine="$m")
    if [ -z "$ot" ]; then
      echo "| $m | $n | $(size_label "$s") | $pt | not measured | $pb | not measured | |"
    else
      num "NCCL's median time" "$ot"
      num "NCCL's busbw" "$ob"
      echo "| $m | $n | $(size_label "$s") | $pt | $ot | $pb | $ob | $(calc "%.2f" "$ob / $pb") |"
    fi
  done
  echo
fi

# ---- NCCL from 2 to 8 GPUs --------------------------------------------------

pub="$reports/anchors/allreduce_published.csv"
pick=$(most_ranks_machine nccl)
sn=${pick%%:*} sm=${pick#*:}
if [ -n "$pick" ] && [ "$sn" -ge 3 ] && [ -f "$pub" ]; then
  on_sm() { latest --where status=ok --where backend=nccl --where machine="$sm" "$@"; }
  wss=$(tool distinct "$csv" --cols world_size --where status=ok --where backend=nccl \
        --where machine="$sm" --sort world_size)
  wlo=$(printf '%s\n' "$wss" | head -n 1)
  whi=$(printf '%s\n' "$wss" | tail -n 1)
  big=$(tool value "$csv" --col size_mib --where status=ok --where backend=nccl \
        --where machine="$sm" --agg max)
  small=$(tool value "$csv" --col size_mib --where status=ok --where backend=nccl \
          --where machine="$sm" --agg min)
  echo "### NCCL from $wlo to $whi GPUs"
  echo
  echo "All NCCL+GPU rows on $sm, one GPU per rank, NVLink multicast (NVLS) off"
  echo "(NCCL_NVLS_ENABLE=0 on our machines), at the smallest and largest size:"
  echo
  echo "| ranks | $(size_label "$small") median (ms) | $(size_label "$small") busbw (GB/s) | $(size_label "$big") median (ms) | $(size_label "$big") algbw (GB/s) | $(size_label "$big") busbw (GB/s) | busbw / $wlo ranks' |"
  echo "|--:|--:|--:|--:|--:|--:|--:|"
  b_lo=$(on_sm --col busbw_gbps --fmt %.1f --where world_size="$wlo" --where size_mib="$big")
  num "NCCL's busbw with $wlo ranks" "$b_lo"
  for n in $wss; do
    ts=$(on_sm --col time_ms_median --fmt %.3f --where world_size="$n" --where size_mib="$small")
    bs=$(on_sm --col busbw_gbps --fmt %.1f --where world_size="$n" --where size_mib="$small")
    tb=$(on_sm --col time_ms_median --fmt %.3f --where world_size="$n" --where size_mib="$big")
    ab=$(on_sm --col algbw_gbps --fmt %.1f --where world_size="$n" --where size_mib="$big")
    bb=$(on_sm --col busbw_gbps --fmt %.1f --where world_size="$n" --where size_mib="$big")
    if [ -z "$bb" ]; then
      echo "| $n | ${ts:-not measured} | $bs | not measured | | | |"
    else
      num "NCCL's busbw with $n ranks" "$bb"
      echo "| $n | ${ts:-not measured} | $bs | $tb | $ab | $bb | $(calc %.2f "$bb / $b_lo") |"
    fi
  done
  echo
  b_hi=$(on_sm --col busbw_gbps --fmt %.1f --where world_size="$whi" --where size_mib="$big")
  a_hi=$(on_sm --col algbw_gbps --fmt %.1f --where world_size="$whi" --where size_mib="$big")
  a_lo=$(on_sm --col algbw_gbps --fmt %.1f --where world_size="$wlo" --where size_mib="$big")
  t_slo=$(on_sm --col time_ms_median --fmt %.3f --where world_size="$wlo" --where size_mib="$small")
  t_shi=$(on_sm --col time_ms_median --fmt %.3f --where world_size="$whi" --where size_mib="$small")
  for v in "$b_hi" "$a_hi" "$a_lo" "$t_slo" "$t_shi"; do num "an NCCL measurement on $sm" "$v"; done
  # The same 10% band as "What the numbers say" below calls level.
  if is_true "$b_hi >= $b_lo"; then
    change="rises by $(calc %.0f "100 * ($b_hi / $b_lo - 1)")%"
  else
    change="falls by $(calc %.0f "100 * (1 - $b_hi / $b_lo)")%"
  fi
  if is_true "$b_hi > 1.1 * $b_lo || $b_hi < 0.9 * $b_lo"; then
    trend=$change
  else
    trend="stays nearly level (it $change)"
  fi
  cat <<EOF
At $(size_label "$big") the bus bandwidth $trend from $wlo to $whi GPUs ($b_lo to
$b_hi GB/s), while the algorithm bandwidth (what a caller sees: bytes per rank
over time) goes from $a_lo to $a_hi GB/s: each rank sends and receives
2(n-1)/n of its buffer, which approaches twice the buffer as n grows, so a
level busbw means a time that grows only by that factor, the per-GPU NVLink
bandwidth setting the pace at every rank count. Small messages pay for the
rank count instead: a ring all-reduce passes data through 2(n-1) steps, each
with its own latency, so $(size_label "$small") goes from $t_slo ms with $wlo ranks to $t_shi ms
with $whi.
EOF
  pub_off=$(tool value "$pub" --col busbw_gbps --agg first --default "" \
            --where nvls=off --where world_size="$whi")
  if [ -n "$pub_off" ]; then
    pub_on=$(tool value "$pub" --col busbw_gbps --agg first --default "" \
             --where nvls=on --where world_size="$whi")
    pub_src=$(tool value "$pub" --col source --agg first --where nvls=off --where world_size="$whi")
    pub_m=$(tool value "$pub" --col machine --agg first --where nvls=off --where world_size="$whi")
    num "the published busbw" "$pub_off"
    echo
    printf '%s' "With $whi ranks, $b_hi GB/s is $(calc %.0f "100 * $b_hi / $pub_off")% of the ~$pub_off GB/s that $pub_src
reaches on $pub_m with NVLink SHARP (NVLS) off, the same setting as ours;
the H200 has the H100's NVLink generation and link count, so the figures
compare (reports/anchors/allreduce_published.csv, from
shared/anchors/README.md)"
    if [ -n "$pub_on" ]; then
      num "the published busbw with NVLS on" "$pub_on"
      printf '%s' "; with NVLS on, the switch reduces the data itself and the published
figure is ~$pub_on GB/s, which our shared machines do not allow us to try"
    fi
    echo "."
  fi
  echo
fi

# ---- commentary -----------------------------------------------------------

[ "$nok" -gt 0 ] || exit 0
echo "### What the numbers say"
echo
text=""

# 1. Backend: NCCL against MPI at the largest size both measured with the
#    fewest ranks both ran.
wn=$(tool value "$csv" --col world_size --where status=ok --where backend=nccl --agg min --default "")
wm=$(tool value "$csv" --col world_size --where status=ok --where backend=mpi --agg min --default "")
if [ -n "$wn" ] && [ -n "$wm" ] && [ "$wn" = "$wm" ]; then
  L=$(common_size nccl "$wn" mpi "$wm")
  if [ -n "$L" ]; then
    at_L() { latest --where status=ok --where world_size="$wn" --where size_mib="$L" "$@"; }
    bn=$(at_L --col busbw_gbps --fmt %.1f --where backend=nccl)
    bm=$(at_L --col busbw_gbps --fmt %.1f --where backend=mpi)
    mn=$(at_L --col machine --where backend=nccl)
    mm=$(at_L --col machine --where backend=mpi)
    num "NCCL's busbw at $L MiB" "$bn"
    num "MPI's busbw at $L MiB" "$bm"
    factor=$(calc "%.0f" "$bn / $bm")
    text="At $(size_label "$L") with $wn ranks, NCCL between GPUs ($mn) reaches
$bn GB/s bus bandwidth against $bm GB/s for MPI between CPU processes ($mm),
$factor times more: NCCL reduces in GPU memory over the GPUs'
own links, while MPI moves every byte through host memory and sums it on CPU
cores."
  fi
fi

# 2. Size: NCCL with the fewest ranks, smallest against largest size.
if [ -n "$wn" ]; then
  s0=$(tool value "$csv" --col size_mib --where status=ok --where backend=nccl \
       --where world_size="$wn" --agg min)
  s1=$(tool value "$csv" --col size_mib --where status=ok --where backend=nccl \
       --where world_size="$wn" --agg max)
  if [ "$s0" != "$s1" ]; then
    nccl_wn() { latest --where status=ok --where backend=nccl --where world_size="$wn" "$@"; }
    t0=$(nccl_wn --col time_ms_median --fmt %.3f --where size_mib="$s0")
    t1=$(nccl_wn --col time_ms_median --fmt %.3f --where size_mib="$s1")
    b0=$(nccl_wn --col busbw_gbps --fmt %.1f --where size_mib="$s0")
    b1=$(nccl_wn --col busbw_gbps --fmt %.1f --where size_mib="$s1")
    for v in "$t0" "$t1" "$b0" "$b1" "$s0" "$s1"; do num "an NCCL measurement" "$v"; done
    grow=$(calc "%.0f" "$t1 / $t0")
    more=$(calc "%.0f" "$s1 / $s0")
    if is_true "$grow * 2 <= $more"; then
      how="only $grow times longer"
    else
      how="$grow times longer, close to proportionally"
    fi
    text="$text${text:+ }For NCCL with $wn ranks, $more times more data ($(size_label "$s0") to
$(size_label "$s1")) takes $how ($t0 to $t1 ms): a small all-reduce is
dominated by fixed per-call latency, so its bus bandwidth ($b0 GB/s) is far
below what large messages reach ($b1 GB/s)."
  fi
fi

# 3. Ranks: per backend, on the host with the most rank counts, the fewest
#    against the most ranks at the largest size both measured there.
ranks_text=""
for b in mpi nccl; do
  pickb=$(most_ranks_machine $b)
  [ -n "$pickb" ] || continue
  mb=${pickb#*:}
  on_mb() { latest --where status=ok --where backend="$b" --where machine="$mb" "$@"; }
  lo=$(tool value "$csv" --col world_size --where status=ok --where backend=$b \
       --where machine="$mb" --agg min)
  hi=$(tool value "$csv" --col world_size --where status=ok --where backend=$b \
       --where machine="$mb" --agg max)
  [ "$lo" != "$hi" ] || continue
  L=$(common_size $b "$lo" $b "$hi" "$mb")
  [ -n "$L" ] || continue
  blo=$(on_mb --col busbw_gbps --fmt %.1f --where world_size="$lo" --where size_mib="$L")
  bhi=$(on_mb --col busbw_gbps --fmt %.1f --where world_size="$hi" --where size_mib="$L")
  num "$b busbw at $L MiB with $lo ranks" "$blo"
  num "$b busbw at $L MiB with $hi ranks" "$bhi"
  if is_true "$bhi < 0.9 * $blo"; then
    trend="drops"
  elif is_true "$bhi > 1.1 * $blo"; then
    trend="rises"
  else
    trend="stays level"
  fi
  ranks_text="$ranks_text${ranks_text:+; }$(pretty_backend $b) busbw at $(size_label "$L") $trend ($blo GB/s with $lo ranks, $bhi GB/s with $hi, both on $mb)"
done
if [ -n "$ranks_text" ]; then
  text="$text${text:+ }With more ranks, $ranks_text; as busbw already divides
out the ring's 2(n-1)/n traffic, a level busbw means the links set the pace
whatever the rank count, a falling one that the ranks share a bottleneck
(memory bandwidth and cores, for CPU processes)."
fi

if [ -n "$text" ]; then
  printf '%s\n' "$text"
else
  echo "_Too few successful jobs yet for a comparison across backends, sizes or ranks._"
fi
echo
