#!/bin/sh
# Writeup problem nsys_profile (a)-(e): where the LM's GPU time goes,
# kernel by kernel. Two sources. Every lm job runs one extra, untimed step
# with each operation bracketed by CUDA events (eng_profile,
# kernels/kernels.h) and writes the milliseconds per kernel family
# (matmul, softmax, rmsnorm, ...; kernels/ops.def names each operation's
# family) into its row's message: $DATA/benchmarking_script.csv holds
# forward, forward_backward and train_step rows at every size, context
# 128..1024, fp32 and bf16. Where measured, the kernel-level profile ($CSV:
# experiments/nsys_profile.cfg, kernel_profile) adds each kernel's calls
# and GPU time from CUPTI (its NAME.samples.jsonl), and Nsight Compute's
# launches of the same jobs check it ($DATA/nsys_profile_check.csv against
# reports/anchors/ncu_kernels.csv). Environment as for every section
# (mkreport.sh). mkreport.sh prints the problem's heading; this prints its
# parts.
set -eu
. "$REPORT_LIB"

renders nsys_profile
src="$DATA/benchmarking_script.csv"
require_rows "$src" benchmarking_script "on a GPU"
kp="${CSV:-$DATA/nsys_profile.csv}"

# wrap: stdin as a paragraph of the writeup's width.
wrap() { fold -s -w 76 | sed 's/ *$//'; }
# shape SIZE: "d_model d_ff layers heads" as the runner builds SIZE
# (model/config.c's table, the handout's Table 1; section 1.1.1 (a) quotes
# it), "" for a size not there: read, not typed, so that the FLOPs below
# follow the model the rows ran.
cfgc="$REPORTS/../model/config.c"
shape() {
  [ -f "$cfgc" ] || return 0
  sed -n "s/^ *{\"$1\", *[0-9]*, *\([0-9]*\), *\([0-9]*\), *\([0-9]*\), *\([0-9]*\)}.*/\1 \2 \3 \4/p" "$cfgc" | head -n 1
}
# dims SIZE: D F L H, SIZE's shape, where it gives the parameter count of
# SIZE's rows; fails otherwise (no shape, or one that is not the model the
# rows ran), so that no FLOPs are counted for the wrong model.
dims() {
  _dsh=$(shape "$1")
  [ -n "$_dsh" ] || return 1
  _dp=$(tool value "$src" --agg first --default "" --where status=ok --where size="$1" --col params) || exit 1
  [ -n "$_dp" ] || return 1
  # shellcheck disable=SC2086 # one value a word
  set -- $_dsh
  D=$1 F=$2 L=$3 H=$4
  [ "$(calc %.0f "2 * $vocab * $D + $L * (4 * $D * $D + 3 * $D * $F + 2 * $D) + $D")" = "$(calc %.0f "$_dp")" ]
}
# v SIZE CTX PREC MODE COL: the latest ok row's value, or "".
v() {
  tool value "$src" --sort -utc --agg first --default "" --where status=ok --where size="$1" \
    --where context="$2" --where precision="$3" --where mode="$4" --col "$5"
}
sizes=$(tool distinct "$src" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2)
ctxs=$(tool distinct "$src" --cols context --where status=ok --sort context)
cn=$(printf '%s\n' "$ctxs" | tail -n 1)
# (c) to (e) read one context: 512 where measured, else the longest
case " $(echo $ctxs) " in *" 512 "*) cm=512 ;; *) cm=$cn ;; esac
vocab=$(tool value "$src" --agg first --where status=ok --col vocab)
batch=$(tool value "$src" --agg first --where status=ok --col batch)
gpus=$(tool distinct "$src" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
on_gpu "$src"
# (a) to (d) read every job's latest ok row at once (v's row):
# size|context|precision|mode|fwd_ms_mean|message
rows="$REPORT_TMP/nsys_rows"
tool select "$src" --where status=ok --sort -utc --first-of size,context,precision,mode \
  --cols size,context,precision,mode,fwd_ms_mean,message --sep '|' > "$rows"
aux="$REPORT_TMP/nsys_aux"
# walk PROGRAM: run PROGRAM's END over those rows, with ms(S, C, P, MODE)
# and msg(...) (v's fwd_ms_mean and message, "" where no row), fam_msg(M)
# (M is a family breakdown), the lists sz[1..nsz], cx[1..ncx] and pr[1..2]
# (fp32 bf16), cm, the family helpers, and a file aux (emptied first) for
# what a part keeps besides its output.
walk() {
  : > "$aux"
  awk -F'|' -v aux="$aux" -v sizes="$sizes" -v ctxs="$ctxs" -v cm="$cm" -v me="${0##*/}" "$AWK_FAMILIES"'
    function key(s, c, p, mo) { return s SUBSEP c SUBSEP p SUBSEP mo }
    function ms(s, c, p, mo) { return W[key(s, c, p, mo)] }
    function msg(s, c, p, mo) { return M[key(s, c, p, mo)] }
    function fam_msg(m) { return index(m, "ms per step by kernel family: ") == 1 }
    BEGIN { nsz = split(sizes, sz, " "); ncx = split(ctxs, cx, " "); split("fp32 bf16", pr, " ") }
    { k = key($1, $2, $3, $4); W[k] = $5; m = $6
      for (i = 7; i <= NF; i++) m = m "|" $i
      M[k] = m }
    '"$1" "$rows"
}
# The kernel-level profile's entries in a samples line, '"kernel|PASS|RANGE|
# NAME": [CALLS, MS]' each, for an awk that prepends "$AWK_KERNELS": with
# kline set to the line, each kern() moves its next entry into kpass,
# krange, kname, kcalls and kms (0 after the last).
AWK_KERNELS='
function kern(   t, a) {
  if (!match(kline, /"kernel\|[^|"]*\|[^|"]*\|[^"]*": \[[0-9]+, [0-9.e+-]+\]/)) return 0
  t = substr(kline, RSTART + 8, RLENGTH - 8); kline = substr(kline, RSTART + RLENGTH)
  kpass = t; sub(/\|.*/, "", kpass); t = substr(t, length(kpass) + 2)
  krange = t; sub(/\|.*/, "", krange); t = substr(t, length(krange) + 2)
  kname = t; sub(/": \[[^[]*$/, "", kname)
  sub(/.*\[/, "", t); split(t, a, /[], ]+/); kcalls = a[1]; kms = a[2]
  return 1
}
'

cat <<TEXT
Every \`lm\` row also runs one untimed step with CUDA events around each
operation, summed per kernel family (kernels/ops.def; \`matmul\`: every
cuBLAS product). Rows: benchmarking_script's ($gpus), every size, context
{$(echo $ctxs | tr ' ' ',')}.

TEXT

# ncu_check: our profile (nsys_profile_check's train step) against Nsight
# Compute's launches of the same jobs (reports/anchors/ncu_kernels.csv, the
# same GPU): names matched as written, else by function name alone (the
# last :: part before any <, where unique on both sides: demanglers differ
# on inline namespaces; ours write bool template arguments as words).
ncu_check() {
  _nk="$ANCHORS/ncu_kernels.csv" _nc="$DATA/nsys_profile_check.csv"
  { [ -f "$_nk" ] && has_rows "$_nc" && [ -f "${_nc%.csv}.samples.jsonl" ]; } || {
    echo "Nsight Systems is not on our GPU machines; Nsight Compute has not yet"
    echo "checked this profile (reports/anchors/ncu_kernels.sh)."
    return 0; }
  _ng=$(gpu_of "$_nc")
  _nr=$(tool select "$_nk" --where gpu="$_ng" --sort -utc --first-of size,kernel \
          --cols size,kernel,launches,ms --sep '|')
  # a line a size Nsight Compute measured: "SIZE OURS MATCHED RATIO SAME
  # THEIR_MS OUR_MS EXTRA", RATIO its launches of a kernel over ours (SAME 1
  # when every matched kernel's is RATIO), EXTRA its kernels that are not
  # ours ("-" for none)
  tagged n "$_nr" | awk -F'|' "$AWK_KERNELS"'
    function base(k,   b) { b = k; sub(/<.*/, "", b); sub(/.*::/, "", b); return b }
    FILENAME == "-" { nl[$2, $3] = $4; nm[$2, $3] = $5; nk[$2] = nk[$2] SUBSEP $3; next }
    { if (!match($0, /"size": "[^"]*"/)) next
      sz = substr($0, RSTART + 9, RLENGTH - 10); kline = $0
      while (kern()) {
        if (kpass != "train_step") continue
        k = kname; gsub(/true>/, "1>", k); gsub(/true,/, "1,", k); gsub(/false>/, "0>", k); gsub(/false,/, "0,", k)
        if (!((FNR, k) in oc)) ok[FNR] = ok[FNR] SUBSEP k
        oc[FNR, k] += kcalls; om[FNR, k] += kms
      }
      # a job measured again: its latest line
      if (!(sz in last)) order[++ns] = sz
      last[sz] = FNR }
    END {
      for (i = 1; i <= ns; i++) {
        sz = order[i]; ln = last[sz]
        n = split(substr(ok[ln], 2), ours, SUBSEP); m = split(substr(nk[sz], 2), theirs, SUBSEP)
        if (!m) continue
        delete used; delete bcount_o; delete bcount_n; delete bname
        for (j = 1; j <= n; j++) bcount_o[base(ours[j])]++
        for (j = 1; j <= m; j++) { bcount_n[base(theirs[j])]++; bname[base(theirs[j])] = theirs[j] }
        matched = 0; r = ""; same = 1; tm = to = 0
        for (j = 1; j <= n; j++) {
          k = ours[j]; b = base(k); q = ""
          if ((sz, k) in nl) q = k
          else if (bcount_o[b] == 1 && bcount_n[b] == 1 && !((ln, bname[b]) in oc)) q = bname[b]
          if (q == "") continue
          matched++; used[q] = 1; x = nl[sz, q] / oc[ln, k]
          if (r == "") r = x; else if (x != r) same = 0
          tm += nm[sz, q]; to += om[ln, k]
        }
        extra = ""
        for (j = 1; j <= m; j++) if (!(theirs[j] in used)) extra = extra (extra == "" ? "" : ", ") base(theirs[j])
        printf "%s %d %d %s %d %.4f %.4f %s\n", sz, n, matched, r, same, tm, to, (extra == "" ? "-" : extra)
      }
    }' - "${_nc%.csv}.samples.jsonl" > "$REPORT_TMP/ncu_check"
  [ -s "$REPORT_TMP/ncu_check" ] || {
    echo "Nsight Compute has not yet checked this profile on the $(gpu_kind "$_ng") (reports/anchors/ncu_kernels.sh)."
    todo "Nsight Compute's check of the kernel profile on the $(gpu_kind "$_ng") (reports/anchors/ncu_kernels.sh)"
    return 0; }
  # Nsight Compute's run has no kernel profile, so its steps are the job's
  # warm-up and timed ones plus the event-bracketed one; ours records one.
  # _rs: each size's RATIO, _run: every RATIO is its run's step count, _x:
  # every size's EXTRA, once each
  _w=""; _t=""; _rs=""; _x=""; _bad=""; _run=1
  while read -r _s _n _m _rr _same _tm _to _ex; do
    _w="$_w${_w:+, }$_n at $_s"
    _t="$_t${_t:+ and }$(calc %.2f "$_tm / $_rr / $_to")x ($_s)"
    [ "$_m" = "$_n" ] && [ "$_same" = 1 ] || _bad=1
    _rr=$(calc %.0f "$_rr")
    _rs="$_rs${_rs:+, }$_rr ($_s)"
    _ws=$(tool value "$_nc" --sort -utc --agg first --default "" --where status=ok --where size="$_s" --col warmup)
    _ss=$(tool value "$_nc" --sort -utc --agg first --default "" --where status=ok --where size="$_s" --col steps)
    { [ -n "$_ws" ] && [ -n "$_ss" ] && [ "$_rr" = "$((_ws + _ss + 1))" ]; } || _run=""
    [ "$_ex" = - ] || case ", $_x, " in *", $_ex, "*) ;; *) _x="$_x${_x:+, }$_ex" ;; esac
  done < "$REPORT_TMP/ncu_check"
  # one RATIO for every size: say it once
  _r=$(printf '%s\n' "$_rs" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort -u)
  case $_r in *"
"*) _r="" ;; esac
  if [ -n "$_r" ] && [ -n "$_run" ]; then
    _rw="$_r times as often as in our profiled step, once for each step of its $_r-step run"
  elif [ -n "$_r" ]; then
    _rw="$_r times as often as our one profiled step"
  elif [ -n "$_run" ]; then
    _rw="once for each step of its run ($_rs steps) where ours profiles one"
  else
    _rw="$_rs times as often as our one profiled step"
  fi
  # its kernels outside our step, in words where we know them
  case $_x in
    "") ;;
    init_normal_k) _x=", plus the weights' initialisation" ;;
    *) _x=", plus $_x" ;;
  esac
  if [ -n "$_bad" ]; then
    echo "Nsight Compute on these jobs (reports/anchors/ncu_kernels.sh) **does not launch each of our step's kernels at one count**: see reports/anchors/ncu_kernels.csv."
  else
    echo "Nsight Systems is not on our GPU machines; Nsight Compute on the same jobs (reports/anchors/ncu_kernels.sh) finds every kernel of our training step ($_w), each launched $_rw$_x. Its GPU time for them is $_t ours: the two kernel summaries agree."
  fi | wrap
}
# ---- the kernel-level profile (lm kernel_profile: CUPTI), where measured -----
if has_rows "$kp"; then
  cat <<'TEXT'
#### The kernel-level profile

experiments/nsys_profile.cfg records one extra forward and training step
a job, each kernel's calls and GPU time from CUPTI (Nsight Systems' own
source), within NVTX-style ranges.
TEXT
  ncu_check
  o=$(from_other_gpu "$kp")
  echo
  # a plain string: a note with parentheses inside ${o:+...} defeats shellcheck
  on=""
  [ -z "$o" ] || on=" ($o; (a) to (e) read benchmarking_script's rows, from the $GPU_KIND)"
  echo "Per row$on: kernel GPU time (ms) and GEMM share (0 to 1); the forward's softmax and attention products (QK^T, scores x V):" | wrap
  echo
  tool table "$kp" --cols size,context,precision,fwd_ms_mean,kp_fwd_ms,kp_fwd_gemm_share,kp_step_ms,kp_step_gemm_share,kp_softmax_ms,kp_attn_matmul_ms \
    --head "size,context,precision,forward (wall ms),forward kernels (ms),GEMM share forward,training step kernels (ms),GEMM share step,softmax (ms),attention products (ms)" \
    --where status=ok --fmt fwd_ms_mean=%.2f --fmt kp_fwd_ms=%.2f --fmt kp_fwd_gemm_share=%.2f \
    --fmt kp_step_ms=%.2f --fmt kp_step_gemm_share=%.2f --fmt kp_softmax_ms=%.3f --fmt kp_attn_matmul_ms=%.3f
  echo
  # the GPU's idle time between kernels (empty for rows of a job without
  # the kernel profile)
  idle=$(tool select "$kp" --cols size,context,kp_fwd_idle_ms,kp_fwd_span_ms,kp_step_idle_ms,kp_step_span_ms \
           --where status=ok | tail -n +2 | awk -F, '$3 != "" && $5 != ""')
  if [ -n "$idle" ]; then
    echo "Idle GPU time within the kernels' span (launch gaps), ms:"
    echo
    echo "| size | context | forward: idle of span | training step: idle of span |"
    echo "|---|--:|--:|--:|"
    printf '%s\n' "$idle" | awk -F, '{ printf "| %s | %s | %.2f of %.2f | %.2f of %.2f |\n", $1, $2, $3, $4, $5, $6 }'
    echo
  fi
else
  echo "**Missing:** per-kernel names, launch counts and NVTX-range filtering"
  echo "come from \`./runner experiments/nsys_profile.cfg\` (the lm kind's CUPTI"
  echo "profile), not yet run on a GPU."
  echo
fi

# ---- (a) ---------------------------------------------------------------------
echo "### (a) Total forward time against the wall clock"
echo
echo "Forward pass, ms: wall clock and the profiled step's families summed."
echo
echo "| size | context | fp32 wall clock | fp32 sum of families | bf16 wall clock | bf16 sum of families |"
echo "|---|--:|--:|--:|--:|--:|"
# aux: "PREC DIFF% SIZE CONTEXT" a row, the families' sum against the wall clock
walk 'END {
  for (i = 1; i <= nsz; i++) for (j = 1; j <= ncx; j++) {
    s = sz[i]; c = cx[j]; line = "| " s " | " c; any = 0
    for (q = 1; q <= 2; q++) {
      p = pr[q]; w = ms(s, c, p, "forward"); m = msg(s, c, p, "forward"); su = ""
      if (fam_msg(m)) { fams(m); su = fsum() }
      if (w != "" && su != "") {
        if (w !~ /^[0-9.eE+-]+$/) {   # num
          printf "%s: : %s %s %s forward is \"%s\", not a number\n", me, s, c, p, w > "/dev/stderr"
          exit 1 }
        printf "%s %.2f %s %s\n", p, 100 * (su - w) / w, s, c > aux
        line = line sprintf(" | %.2f | %.2f", w, su); any = 1
      } else line = line " | " (w == "" ? "-" : w) " | -"
    }
    if (any) print line " |"
  } }'
echo
failed_jobs "$src" size,context,precision,mode,status,message "size,context,precision,mode,status,message"
rng() { # PREC: "lo hi median" of the sum-vs-wall differences (%)
  awk -v p="$1" '$1 == p { print $2 }' "$aux" | sort -g |
    awk '{ a[NR] = $1 } END { if (NR) printf "%.1f %.1f %.1f\n", a[1], a[NR],
      (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
}
# each precision's clause, "LO% to HI% in PREC (median MD%)"
by=""
for p in fp32 bf16; do
  r=$(rng $p); [ -n "$r" ] || continue
  set -- $r
  by="$by${by:+ and }$(span_to "$1%" "$2%") in $p (median $3%)"
done
if [ -n "$by" ]; then
  set -- $(sort -k2,2gr "$aux" | head -n 1)
  xw="$3 $1 at context $4"
  # the shortest and longest forward passes: "MS SIZE PRECISION CONTEXT"
  fx=$(tool select "$src" --where status=ok --where mode=forward --sort -utc \
         --first-of size,context,precision --cols fwd_ms_mean,size,precision,context --sep ' ' | sort -g)
  set -- $(printf '%s\n' "$fx" | head -n 1); flo="$(calc %.1f "$1") ms ($2, $3, context $4)"
  set -- $(printf '%s\n' "$fx" | tail -n 1); fhi="$(calc %.0f "$1") ms ($2, $3, context $4)"
  wrap <<TEXT
**Answer.** A forward pass takes $flo to $fhi. Summed, its operations' GPU time, each bracketed by a pair of events, differs from the wall clock by $by: close on long passes, furthest on $xw, where the events' overhead weighs most against short kernels.
TEXT
  echo
fi

# ---- (b) ---------------------------------------------------------------------
echo "### (b) The kernel with the most GPU time"
echo
# the top family in each mode, over every row that has the breakdown:
# "rows rows_matmul_tops lo_share hi_share" (the share of matmul, %) a mode
set -- $(walk 'END {
  split("forward forward_backward train_step", md, " ")
  for (x = 1; x <= 3; x++) {
    n = t = 0; lo = hi = ""
    for (i = 1; i <= nsz; i++) for (j = 1; j <= ncx; j++) for (q = 1; q <= 2; q++) {
      m = msg(sz[i], cx[j], pr[q], md[x])
      if (!fam_msg(m)) continue
      fams(m); top = ""
      for (f = 1; f <= nfam; f++) if (f == 1 || fx[f] > tm) { tm = fx[f]; top = fn[f] }
      sh = sprintf("%.2f", 100 * fv["matmul"] / fsum()) + 0
      n++; if (top == "matmul") t++
      if (n == 1 || sh < lo) lo = sh; if (n == 1 || sh > hi) hi = sh
    }
    printf "%d %d %.0f %.0f\n", n, t, lo, hi
  } }')
fn=$1 ft=$2 flo=$3 fhi=$4 bn=$5 bt=$6 blo=$7 bhi=$8 tn=$9 tt=${10} tlo=${11} thi=${12}
calls=""
for s in $sizes; do
  sh=$(shape "$s"); [ -n "$sh" ] || continue
  set -- $sh
  calls="$calls${calls:+, }$s $((9 * $3 + 1))"
done
# The handout asks for one kernel, by name, so from the kernel-level
# profile's samples of each of its rows (the line of the row's utc): the
# top kernel of the forward pass, and of forward + backward (the training
# step less the optimizer's range, AdamW's kernels). A line
# "size|ctx|prec|FWD|calls|ms|FB|calls|ms|the forward's top's rank in FB|its ms there"
kl=""
kj="${kp%.csv}.samples.jsonl"
if has_rows "$kp" && [ -f "$kj" ]; then
  kl=$(tool select "$kp" --where status=ok --cols size,context,precision,utc --sep '|' |
  while IFS='|' read -r ks kc kq ku; do
    awk -v u="$ku" -v pre="$ks|$kc|$kq" "$AWK_KERNELS"'
      index($0, "\"utc\": \"" u "\"") {
        kline = $0; delete c; delete m; delete nm; n["forward"] = n["train_step"] = 0
        while (kern()) {
          if (kpass == "train_step" && krange == "optimizer") continue
          if (!((kpass, kname) in m)) nm[kpass, ++n[kpass]] = kname
          c[kpass, kname] += kcalls; m[kpass, kname] += kms
        }
        found = 1
      }
      function top(ps,   i, b) { b = ""; for (i = 1; i <= n[ps]; i++) if (b == "" || m[ps, nm[ps, i]] > m[ps, b]) b = nm[ps, i]; return b }
      END {
        if (!found) exit
        f = top("forward"); g = top("train_step")
        if (f == "" || g == "") exit
        r = 1; for (i = 1; i <= n["train_step"]; i++) if (m["train_step", nm["train_step", i]] > m["train_step", f]) r++
        printf "%s|%s|%d|%.2f|%s|%d|%.2f|%d|%.2f\n", pre, f, c["forward", f], m["forward", f],
          g, c["train_step", g], m["train_step", g], r, m["train_step", f]
      }' "$kj"
  done)
fi
if [ -n "$kl" ]; then
  echo "Top kernel by GPU time in one forward pass and in forward + backward"
  echo "(the training step less AdamW):"
  echo
  echo "| size | context | precision | forward: top kernel | calls | ms | forward + backward: top kernel | calls | ms |"
  echo "|---|--:|---|---|--:|--:|---|--:|--:|"
  printf '%s\n' "$kl" | awk -F'|' '{ printf "| %s | %s | %s | `%s` | %s | %s | `%s` | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9 }'
  echo
  # the answer: same kernel or not, size by size, and whether they are all
  # products (GEMM kernels), as the families below say of every row
  printf '%s\n' "$kl" | awk -F'|' '
    function ord(r) { return r == 1 ? "first" : r == 2 ? "second" : r == 3 ? "third" : r "th" }
    function at() { return n == 1 ? "at " nsz : n == 2 ? "at either size" : "at any profiled size" }
    { n++; nsz = nsz (n > 1 ? " and " : "") $1
      fc = fc (n > 1 ? " and " : "") $5 " (" $1 ")"
      if (n > 1 && $4 != f1) fdiff = 1; f1 = $4
      if (tolower($4) !~ /gemm/ || tolower($7) !~ /gemm/) notg = 1
      if ($4 == $7) { same++; sl = sl (sl ? " and " : "") $1 }
      else dl = dl (dl ? " and " : "") ord($10) " at " $1 " (" $11 " against " $9 " ms)" }
    END {
      printf "**Answer.** The top forward kernel is %s%s, invoked %s times a forward pass. ",
        (notg ? "the one named in the table" : "a matrix-product (GEMM) kernel"),
        (n > 1 && !fdiff ? ", the same one at " (n == 2 ? "both sizes" : "every profiled size") : ""), fc
      if (same == n) printf "It also leads forward + backward %s.", (n == 2 ? "at both sizes" : at())
      else if (!same) printf "It does not lead forward + backward %s: another%s kernel does, the forward\047s top kernel coming %s.", at(), (notg ? "" : " GEMM"), dl
      else printf "It also leads forward + backward at %s, not elsewhere: it comes %s.", sl, dl
      print "" }' | wrap
  echo
fi
# "N of M MODE (LO% to HI%)" for each mode with rows, joined "A, B and C"
tops=$(for m in "$ft $fn $flo $fhi forward rows" "$bt $bn $blo $bhi forward + backward" \
                "$tt $tn $tlo $thi training steps"; do
         set -- $m
         [ "$2" -gt 0 ] || continue
         t="$1 of $2" r=$(span_to "$3%" "$4%"); shift 4
         echo "$t $* ($r)"
       done | and_list)
lead="**Answer.** The"
[ -z "$kl" ] || lead="Over every size and context, the"
wrap <<TEXT
$lead products (\`matmul\`) take the most GPU time in $tops. The forward makes 9 cuBLAS calls a layer plus the head ($calls)${kl:+, spread over the kernels above}.
TEXT
echo

# ---- (c) ---------------------------------------------------------------------
echo "### (c) Other kernels in the forward pass"
echo
echo "Forward, context $cm: the other families, ms, largest first."
echo
echo "| size | precision | forward (ms) | matmul share | the other families (ms) |"
echo "|---|---|--:|--:|---|"
# each row: the other families largest first (ties by "name ms"); aux: the
# four with the most summed share over these rows, then the range of the
# others' share (100 - matmul's, %) in fp32 and in bf16 ("" without rows)
walk 'function rg(k) { return nr[k] ? (lo[k] == hi[k] ? lo[k] "%" : sprintf("%s%% to %s%%", lo[k], hi[k])) : "" }
  END {
  for (q = 1; q <= 2; q++) for (i = 1; i <= nsz; i++) {
    s = sz[i]; p = pr[q]; m = msg(s, cm, p, "forward")
    if (!fam_msg(m)) continue
    fams(m); su = fsum(); share = sprintf("%.0f", 100 * fv["matmul"] / su) + 0
    k = 0
    for (f = 1; f <= nfam; f++) if (fn[f] != "matmul") {
      # insertion: a value down the list, ties by the line
      for (g = ++k; g > 1; g--) {
        o = ord[g - 1]
        if (fx[o] > fx[f] || (fx[o] == fx[f] && fn[o] " " fx[o] < fn[f] " " fx[f])) break
        ord[g] = o
      }
      ord[g] = f
      tot[fn[f]] += sprintf("%.6g", fx[f] / su)
    }
    rest = ""
    for (g = 1; g <= k; g++) rest = rest (g > 1 ? "; " : "") fn[ord[g]] " " fx[ord[g]]
    o = 100 - share; nr[p]++
    if (nr[p] == 1 || o < lo[p]) lo[p] = o; if (nr[p] == 1 || o > hi[p]) hi[p] = o
    printf "| %s | %s | %.1f | %d%% | %s |\n", s, p, su, share, rest
  }
  if (!nr["fp32"] && !nr["bf16"]) exit
  for (n in tot) { v = sprintf("%.6g", tot[n]) + 0; l = sprintf("%.6g", tot[n]) " " n
    for (g = 1; g <= 4 && g <= nt; g++) if (v > tv[g] || (v == tv[g] && l > tl[g])) break
    if (g > 4) continue
    for (h = (nt < 4 ? ++nt : 4); h > g; h--) { tv[h] = tv[h - 1]; tl[h] = tl[h - 1]; tn[h] = tn[h - 1] }
    tv[g] = v; tl[g] = l; tn[g] = n }
  for (g = 1; g <= nt; g++) r = r (g > 1 ? ", " : "") tn[g]
  print r > aux; print rg("fp32") > aux; print rg("bf16") > aux
  }'
echo
# The kernel-level profile's GEMM share of the same forward differs from
# this table's matmul share: one sentence on why (event brackets hold launch
# gaps too), from the first profiled row that this table has too.
if has_rows "$kp"; then
  tool select "$kp" --where status=ok --where context="$cm" --cols size,precision,kp_fwd_ms,kp_fwd_gemm_share --sep '|' |
  while IFS='|' read -r gs gp gk gg; do
    gm=$(v "$gs" "$cm" "$gp" forward message)
    gmm=$(fam "$gm" matmul)
    if [ -z "$gmm" ] || [ -z "$gk" ] || [ -z "$gg" ]; then continue; fi
    num "$gs $gp kp_fwd_ms" "$gk"; num "$gs $gp kp_fwd_gemm_share" "$gg"; num "$gs $gp matmul" "$gmm"
    gsu=$(families "$gm" | awk '{ t += $2 } END { printf "%.4f", t }')
    kg=$(calc %.4f "$gg * $gk"); ko=$(calc %.4f "(1 - $gg) * $gk")
    eo=$(calc %.4f "$gsu - $gmm")
    echo "The kernel-level profile puts $(calc %.2f "$gg") of $gs's $gp forward in GEMMs against this table's $(calc %.0f "100 * $gmm / $gsu")%: it counts kernels' own time, while an event bracket also holds launch gaps, adding $(calc %.0f "100 * ($gmm / $kg - 1)")% to matmul's time but $(calc %.0f "100 * ($eo / $ko - 1)")% to the short other operations'."
    echo
    break
  done | wrap
fi
if [ -s "$aux" ]; then
  { read -r rank; read -r lohi32; read -r lohi16; } < "$aux"
  if [ -n "$lohi32" ] && [ -n "$lohi16" ]; then
    share="take $lohi32 of the fp32 forward and $lohi16 of the bf16 one: 16-bit inputs shrink the products, not these fp32, memory-bound passes"
  else
    share="take ${lohi32:-$lohi16} of the ${lohi32:+fp32}${lohi16:+bf16} forward"
  fi
  wrap <<TEXT
**Answer.** After the products, by summed share: $rank (\`rope+heads\`: RoPE and the head split and merge). All but the products $share.
TEXT
  echo
fi

# ---- (d) ---------------------------------------------------------------------
echo "### (d) Matrix products in a training step against inference"
echo
echo "Context $cm, each family's share of the time, as in (c):"
echo
echo "| size | precision | forward: matmul | train step: matmul | train step: adamw | train step: everything else |"
echo "|---|---|--:|--:|--:|--:|"
# aux: a line a precision with rows, fp32 first: "PREC DL DH AL AS AH HS",
# the change of the matmul share from the forward to the step (points,
# lowest and highest over the sizes), and AdamW's share of the step (%),
# lowest and highest, each with its size
walk 'END {
  for (q = 1; q <= 2; q++) for (i = 1; i <= nsz; i++) {
    s = sz[i]; p = pr[q]; mf = msg(s, cm, p, "forward"); mt = msg(s, cm, p, "train_step")
    if (!fam_msg(mf) || !fam_msg(mt)) continue
    fams(mf); a = sprintf("%.0f", 100 * fv["matmul"] / fsum()) + 0
    fams(mt); st = fsum(); b = sprintf("%.0f", 100 * fv["matmul"] / st) + 0
    c = sprintf("%.0f", 100 * ("adamw" in fv ? fv["adamw"] : 0) / st) + 0
    printf "| %s | %s | %d%% | %d%% | %d%% | %d%% |\n", s, p, a, b, c, 100 - b - c
    d = b - a; first = !nr[p]++
    if (first || d < dl[p]) dl[p] = d; if (first || d > dh[p]) dh[p] = d
    if (first || c < al[p]) { al[p] = c; as[p] = s }
    if (first || c > ah[p]) { ah[p] = c; hs[p] = s }
  }
  for (q = 1; q <= 2; q++) if (nr[p = pr[q]])
    printf "%s %d %d %d %s %d %s\n", p, dl[p], dh[p], al[p], as[p], ah[p], hs[p] > aux
  }'
echo
if [ -s "$aux" ]; then
  # the sentence's clauses for each precision measured, fp32 first
  mv="" aw=""
  rg() { if [ "$1" = "$3" ]; then printf '%s%%' "$1"; else printf '%s%% (%s) to %s%% (%s)' "$1" "$2" "$3" "$4"; fi; }
  while read -r dp ddl ddh dal das dah dhs; do
    mv="$mv${mv:+ and }$(span_to "$ddl" "$ddh") points in $dp"
    aw="$aw${aw:+; }$(rg "$dal" "$das" "$dah" "$dhs") of the $dp step"
  done < "$aux"
  wrap <<TEXT
**Answer.** A training step adds backward, mostly products, and AdamW, one memory-bound pass over weights, gradients and both moments: the products' share moves $mv from forward-only, and AdamW takes $aw.
TEXT
  echo
fi

# ---- (e) ---------------------------------------------------------------------
echo "### (e) Softmax against the matrix products"
echo
cat <<TEXT
Forward, fp32. FLOPs per layer from 1.1.1 (a)'s shapes, batch $batch: 2 x
rows x inputs x outputs a linear layer; attention's two products 4 x batch
x context^2 x d_model; softmax about 5 per score, batch x heads x context^2.

TEXT
# Within self-attention, as the handout asks: the softmax kernel against
# the two products, both timed by the kernel-level profile (the families
# below hold every product in one).
ea=""
if has_rows "$kp"; then
  ea=$(tool select "$kp" --where status=ok --where precision=fp32 --cols size,context,kp_softmax_ms,kp_attn_matmul_ms --sep '|' |
  while IFS='|' read -r as ac asm aam; do
    if [ -z "$asm" ] || [ -z "$aam" ]; then continue; fi
    num "$as kp_softmax_ms" "$asm"; num "$as kp_attn_matmul_ms" "$aam"
    dims "$as" || continue
    printf '%s %s %.3f %.3f %.1f %.0f\n' "$as" "$ac" "$asm" "$aam" "$(calc %.4f "$aam / $asm")" \
      "$(calc %.4f "(4 * $batch * $ac * $ac * $D * $L) / (5 * $batch * $H * $ac * $ac * $L)")"
  done)
fi
if [ -n "$ea" ]; then
  echo "Within self-attention (the kernel-level profile):"
  echo
  echo "| size | context | softmax (ms) | the two products (ms) | time products / softmax | FLOPs products / softmax |"
  echo "|---|--:|--:|--:|--:|--:|"
  printf '%s\n' "$ea" | awk '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }'
  echo
  echo "The whole model (event-bracketed families, context $cm):"
  echo
fi
echo "| size | softmax (ms) | matmul (ms) | time matmul / softmax | FLOPs all products / softmax | FLOPs attention products / softmax |"
echo "|---|--:|--:|--:|--:|--:|"
er=""
for s in $sizes; do
  m=$(v "$s" "$cm" fp32 forward message)
  sm=$(fam "$m" softmax); mm=$(fam "$m" matmul)
  [ -n "$sm" ] && [ -n "$mm" ] && dims "$s" || continue
  N=$((batch * cm))
  fl_lin=$(calc %.6e "2 * $N * ($L * (4 * $D * $D + 3 * $D * $F) + $D * $vocab)")
  fl_att=$(calc %.6e "4 * $batch * $cm * $cm * $D * $L")
  fl_sm=$(calc %.6e "5 * $batch * $H * $cm * $cm * $L")
  tr=$(calc %.0f "$mm / $sm"); fa=$(calc %.0f "($fl_lin + $fl_att) / $fl_sm"); fat=$(calc %.0f "$fl_att / $fl_sm")
  echo "| $s | $(calc %.2f "$sm") | $(calc %.1f "$mm") | $tr | $fa | $fat |"
  er="$er$s $tr $fa $fat
"
done
echo
# span COL...: over stdin's lines, "SIZE VALUE..." each, each COL's lowest
# and highest value (the first line's on a tie), then the sizes of the
# first COL's, then the number of lines
span() {
  awk -v cols="$*" 'BEGIN { nc = split(cols, c, " ") }
    { n++; for (i = 1; i <= nc; i++) { x = $(c[i])
        if (n == 1 || x < lo[i]) { lo[i] = x; if (i == 1) sl = $1 }
        if (n == 1 || x > hi[i]) { hi[i] = x; if (i == 1) sh = $1 } } }
    END { for (i = 1; i <= nc; i++) printf "%s %s ", lo[i], hi[i]; print sl, sh, n }'
}
ans=""
if [ -n "$ea" ]; then
  # "TIME_LO TIME_HI FLOP_LO FLOP_HI SIZE_LO SIZE_HI N" over the profiled rows
  # shellcheck disable=SC2046 # one value a word
  set -- $(printf '%s\n' "$ea" | span 5 6)
  if [ "$7" -gt 1 ]; then aw="$1x ($5) to $2x ($6)"; else aw="$1x ($5)"; fi
  fw="$3x"; [ "$3" = "$4" ] || fw="$3x to $4x"
  ans="**Answer.** Within self-attention the two products take $aw softmax's GPU time for $fw its FLOPs: softmax is memory-bound, reading and writing every score for a few FLOPs, while the products reuse each loaded value, so the time gap is a small fraction of the FLOP gap."
fi
if [ -n "$er" ]; then
  # shellcheck disable=SC2046 # one value a word
  set -- $(printf '%s' "$er" | span 2 3 4)
  if [ -n "$ea" ]; then
    ans="$ans Over the whole model: $(span_to "$1" "$2") times the time for $(span_to "$3" "$4") times the FLOPs."
  else
    ans="**Answer.** The products take $(span_to "$1" "$2") times softmax's time while doing $(span_to "$3" "$4") times its FLOPs (attention's two alone: $(span_to "$5" "$6") times): softmax reads and writes every score, a few FLOPs per 8 bytes, where the products reuse each loaded value at a far larger arithmetic rate."
  fi
fi
if [ -n "$ans" ]; then
  printf '%s\n' "$ans" | wrap
  echo
fi
