#!/bin/sh
# distributed_communication_single_node (handout 2.1.1): all-reduce of fp32
# buffers of 1 MiB to 1 GiB over 2, 4, 6 (and 8) processes, MPI between CPU
# processes and NCCL between GPUs. Prints the problem's body (mkreport.sh
# prints its heading) and draws OUT/distributed_communication_single_node.svg;
# then the other collectives (DATA/collectives.csv, the collective kind's
# sweep) where measured.
#
# Environment (mkreport.sh sets it):
#   PROBLEM  must be distributed_communication_single_node
#   CSV      the experiment's CSV (DATA/allreduce.csv; a smoke run's
#            smoke_allreduce.csv works too)
#   DATA     folder of the result CSVs
#   OUT      folder of the report (figures go here)
#   CSVTOOL  the csvtool program: every number below comes through it
#   GNUPLOT  gnuplot 5.4+, or empty: then no figure, and the text says why
#   REPORT_LIB  reports/section_lib.sh
#
# No number in the text is typed here: measurements come from the CSV,
# PyTorch's from reports/anchors/collectives_torch.csv (torch_collectives.py,
# run on the machine our NCCL rows come from: the strongest anchor),
# nccl-tests' published figure from allreduce_published.csv.
set -eu
. "$REPORT_LIB"


if [ "${PROBLEM:-}" != distributed_communication_single_node ]; then
  echo "allreduce.sh: unknown PROBLEM \"${PROBLEM:-}\" (distributed_communication_single_node)" >&2
  exit 1
fi
csv="${CSV:-$DATA/allreduce.csv}"
anchor_csv="$REPORTS/anchors/collectives_torch.csv"
pub="$REPORTS/anchors/allreduce_published.csv"
gp="$REPORTS/allreduce.gp"
fig=distributed_communication_single_node

if [ ! -f "$csv" ]; then
  not_measured allreduce
  exit 0
fi
for f in "$anchor_csv" "$pub" "$gp"; do
  if [ ! -f "$f" ]; then
    echo "allreduce.sh: $f is missing" >&2
    exit 1
  fi
done

# ---- helpers ---------------------------------------------------------------

# tool, calc, is_true, num, d (reports/section_lib.sh).
count() { tool count "$csv" "$@"; }
# The latest row wins where a configuration was measured more than once.
latest() { tool value "$csv" --sort -utc --agg first --default "" "$@"; }

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
# cpu_of MACHINE: where MPI's CPU processes ran on MACHINE, "the 16-core
# Intel Xeon of the 1x NVIDIA H200 machine": a machine is named by its
# GPUs, which MPI+CPU does not use; MACHINE itself where the CSV predates
# the cpu columns.
cpu_of() {
  if ! has_col "$csv" cpu_model || ! has_col "$csv" cpu_cores; then printf '%s' "$1"; return; fi
  _cm=$(latest --where backend=mpi --where machine="$1" --col cpu_model |
    sed 's/([RT]M*)//g; s/ @.*//; s/ Processor$//; s/ CPU$//; s/  */ /g')
  _cc=$(latest --where backend=mpi --where machine="$1" --col cpu_cores)
  [ -n "$_cm" ] || { printf '%s' "$1"; return; }
  printf 'the %s%s of the %s machine' "${_cc:+$_cc-core }" "$_cm" "$1"
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

"$CSVTOOL" check "$anchor_csv" > /dev/null
# PyTorch's all-reduce rows between two ranks or more (the other
# operations' are read at the end).
torch_csv="$REPORT_TMP/allreduce_torch.csv"
tool select "$anchor_csv" --where op=all_reduce --where status=ok --where 'world_size!=1' > "$torch_csv"

nok=$(count --where status=ok)
nbad=$(count --where status!=ok)
if [ $((nok + nbad)) -eq 0 ]; then
  not_measured allreduce
  exit 0
fi

# ---- how the numbers were taken -------------------------------------------

runs=$(tool distinct "$csv" --cols warmup,iters --sep ' ' --sort warmup,iters)
if [ "$(printf '%s\n' "$runs" | wc -l)" -eq 1 ]; then
  # shellcheck disable=SC2086 # split "5 20" into warm-up and timed
  set -- $runs
  timing="$1 warm-up, then $2 timed all-reduces"
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

mpilib=$(join_lines "$(tool distinct "$csv" --cols mpi_library --where backend=mpi)")
ncclv=$(join_lines "$(tool distinct "$csv" --cols nccl_version --where backend=nccl)")
m_mpi=$(tool distinct "$csv" --cols machine --where backend=mpi --where status=ok --sort machine |
  while IFS= read -r m; do [ -z "$m" ] || cpu_of "$m"; echo; done)
m_mpi=$(join_lines "$m_mpi")
m_nccl=$(join_lines "$(tool distinct "$csv" --cols machine --where backend=nccl --where status=ok --sort machine)")
cat <<EOF
Each job starts \`world_size\` ranks under mpirun and all-reduces (sum) an fp32
buffer of \`size_mib\` MiB per rank: **MPI+CPU** between CPU processes (the
handout's Gloo + CPU${mpilib:+; $mpilib}), **NCCL+GPU** between GPUs (NCCL${ncclv:+ $ncclv}, one
per rank). A job runs $timing; an iteration's time is the slowest rank's.
Bus bandwidth busbw = S / t x 2(n-1)/n (S bytes per rank, t $basis, n
ranks, GB = 10^9 bytes) is each link's traffic in a ring all-reduce,
comparable across rank counts. MPI+CPU ran on ${m_mpi:-no machine yet}, NCCL+GPU on ${m_nccl:-no machine yet}.

EOF

# ---- figure -----------------------------------------------------------------

series=$(tool distinct "$csv" --cols backend,world_size --where status=ok \
         --sort backend,world_size)
if [ "$nok" -eq 0 ]; then
  echo "_No job has succeeded yet, so there is nothing to draw._"
elif [ -z "$GNUPLOT" ]; then
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
else
  tmp="$OUT/$fig.tmp.csv"
  atmp="$OUT/$fig.anchor.tmp.csv"
  tool select "$csv" --cols backend,world_size,size_mib,time_ms_median,busbw_gbps \
    --where status=ok --sort backend,world_size,size_mib > "$tmp"
  # PyTorch's latest row per rank count and size: one series per count.
  tool select "$torch_csv" --cols world_size,size_mib,time_ms_median,busbw_gbps,utc \
      --sort world_size,size_mib,-utc |
    awk -F, 'NR == 1 { print "world_size,size_mib,time_ms_median,busbw_gbps"; next }
             !seen[$1 "," $2]++ { print $1 "," $2 "," $3 "," $4 }' > "$atmp"
  tranks=$(tool distinct "$atmp" --cols world_size --sort world_size | tr '\n' ' ')
  "$GNUPLOT" -c "$gp" "$tmp" "$OUT/$fig.svg" \
    "$(printf '%s\n' "$series" | tr '\n' ' ')" "$atmp" "$tranks"
  rm -f "$tmp" "$atmp"
  echo "![All-reduce of fp32 data on one node: median time and bus bandwidth against message size, MPI between CPU processes and NCCL between GPUs, with PyTorch's NCCL all-reduce on the same machine](${fig}.svg)"
  echo
  echo "_Median time (left) and bus bandwidth (right) of one all-reduce against"
  echo "the message size per rank, log scales. Dashed: PyTorch's torch.distributed"
  echo "all-reduce (NCCL) on the machine of our NCCL rows (reports/anchors/collectives_torch.csv)._"
fi
echo

# ---- table ------------------------------------------------------------------

sizes=$(tool distinct "$csv" --cols size_mib --where status=ok --sort size_mib)
if [ "$nok" -gt 0 ]; then
  hdr="| backend | ranks |" sep="|---|--:|"
  for sz in $sizes; do hdr="$hdr $(size_label "$sz") |"; sep="$sep--:|"; done
  echo "Median time per all-reduce in ms, bus bandwidth in GB/s in brackets (the"
  echo "latest row where a configuration was measured more than once):"
  echo
  echo "$hdr"
  echo "$sep"
  tool select "$csv" --cols backend,world_size,size_mib,time_ms_median,busbw_gbps,utc \
      --where status=ok --sort backend,world_size,size_mib,-utc |
    awk -F, -v sizes="$(printf '%s' "$sizes" | tr '\n' ' ')" '
      BEGIN { ns = split(sizes, S, " ") }
      NR > 1 { k = $1 "," $2; if (!(k in seen)) { seen[k] = 1; o[n++] = k }
               if (!((k, $3) in c)) c[k, $3] = sprintf("%.3f (%.1f)", $4, $5) }
      END { for (i = 0; i < n; i++) { split(o[i], p, ",")
              b = (p[1] == "mpi") ? "MPI+CPU" : (p[1] == "nccl") ? "NCCL+GPU" : p[1]
              line = sprintf("| %s | %s |", b, p[2])
              for (j = 1; j <= ns; j++)
                line = line " " (((o[i], S[j]) in c) ? c[o[i], S[j]] : "-") " |"
              print line } }'
  echo
fi
failed_jobs "$csv" backend,world_size,size_mib,status,message,machine \
  "backend,ranks,size (MiB),status,message,machine"

# ---- commentary -------------------------------------------------------------

[ "$nok" -gt 0 ] || exit 0
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
    num "NCCL's busbw at $L MiB" "$bn"
    num "MPI's busbw at $L MiB" "$bm"
    # the ratio of the values as measured, not as printed to 0.1
    rn=$(at_L --col busbw_gbps --where backend=nccl)
    rm=$(at_L --col busbw_gbps --where backend=mpi)
    num "NCCL's busbw at $L MiB" "$rn"
    num "MPI's busbw at $L MiB" "$rm"
    factor=$(calc "%.0f" "$rn / $rm")
    text="At $(size_label "$L") with $wn ranks, NCCL between GPUs ($mn) reaches
$bn GB/s bus bandwidth against $bm GB/s for MPI between CPU processes,
$factor times more: NCCL reduces in GPU memory over the GPUs' links, MPI
through host memory on CPU cores."
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
    # the ratio of the values as measured, not as printed
    r0=$(nccl_wn --col time_ms_median --where size_mib="$s0")
    r1=$(nccl_wn --col time_ms_median --where size_mib="$s1")
    for v in "$t0" "$t1" "$b0" "$b1" "$s0" "$s1" "$r0" "$r1"; do num "an NCCL measurement" "$v"; done
    grow=$(calc "%.0f" "$r1 / $r0")
    more=$(calc "%.0f" "$s1 / $s0")
    if is_true "$grow * 2 <= $more"; then
      how="only $grow times longer"
    else
      how="$grow times longer, close to proportionally"
    fi
    text="$text${text:+ }For NCCL with $wn ranks, $more times more data ($(size_label "$s0") to
$(size_label "$s1")) takes $how ($t0 to $t1 ms): per-call latency
dominates a small all-reduce (busbw $b0 against $b1 GB/s)."
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
  # the machine once, in the intro; MPI's CPU there too
  ranks_text="$ranks_text${ranks_text:+; }$(pretty_backend $b) busbw at $(size_label "$L") $trend ($blo GB/s with $lo ranks, $bhi GB/s with $hi)"
done
if [ -n "$ranks_text" ]; then
  text="$text${text:+ }With more ranks, $ranks_text: a level busbw means the
links set the pace, a falling one a shared bottleneck (for CPU processes,
memory bandwidth and cores)."
fi

if [ -n "$text" ]; then
  printf '**Commentary.** %s\n\n' "$text"
else
  echo "_Too few successful jobs yet for a comparison across backends, sizes or ranks._"
  echo
fi

# ---- next to PyTorch --------------------------------------------------------

# The machine: our NCCL rows' of the most rank counts where PyTorch ran
# too, else PyTorch's latest.
tmach=$(most_ranks_machine nccl)
tmach=${tmach#*:}
if [ -z "$tmach" ] || [ "$(tool count "$torch_csv" --where machine="$tmach")" -eq 0 ]; then
  tmach=$(tool value "$torch_csv" --col machine --sort -utc --agg first)
fi
tver=$(tool value "$torch_csv" --col torch --where machine="$tmach" --sort -utc --agg first)
tsizes=$(tool distinct "$torch_csv" --cols size_mib --where machine="$tmach" --sort size_mib)
tranks=$(tool distinct "$torch_csv" --cols world_size --where machine="$tmach" --sort world_size)
# PyTorch's latest median, and ours, on that machine.
pt_at() { tool value "$torch_csv" --sort -utc --agg first --default "" --where machine="$tmach" "$@"; }
ours_at() { latest --where status=ok --where backend=nccl --where machine="$tmach" "$@"; }
echo "**Next to PyTorch.** torch.distributed $tver (NCCL) on $tmach, the machine of our NCCL rows"
echo "(reports/anchors/torch_collectives.py under torchrun: barrier, all_reduce,"
echo "synchronize per iteration; slowest rank; median). Our median / PyTorch's, ms."
echo
hdr="| ranks |" sep="|--:|"
for sz in $tsizes; do hdr="$hdr $(size_label "$sz") |"; sep="$sep--:|"; done
echo "$hdr"
echo "$sep"
nslow=0 ncmp=0
for n in $tranks; do
  line="| $n |"
  for sz in $tsizes; do
    pt=$(pt_at --col time_ms_median --where world_size="$n" --where size_mib="$sz")
    ot=$(ours_at --col time_ms_median --where world_size="$n" --where size_mib="$sz")
    if [ -z "$pt" ] || [ -z "$ot" ]; then
      line="$line - |"
      continue
    fi
    num "PyTorch's median" "$pt"
    num "our NCCL median" "$ot"
    line="$line $(calc %.3f "$ot") / $(calc %.3f "$pt") |"
    ncmp=$((ncmp + 1))
    ! is_true "$ot > $pt" || nslow=$((nslow + 1))
  done
  echo "$line"
done
echo
big=$(printf '%s\n' "$tsizes" | tail -n 1)
small=$(printf '%s\n' "$tsizes" | head -n 1)
# Our busbw over PyTorch's at the largest size, one line per rank count.
ratios=$(for n in $tranks; do
  pb=$(pt_at --col busbw_gbps --where world_size="$n" --where size_mib="$big")
  ob=$(ours_at --col busbw_gbps --where world_size="$n" --where size_mib="$big")
  [ -z "$pb" ] || [ -z "$ob" ] || awk -v o="$ob" -v p="$pb" 'BEGIN { printf "%.4f\n", o / p }'
done | sort -n)
# Ours against PyTorch at the smallest size, the fewest ranks.
n0=$(printf '%s\n' "$tranks" | head -n 1)
ps=$(pt_at --col time_ms_median --where world_size="$n0" --where size_mib="$small")
os=$(ours_at --col time_ms_median --where world_size="$n0" --where size_mib="$small")
if [ "$ncmp" -gt 0 ]; then
  text="Ours is slower than PyTorch's at $nslow of the $ncmp pairs"
  if [ -n "$ratios" ]; then
    rlo=$(printf '%s\n' "$ratios" | head -n 1)
    rhi=$(printf '%s\n' "$ratios" | tail -n 1)
    text="$text; at $(size_label "$big") our busbw is $(calc %.2f "$rlo") to $(calc %.2f "$rhi") times PyTorch's: both hand the work to NCCL"
  fi
  if [ -n "$ps" ] && [ -n "$os" ]; then
    num "PyTorch's smallest" "$ps"
    num "our smallest" "$os"
    text="$text. At $(size_label "$small") with $n0 ranks, PyTorch's $(calc %.3f "$ps") against our $(calc %.3f "$os") ms is mostly fixed per-call cost (a Python call and a host synchronisation in its timed region)"
  fi
  text="$text."
  # nccl-tests' published figure at its rank count, NVLS off as ours.
  pw=$(tool value "$pub" --col world_size --where nvls=off --agg first --default "")
  if [ -n "$pw" ]; then
    pb=$(tool value "$pub" --col busbw_gbps --where nvls=off --where world_size="$pw" --agg first)
    pbon=$(tool value "$pub" --col busbw_gbps --where nvls=on --where world_size="$pw" --agg first --default "")
    psrc=$(tool value "$pub" --col source --where nvls=off --agg first)
    pm=$(tool value "$pub" --col machine --where nvls=off --agg first)
    ours_pw=$(ours_at --col busbw_gbps --where world_size="$pw" --where size_mib="$big")
    if [ -n "$ours_pw" ]; then
      num "the published busbw" "$pb"
      num "our busbw with $pw ranks" "$ours_pw"
      text="$text With $pw ranks our $(calc %.0f "$ours_pw") GB/s is $(calc %.0f "100 * $ours_pw / $pb")% of the ~$pb GB/s that $psrc reaches on $pm with NVLink SHARP (NVLS) off, as ours${pbon:+ (~$pbon GB/s with NVLS on, which our shared machines do not allow)}."
    fi
  fi
  printf '%s\n\n' "$text"
fi

# ---- the other collectives (experiments/collectives.cfg), where measured ----
coll="$DATA/collectives.csv"
echo "#### The other collectives"
echo
if has_rows "$coll"; then
  cbig=$(tool value "$coll" --col size_mib --where status=ok --agg max)
  cmach=$(tool distinct "$coll" --cols machine --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
  echo "experiments/collectives.cfg (the collective kind: nccl-tests' sizes and"
  echo "bus bandwidths, outputs checked after timing) at $(size_label "$cbig") a rank${cmach:+ ($cmach)},"
  echo "beside torch.distributed on the same machine (torch_collectives.py); ms, GB/s:"
  echo
  echo "| backend | operation | ranks | median | algbw | busbw | PyTorch median | PyTorch busbw | ours / PyTorch |"
  echo "|---|---|--:|--:|--:|--:|--:|--:|--:|"
  cslow=0 ccmp=0
  cratios=""
  tool distinct "$coll" --cols backend,op,world_size,machine,time_ms_median,algbw_gbps,busbw_gbps,utc \
      --sep '|' --where status=ok --where size_mib="$cbig" --sort backend,op,world_size,-utc |
    awk -F'|' 'NF && !seen[$1 "|" $2 "|" $3]++' > "$REPORT_TMP/collectives.rows"
  while IFS='|' read -r b op w m t a bb _; do
    pt=$(tool value "$anchor_csv" --col time_ms_median --where status=ok --where op="$op" \
         --where world_size="$w" --where size_mib="$cbig" --where machine="$m" \
         --sort -utc --agg first --default "")
    pb=$(tool value "$anchor_csv" --col busbw_gbps --where status=ok --where op="$op" \
         --where world_size="$w" --where size_mib="$cbig" --where machine="$m" \
         --sort -utc --agg first --default "")
    if [ "$b" = nccl ] && [ -n "$pt" ]; then
      num "PyTorch's $op median" "$pt"
      pcells="$(calc %.3f "$pt") | $(calc %.1f "$pb") | $(calc %.2f "$t / $pt") |"
      ccmp=$((ccmp + 1))
      ! is_true "$t > $pt" || cslow=$((cslow + 1))
      cratios="$cratios$(calc %.4f "$t / $pt")
"
    else
      pcells="- | - | - |"
    fi
    echo "| $(pretty_backend "$b") | $op | $w | $(calc %.3f "$t") | $(calc %.1f "$a") | $(calc %.1f "$bb") | $pcells"
  done < "$REPORT_TMP/collectives.rows"
  echo
  if [ "$ccmp" -gt 0 ]; then
    rlo=$(printf '%s' "$cratios" | sort -n | head -n 1)
    rhi=$(printf '%s' "$cratios" | sort -n | tail -n 1)
    echo "Ours is slower at $cslow of $ccmp pairs, at $(calc %.2f "$rlo") to $(calc %.2f "$rhi") times"
    echo "PyTorch's median: both run NCCL's kernels."
  else
    echo "PyTorch is not yet measured there."
    todo "collectives_torch.csv on the machine of collectives.csv (\`torchrun --nproc_per_node=N reports/anchors/torch_collectives.py\`)"
  fi
  echo
else
  # not for want of GPUs (the NCCL rows above had them): the sweep has
  # not been run; the GPUs its largest job needs, from its dry run
  cw=$(sweep_dry_run "$coll" | sed -n 's/^\[[0-9]*\/[0-9]*\] .*world_size=\([0-9][0-9]*\).*/\1/p' | sort -n | tail -n 1)
  echo "experiments/collectives.cfg times all-gather, reduce-scatter, broadcast"
  echo "and all-to-all the same way; it has not been run yet (there is no"
  echo "collectives.csv): \`./runner experiments/collectives.cfg\` measures it${cw:+ on a machine of $cw GPUs}."
  echo
  todo "collectives.csv (\`./runner experiments/collectives.cfg\`${cw:+ on $cw GPUs})"
fi
