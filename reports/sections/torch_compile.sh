#!/bin/sh
# Writeup problem torch_compile: (a) attention at pytorch_attention's
# shapes, one row per shape: our materialised attention
# ($DATA/pytorch_attention.csv) and FlashAttention-2
# ($DATA/torch_compile_attention.csv, experiments/
# torch_compile_attention.cfg; read directly, as cuda_graphs.csv is, so
# `make report` never runs that GPU sweep itself: until its rows exist (a)
# says what to run) beside PyTorch's eager, compiled and SDPA attention
# (reports/anchors/torch_attention.csv); (b) the whole model, our
# op-by-op path (one kernel per operation, as PyTorch eager) against the
# fused path, with
# attention materialised or FlashAttention-2, every size, forward,
# forward+backward and the full step, fp32 and bf16, next to PyTorch eager
# (reports/anchors/lm_pytorch.csv) and the strongest PyTorch,
# torch.compile + SDPA + fused AdamW measured side by side
# (reports/anchors/torch_lm.csv); a figure of step time against model
# size per precision and path; where the fused path's time goes, by kernel
# family (each row's message); and CUDA graphs. Reads
# DATA/torch_compile.csv (fused rows), DATA/benchmarking_script.csv
# (op-by-op rows at context 512) and DATA/cuda_graphs.csv. Environment as
# for every section (mkreport.sh): DATA, CSV, OUT, CSVTOOL, GNUPLOT.
# mkreport.sh prints the problem's heading; this prints its parts.
set -eu
. "$REPORT_LIB"


csv="${CSV:-$DATA/torch_compile.csv}"
ref="$DATA/benchmarking_script.csv"
acsv="$DATA/pytorch_attention.csv"
renders torch_compile
require_rows "$csv" torch_compile "on a GPU"

# ---- (a) attention ------------------------------------------------------------
# One row per shape of pytorch_attention, one column per implementation:
# ours materialised (pytorch_attention.csv), ours FlashAttention-2
# (torch_compile_attention.csv), PyTorch eager, compiled and SDPA
# (torch_attention.csv), all at the shape of our rows and on their GPU.
echo "### (a) Attention: eager against compiled, and the fused kernels"
echo
fcsv="$DATA/torch_compile_attention.csv"
frun="\`./runner experiments/torch_compile_attention.cfg\`"
nm=0 nf=0
if [ -f "$acsv" ]; then nm=$(tool count "$acsv" --where status=ok --where impl=materialized); fi
if [ -f "$fcsv" ]; then nf=$(tool count "$fcsv" --where status=ok --where impl=flash); fi
if [ "$nm" -eq 0 ] && [ "$nf" -eq 0 ]; then
  echo "_Our attention rows at these shapes are not yet measured: run \`./runner experiments/pytorch_attention.cfg\` and $frun on a GPU._"
  echo
else
  # The shape every value is read at: the materialised rows' (else flash's).
  if [ "$nm" -gt 0 ]; then sf=$acsv si=materialized; else sf=$fcsv si=flash; fi
  sv() { tool value "$sf" --agg first --where status=ok --where impl=$si --col "$1"; }
  on_gpu "$sf"
  tatt=$(anchor_rows torch_attention)
  ab=$(sv batch); ah=$(sv heads); ap=$(sv precision); ac=$(sv causal)
  at() { # IMPL: the --where list of that impl's ok rows at that shape
    echo "--where status=ok --where impl=$1 --where batch=$ab --where heads=$ah --where precision=$ap --where causal=$ac"
  }
  ourcol() { # COL: the distinct values of COL over our rows at the shape, "a or b"
    { [ "$nm" -eq 0 ] || tool distinct "$acsv" $(at materialized) --cols "$1"
      [ "$nf" -eq 0 ] || tool distinct "$fcsv" $(at flash) --cols "$1"; } |
      sort -u | tr '\n' ';' | sed 's/;$//; s/;/ or /g'
  }
  an=$(ourcol passes); agpu=$(ourcol gpu_name)
  mcol="ours materialised" fcol="ours flash"
  [ "$nm" -gt 0 ] || mcol="ours materialised (not measured)"
  cat <<TEXT
pytorch_attention's shapes (batch $ab, $ah head, $ap, causal $ac), ms per
pass, forward / backward. Ours ($agpu, mean of $an passes): materialised
attention (pytorch_attention.csv), one kernel between two cuBLAS products
already fusing what torch.compile fuses in the handout's module, and
FlashAttention-2 (torch_compile_attention.csv). PyTorch (same GPU,
reports/anchors/torch_attention.csv, do_bench medians): the module eager
and compiled, and SDPA. The ratios are speeds, the other's time over
ours ("compiled x": eager over compiled), of a forward+backward pair timed
as one loop, not of the columns' sum.

TEXT
  if [ "$nf" -gt 0 ]; then
    echo "| d_head | seq | $mcol | $fcol | PyTorch eager | PyTorch compiled | PyTorch SDPA | compiled x | ours materialised, x compiled | ours flash, x SDPA |"
    echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  else
    echo "| d_head | seq | $mcol | PyTorch eager | PyTorch compiled | PyTorch SDPA | compiled x | ours materialised, x compiled |"
    echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
  fi
  shapes() { # COL: its distinct values over our rows at the shape, ascending
    { [ "$nm" -eq 0 ] || tool distinct "$acsv" $(at materialized) --cols "$1"
      [ "$nf" -eq 0 ] || tool distinct "$fcsv" $(at flash) --cols "$1"; } | sort -n -u
  }
  # The rows from one csvtool call a file (each shape's newest ok row),
  # joined by awk; stats: "KEY SPEED D_HEAD SEQ" lines for the answer, a
  # speed being the other's time over the first's (above 1: the first wins).
  aq="--sort -utc --first-of seq,d_head --cols seq,d_head,fwd_ms_per_pass,bwd_ms_per_pass,fwd_bwd_ms_per_pass --sep |"
  mrows="" frows=""
  [ "$nm" -eq 0 ] || [ ! -f "$acsv" ] || mrows=$(tool select "$acsv" $(at materialized) $aq)
  [ ! -f "$fcsv" ] || frows=$(tool select "$fcsv" $(at flash) $aq)
  trows=$(tool select "$tatt" $(at 'eager|materialized|sdpa') --sort -utc --first-of impl,seq,d_head \
    --cols impl,seq,d_head,fwd_ms,bwd_ms,fwd_bwd_ms --sep '|')
  dhs=$(shapes d_head) seqs=$(shapes seq)
  a_stats="$REPORT_TMP/torch_compile.stats"
  { tagged m "$mrows"; tagged l "$frows"; tagged t "$trows"; tagged d "$dhs"; tagged q "$seqs"; } |
    awk -F'|' -v nf="$nf" -v statf="$a_stats" '
    function f3(x) { return x == "" ? "-" : sprintf("%.3f", x) }
    function fb(a, b) { return f3(a) " / " f3(b) }
    function r2(a, b) { return a != "" && b != "" ? sprintf("%.2f", a / b) : "-" }
    $1 == "m" || $1 == "l" { k = $1 "|" $2 "|" $3; f[k] = $4; b[k] = $5; fbk[k] = $6; next }
    $1 == "t" { k = $2 "|" $3 "|" $4; f[k] = $5; b[k] = $6; fbk[k] = $7; next }
    $1 == "d" { dh[++nd] = $2; next }
    $1 == "q" { sq[++nq] = $2; next }
    END {
      for (i = 1; i <= nd; i++) for (j = 1; j <= nq; j++) {
        k = "|" sq[j] "|" dh[i]
        m = "m" k; l = "l" k; e = "eager" k; c = "materialized" k; sd = "sdpa" k
        if (f[m] b[m] f[l] b[l] == "") continue
        cx = r2(fbk[e], fbk[c]); oc = r2(fbk[c], fbk[m]); fs = r2(fbk[sd], fbk[l]); fm = r2(fbk[m], fbk[l])
        # the stats keep the unrounded speed: a shape at 0.997x is a loss
        # though its cell reads 1.00
        if (cx != "-") print "cx", fbk[e] / fbk[c], dh[i], sq[j] > statf
        if (oc != "-") print "oc", fbk[c] / fbk[m], dh[i], sq[j] > statf
        if (fs != "-") print "fs", fbk[sd] / fbk[l], dh[i], sq[j] > statf
        if (fm != "-") print "fm", fbk[m] / fbk[l], dh[i], sq[j] > statf
        if (nf > 0)
          printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", dh[i], sq[j], fb(f[m], b[m]),
            fb(f[l], b[l]), fb(f[e], b[e]), fb(f[c], b[c]), fb(f[sd], b[sd]), cx, oc, fs
        else
          printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", dh[i], sq[j], fb(f[m], b[m]),
            fb(f[e], b[e]), fb(f[c], b[c]), fb(f[sd], b[sd]), cx, oc
      }
    }'
  stats=""
  [ ! -s "$a_stats" ] || stats="$(cat "$a_stats")
"
  echo
  [ "$nm" -gt 0 ] || { echo "_Our materialised rows are not yet measured: run \`./runner experiments/pytorch_attention.cfg\` on a GPU._"; echo; }
  [ "$nf" -gt 0 ] || { echo "_Our FlashAttention-2 rows at these shapes are not yet measured: run $frun on a GPU._"; echo; }
  rng() { # KEY: "N LO HI D_AT_HI SEQ_AT_HI WINS" over the speeds of KEY, or nothing
    printf '%s' "$stats" | awk -v k="$1" '$1 == k { n++; v = $2 + 0
        if (n == 1 || v < lo) lo = v
        if (n == 1 || v > hi) { hi = v; hd = $3; hs = $4 }
        if (v > 1) w++ }
      END { if (n) printf "%d %.6f %.6f %s %s %d\n", n, lo, hi, hd, hs, w }'
  }
  xs() { printf '%sx' "$(factor "$1")"; }   # a speed as written
  ans=""
  set -- $(rng cx)
  if [ $# -eq 6 ]; then
    n=$1 lo=$(xs "$2") hi=$(xs "$3") hd=$4 hs=$5 w=$6
    # the shortest sequence where compiling helps, the longest where it does not
    set -- $(printf '%s' "$stats" | awk '$1 == "cx" { if ($2 > 1) { if (!fm || $4 < fm) fm = $4 } else if ($4 > sm) sm = $4 }
      END { printf "%d %d\n", fm, sm }')
    fm=$1 sm=$2
    where="at $w of the $n shapes" rest="at the others"
    if [ "$sm" -lt "$fm" ]; then where="at every shape with seq $fm or more ($w of $n)" rest="at shorter ones"; fi
    if [ "$w" -eq 0 ]; then
      ans="Compiling PyTorch's attention makes forward + backward slower at every one of the $n shapes ($lo to $hi as fast)."
    elif [ "$w" -eq "$n" ]; then
      ans="Compiling PyTorch's attention makes forward + backward faster at every one of the $n shapes, $lo to $hi as fast (the most at d_head $hd, seq $hs): it fuses the scaling and the softmax into one kernel, so the scores make fewer round trips through memory."
    else
      ans="Compiling PyTorch's attention makes forward + backward faster $where, up to $hi as fast (d_head $hd, seq $hs), and slower $rest, down to $lo: fusing the scaling and the softmax saves round trips of large score matrices, while short passes pay the compiled graph's launch costs."
    fi
  fi
  faster() { # N WINS: at how many of the N shapes ours is the faster
    if [ "$2" -eq 0 ]; then echo "slower at all $1 shapes"
    elif [ "$2" -eq "$1" ]; then echo "faster at all $1 shapes"
    else echo "faster at $2 of the $1 shapes"; fi
  }
  set -- $(rng oc)
  if [ $# -eq 6 ]; then
    ans="$ans Our materialised attention is $(xs "$2") to $(xs "$3") as fast as compiled PyTorch ($(faster "$1" "$6"))."
  fi
  set -- $(rng fs)
  if [ $# -eq 6 ]; then
    f="Our FlashAttention-2 is $(xs "$2") to $(xs "$3") as fast as SDPA ($(faster "$1" "$6"))"
    set -- $(rng fm)
    [ $# -eq 6 ] && f="$f and $(xs "$2") to $(xs "$3") as fast as our materialised attention ($(faster "$1" "$6"))"
    ans="$ans $f."
  fi
  if [ -n "$ans" ]; then
    printf '**Answer.** %s\n' "${ans# }" | fold -s -w 76 | sed 's/ *$//'
    echo
  fi
fi

# ---- (b) the whole model --------------------------------------------------------
echo "### (b) The whole model: op by op against the fused path"
echo
gpus=$(tool distinct "$csv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
on_gpu "$csv"
# The op-by-op rows stand beside the fused ones only from the same GPU.
ref_note=""
o=$(from_other_gpu "$ref")
if [ -n "$o" ]; then
  ref_note="$o, so the op-by-op columns are left empty here."
  ref=""
fi
vals() { # FILE COL [where...]: the distinct values of COL in FILE's ok rows, "a or b"
  f=$1 c=$2; shift 2
  tool distinct "$f" --cols "$c" --where status=ok "$@" | tr '\n' ';' | sed 's/;$//; s/;/ or /g'
}
# Batch and steps as the rows have them (the op-by-op rows' if they differ).
tb=$(vals "$csv" batch --where context=512)
tw=$(vals "$csv" warmup --where context=512)
ts=$(vals "$csv" steps --where context=512)
runs="batch $tb, context 512 ($tw warm-up and $ts timed steps)"
if [ -f "$ref" ]; then
  rb=$(vals "$ref" batch --where context=512 --where fusion=opbyop)
  rw=$(vals "$ref" warmup --where context=512 --where fusion=opbyop)
  rs=$(vals "$ref" steps --where context=512 --where fusion=opbyop)
  [ -z "$rb$rw$rs" ] || [ "$rb|$rw|$rs" = "$tb|$tw|$ts" ] ||
    runs="$runs; the op-by-op rows: batch $rb, $rw warm-up and $rs timed steps"
fi
cat <<TEXT
Our two paths on the same model, $runs. **Op by op** (benchmarking_script's rows) is eager's analogue:
one kernel per operation, fp32 activations, materialised attention.
**Fused** folds the residual add into RMSNorm, q, k, v into one product,
RoPE into the head split and the 16-bit weight copy into AdamW, fuses
SwiGLU and the cross-entropy gradient, keeps activations in the products'
input dtype and recomputes cheap ones in backward; attention materialised
or FlashAttention-2. ms, mean of the timed steps; peak: the engine's
allocation peak in each table's mode.
GPU: $gpus.${ref_note:+ $ref_note}

TEXT
anchor=$(anchor_rows lm_pytorch)
strong=$(anchor_rows torch_lm)
has_anchor "$anchor" || { anchor_missing "eager numbers" are reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv; echo; }
has_anchor "$strong" || { anchor_missing "torch.compile steps" are reports/anchors/torch_lm.py reports/anchors/torch_lm.csv --sizes small,2.7B --precisions bf16,fp32; echo; }
vf() { # FMT FILE SIZE PREC MODE COL [extra where...]
  fm=$1 f=$2 s=$3 p=$4 m=$5 c=$6; shift 6
  [ -f "$f" ] || { printf ''; return; }
  tool value "$f" --sort -utc --agg first --default "" --where status=ok \
    --where size="$s" --where context=512 --where precision="$p" --where mode="$m" \
    "$@" --col "$c" --fmt "$fm"
}
v() { vf %.1f "$@"; }
sizes=$(tool distinct "$csv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2)
# The strongest PyTorch, measured side by side (torch_lm.csv): the
# train step of torch.compile + SDPA + fused AdamW. For the small bf16 step
# that script's H100 rows (no CUDA graphs) are launch-bound;
# reports/anchors/published.csv holds the stronger step measured beside
# ours there, used below where it is faster (its GPU's rows only).
pt_small_bf16=$(published_on torch_compile_small_bf16_step)
sc() { # SIZE PREC COL: torch.compile's train step (context 512), or ""
  pt_compiled "$strong" "$1" 512 "$2" "$3"
}
sc_step() { # SIZE PREC: the strongest PyTorch train step (ms) and where it is from
  t=$(sc "$1" "$2" step_ms_mean); w="torch_lm.csv"
  if [ "$1|$2" = "small|bf16" ] && [ -n "$pt_small_bf16" ] && { [ -z "$t" ] || is_true "$pt_small_bf16 < $t"; }; then
    t=$pt_small_bf16; w="published.csv"
  fi
  [ -z "$t" ] || printf '%s %s' "$(calc %.1f "$t")" "$w"
}
# The three tables, the speed-ups behind the answer ($spd: "MODE PREC X
# SIZE" lines) and the figure's points (fig: "LABEL,PARAMS,MS") from one
# csvtool call a file, joined by awk: the rows v and sc_step read (the
# newest ok row at context 512; PyTorch eager's first at that shape).
tc_spd="$REPORT_TMP/torch_compile.spd" tc_fig="$REPORT_TMP/torch_compile.fig"
ref_rows=""
[ ! -f "$ref" ] || ref_rows=$(tool select "$ref" --where status=ok --where context=512 \
  --where fusion=opbyop --sort -utc --first-of size,precision,mode \
  --cols size,precision,mode,step_ms_mean,engine_peak_mib --sep '|')
fused_rows=$(tool select "$csv" --where status=ok --where context=512 --where fusion=fused \
  --sort -utc --first-of size,precision,mode,attention \
  --cols size,precision,mode,attention,step_ms_mean,engine_peak_mib --sep '|')
eager_rows=$(tool select "$anchor" --where context=512 --where config=reference \
  --first-of size,precision,mode --cols size,precision,mode,time_ms --sep '|')
strong_rows=""
[ ! -f "$strong" ] || strong_rows=$(tool select "$strong" --where status=ok --where context=512 \
  --where 'config=compiled|compiled_cudagraphs' --sort step_ms_median --first-of size,precision \
  --cols size,precision,step_ms_mean,peak_gib --sep '|')
param_rows=$(tool select "$csv" --first-of size --cols size,params --sep '|')
{ tagged r "$ref_rows"; tagged f "$fused_rows"; tagged e "$eager_rows"
  tagged c "$strong_rows"; tagged n "$param_rows"; tagged s "$sizes"; } |
  awk -F'|' -v pub="$pt_small_bf16" -v spdf="$tc_spd" -v figf="$tc_fig" "$AWK_CELLS"'
  function r1(x) { return x == "" ? "" : sprintf("%.1f", x) }  # rounded, "" kept
  function sx(a, b) { return a != "" && b != "" ? sprintf("%.2f", a / b) : "-" }
  function compiled(s, p,   t) { # sc_step: the strongest PyTorch step, %.1f
    t = ct[s "|" p]
    if (s == "small" && p == "bf16" && pub != "" && (t == "" || pub + 0 < t + 0)) t = pub
    return r1(t)
  }
  $1 == "r" { k = $2 "|" $3 "|" $4; rt[k] = r1($5); rp[k] = r1($6); next }
  $1 == "f" { k = $2 "|" $3 "|" $4 "|" $5; ft[k] = r1($6); fpk[k] = r1($7); next }
  $1 == "e" { et[$2 "|" $3 "|" $4] = $5; next }
  $1 == "c" { ct[$2 "|" $3] = $4; cp[$2 "|" $3] = $5; next }
  $1 == "n" { np[$2] = $3; next }
  $1 == "s" { sz[++ns] = $2; next }
  END {
    split("forward forward_backward train_step", modes, " ")
    name["forward"] = "Forward pass"; name["forward_backward"] = "Forward and backward"
    name["train_step"] = "Training step (forward, backward, AdamW)"
    split("fp32 bf16", precs, " ")
    for (mi = 1; mi <= 3; mi++) {
      m = modes[mi]
      printf "#### %s\n\n", name[m]
      # torch_lm.py times whole train steps only: the other two modes have
      # no torch.compile column
      if (m == "train_step") {
        print "| size | precision | op by op | fused, materialised | fused, flash | speed-up (flash) | PyTorch eager | torch.compile (plain or with CUDA graphs, the faster) | peak GiB op by op / fused flash / torch.compile |"
        print "|---|---|--:|--:|--:|--:|--:|--:|---|"
      } else {
        print "| size | precision | op by op | fused, materialised | fused, flash | speed-up (flash) | PyTorch eager | peak GiB op by op / fused flash |"
        print "|---|---|--:|--:|--:|--:|--:|---|"
      }
      for (pi = 1; pi <= 2; pi++) {
        p = precs[pi]
        for (si = 1; si <= ns; si++) {
          s = sz[si]; k = s "|" p "|" m
          o = rt[k]; fm = ft[k "|materialized"]; ff = ft[k "|flash"]
          if (o fm ff == "") continue
          pc = ""; pk = gib(rp[k]) " / " gib(fpk[k "|flash"])
          if (m == "train_step") {
            pc = compiled(s, p); pk = pk " / " d(cp[s "|" p])
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", s, p, d(o), d(fm),
              d(ff), sx(o, ff), d(et[k]), d(pc), pk
          } else
            printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", s, p, d(o), d(fm),
              d(ff), sx(o, ff), d(et[k]), pk
          # the best fused row against op by op
          b = fm == "" ? ff : ff == "" || fm + 0 <= ff + 0 ? fm : ff
          if (o != "" && b != "") printf "%s %s %s %s\n", m, p, sprintf("%.2f", o / b), s > spdf
        }
      }
      print ""
    }
    # the figure: train steps against parameters, per precision and path
    split("opbyop fused+materialized fused+flash eager compiled", paths, " ")
    label["opbyop"] = "ours op by op"; label["fused+materialized"] = "ours fused + materialised attention"
    label["fused+flash"] = "ours fused + flash attention"; label["eager"] = "PyTorch eager"
    label["compiled"] = "PyTorch torch.compile"
    for (pi = 1; pi <= 2; pi++) {
      p = precs[pi]
      for (qi = 1; qi <= 5; qi++) {
        q = paths[qi]
        for (si = 1; si <= ns; si++) {
          s = sz[si]; k = s "|" p "|train_step"
          t = q == "opbyop" ? rt[k] : q == "fused+materialized" ? ft[k "|materialized"] : \
              q == "fused+flash" ? ft[k "|flash"] : q == "eager" ? et[k] : compiled(s, p)
          if (t != "" && np[s] != "") printf "%s: %s,%s,%s\n", p, label[q], np[s], t > figf
        }
      }
    }
  }'
spd=""
[ ! -s "$tc_spd" ] || spd="$(cat "$tc_spd")
"
echo "torch.compile: reports/anchors/torch_lm.csv (+ SDPA + fused AdamW, same"
echo "GPU model; plain or reduce-overhead, the faster by median)$( [ -n "$pt_small_bf16" ] && [ -n "$(sc small bf16 step_ms_mean)" ] && is_true "$pt_small_bf16 < $(sc small bf16 step_ms_mean)" && printf '; small bf16: %s ms, measured side by side with us (reports/anchors/published.csv; torch_lm.py: %s ms)' "$pt_small_bf16" "$(calc %.1f "$(sc small bf16 step_ms_mean)")"). PyTorch eager:"
echo "reports/anchors/lm_pytorch.csv (materialised attention, unfused AdamW)."
echo
rngs() { # MODE PREC: "LOx to HIx" of op by op / best fused
  set -- $(printf '%s' "$spd" | awk -v m="$1" -v p="$2" '$1 == m && $2 == p { n++; if (n == 1 || $3 < lo) lo = $3; if (n == 1 || $3 > hi) hi = $3 }
    END { if (n) printf "%.6f %.6f", lo, hi }')
  if [ $# -eq 2 ]; then printf '%sx to %sx' "$(factor "$1")" "$(factor "$2")"; else printf 'not measured'; fi
}
echo "**Answer.** Against op by op, the fused path (its better attention)"
echo "runs the forward pass $(rngs forward bf16) as fast in bf16 and"
echo "$(rngs forward fp32) in fp32; forward and backward $(rngs forward_backward bf16) (bf16) and"
echo "$(rngs forward_backward fp32) (fp32); the training step $(rngs train_step bf16) (bf16) and"
echo "$(rngs train_step fp32) (fp32). Fusion pays in bf16, where the elementwise passes"
echo "it removes were a large share; in fp32 the products on CUDA cores dominate."
# against the strongest PyTorch: our fastest fused train step and lowest peak
lines="" lost=0 nmem=0
for sp in "2.7B bf16" "2.7B fp32" "small bf16" "small fp32"; do
  set -- $sp
  pt=$(sc_step "$1" "$2"); [ -n "$pt" ] || continue
  ptt=${pt%% *}
  ptp=$(sc "$1" "$2" peak_gib)
  # our fastest and lowest-peak rows among op by op and both fused paths
  best="" bestp="" lowp=""
  for cand in "$ref|fusion=opbyop" "$csv|attention=materialized" "$csv|attention=flash"; do
    f=${cand%%|*}; w=${cand#*|}
    t=$(vf %.4f "$f" "$1" "$2" train_step step_ms_mean --where "$w")
    pk=$(vf %.1f "$f" "$1" "$2" train_step engine_peak_mib --where "$w")
    [ -n "$t" ] || continue
    if [ -z "$best" ] || is_true "$t < $best"; then best=$t bestp=$pk; fi
    if [ -z "$lowp" ] || is_true "$pk < $lowp"; then lowp=$pk; fi
  done
  [ -n "$best" ] || continue
  rw=$(verdict "$best" "$ptt")
  mem=""
  if [ -n "$ptp" ]; then
    nmem=$((nmem + 1))
    if is_true "$lowp / 1024 > $ptp"; then
      lost=$((lost + 1)); mem="; our lowest peak $(gib "$lowp") against $(calc %.1f "$ptp") GiB, **we lose**"
    else
      mem="; our lowest peak $(gib "$lowp") against $(calc %.1f "$ptp") GiB"
    fi
  fi
  lines="$lines- $1 $2: ours $(calc %.1f "$best") against $ptt ms, $rw$mem.
"
done
if [ -n "$lines" ]; then
  echo
  echo "Our fastest train step in these tables (mean of the timed steps; section T"
  echo "takes the step further) against torch.compile's, with our lowest peak of"
  echo "the three paths:"
  echo
  printf '%s' "$lines"
  [ "$nmem" -gt 0 ] && [ "$lost" -eq "$nmem" ] &&
    { echo; echo "We lose on memory in every one: our activations (and, in bf16, the"; echo "weight copy) stay allocated through the optimizer step (memory_profiling (c))."; }
fi
echo

failed_jobs "$csv" size,precision,attention,mode,status,message \
  "size,precision,attention,mode,status,message"

# ---- where the time goes ---------------------------------------------------
echo "#### Where the fused step's time goes"
echo
# Each row's families summed and set against its timed step (unrounded),
# so that the text says on which side of the step the sums fall.
ktab='' kn=0 kab=0 kbe=0 klo='' khi='' kabs=''
for p in bf16 fp32; do
  for s in $sizes; do
    for a in flash materialized; do
      st=$(v "$csv" "$s" $p train_step step_ms_mean --where attention=$a)
      [ -n "$st" ] || continue
      aw=$a; [ "$a" != materialized ] || aw=materialised
      msg=$(tool value "$csv" --sort -utc --agg first --default "" --where status=ok \
              --where size="$s" --where context=512 --where precision=$p \
              --where mode=train_step --where attention=$a --col message)
      case $msg in
        'ms per step by kernel family: '*) ;;
        *) ktab="$ktab| $s | $p | $aw | $st | - | - | $(d "$msg") |
"; continue ;;
      esac
      msg=${msg#ms per step by kernel family: }
      str=$(vf %.4f "$csv" "$s" $p train_step step_ms_mean --where attention=$a)
      sum=$(printf '%s\n' "$msg" | awk -F'; ' '{ for (i = 1; i <= NF; i++) { n = split($i, w, " "); t += w[n] } }
        END { printf "%.4f", t }')
      num "train step (ms)" "$str"; num "sum of the kernel families (ms)" "$sum"
      dp=$(calc "%+.1f" "100 * ($sum - $str) / $str")
      kn=$((kn + 1))
      if is_true "$sum >= $str"; then kab=$((kab + 1)); else kbe=$((kbe + 1)); fi
      if [ -z "$klo" ] || is_true "$dp < $klo"; then klo=$dp; fi
      if [ -z "$khi" ] || is_true "$dp > $khi"; then khi=$dp; fi
      kabs="$kabs$(calc "%.4f" "($sum > $str ? $sum - $str : $str - $sum) / $str * 100")
"
      ktab="$ktab| $s | $p | $aw | $st | $(calc "%.1f" "$sum") | $dp% | $msg |
"
    done
  done
done
echo "An extra untimed step per job times each operation between CUDA events"
echo "(recorded with each row of torch_compile.csv): ms per kernel family."
if [ "$kn" -gt 0 ]; then
  kmed=$(printf '%s' "$kabs" | sort -n | awk '{ a[NR] = $1 }
    END { printf "%.1f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
  if [ "$kbe" -eq 0 ]; then
    side="above the timed step in all $kn rows"
  elif [ "$kab" -eq 0 ]; then
    side="below the timed step in all $kn rows"
  else
    side="above the timed step in $kab of $kn rows, below in $kbe"
  fi
  echo "The events add time: the sum is $side, $klo% to $khi% off (median $kmed%, either sign)."
fi
echo
echo "| size | precision | attention | step (ms) | sum (ms) | sum vs step | ms by kernel family |"
echo "|---|---|---|--:|--:|--:|---|"
printf '%s' "$ktab"
echo

# ---- CUDA graphs ---------------------------------------------------------------
gcsv="$DATA/cuda_graphs.csv"
echo "#### CUDA graphs: where they pay"
echo
if ! has_rows "$gcsv"; then
  not_measured cuda_graphs "on a GPU"
else
  ggpus=$(tool distinct "$gcsv" --cols gpu_name --where status=ok | tr '\n' ';' | sed 's/;$//; s/;/, /g')
  gprec=$(vals "$gcsv" precision); gatt=$(vals "$gcsv" attention); gb=$(vals "$gcsv" batch)
  gw=$(vals "$gcsv" warmup); gs=$(vals "$gcsv" steps)
  # model_run_graphed (model/model.c): per phase the first call runs
  # directly, the second records and launches the recording, later calls
  # launch it; graph_replays counts the launches of a recording, so a run of
  # W + S steps has 2 (W + S - 1).
  case $gw$gs in
    '' | *[!0-9]*) rule="two per step from the second step on" ;;
    *)
      rexp=$((2 * (gw + gs - 1)))
      rbad=$(tool count "$gcsv" --where status=ok --where cuda_graphs=true --where graph_replays!="$rexp")
      rule="two per step from the second step on, 2 x ($gw + $gs - 1) = $rexp a run"
      [ "$rbad" -eq 0 ] || rule="$rule ($rbad of the rows below show another count)" ;;
  esac
  cat <<TEXT
The fused $gprec train step ($gatt attention, batch $gb) launched kernel by
kernel ("direct") or with forward and backward replayed as CUDA graphs
(\`cuda_graphs = true\`). experiments/cuda_graphs.cfg, GPU: $ggpus; ms, mean of
$gs timed steps after $gw warm-up; "replays": calls launched from a recording,
$rule.

| size | context | forward direct / graphs | backward direct / graphs | step direct | step graphs | saved | replays |
|---|--:|--:|--:|--:|--:|--:|--:|
TEXT
  # The rows from one csvtool call (each configuration's newest ok row),
  # joined by awk, which also leaves the largest relative saving and the
  # smallest and largest in ms ("BP BS BC LO LOS LOC HI HIS HIC") in $gsum.
  grows=$(tool select "$gcsv" --where status=ok --sort -utc --first-of size,context,cuda_graphs \
    --cols size,context,cuda_graphs,step_ms_mean,fwd_ms_mean,bwd_ms_mean,graph_replays --sep '|')
  gsizes=$(tool distinct "$gcsv" --cols params,size --where status=ok --sort params --sep '|' | cut -d'|' -f2)
  gctxs=$(tool distinct "$gcsv" --cols context --where status=ok --sort context)
  gsum="$REPORT_TMP/cuda_graphs.sum"
  { tagged r "$grows"; tagged s "$gsizes"; tagged c "$gctxs"; } | awk -F'|' -v sumf="$gsum" '
    function f2(x) { return x == "" ? "" : sprintf("%.2f", x) }
    $1 == "r" { k = $2 "|" $3 "|" $4; st[k] = f2($5); fw[k] = f2($6); bw[k] = f2($7)
                rp[k] = $8 == "" ? "" : sprintf("%.0f", $8); next }
    $1 == "s" { sz[++ns] = $2; next }
    $1 == "c" { cx[++nc] = $2; next }
    END {
      for (i = 1; i <= nc; i++) for (j = 1; j <= ns; j++) {
        s = sz[j]; c = cx[i]; d = s "|" c "|false"; g = s "|" c "|true"
        sd = st[d]; sg = st[g]
        if (sd == "" || sg == "") continue
        sms = sprintf("%.2f", sd - sg); spc = sprintf("%.1f", 100 * (sd - sg) / sd)
        if (bp == "" || spc + 0 > bp + 0) { bp = spc; bs = s; bc = c }
        if (lo == "" || sms + 0 < lo + 0) { lo = sms; los = s; loc = c }
        if (hi == "" || sms + 0 > hi + 0) { hi = sms; his = s; hic = c }
        printf "| %s | %s | %s / %s | %s / %s | %s | %s | %s ms (%s%%) | %s |\n", s, c, fw[d], fw[g],
          bw[d], bw[g], sd, sg, sms, spc, rp[g]
      }
      if (bp != "") print bp, bs, bc, lo, los, loc, hi, his, hic > sumf
    }'
  bp=''
  [ ! -s "$gsum" ] || read -r bp bs bc lo los loc hi his hic < "$gsum"
  echo
  if [ -n "$bp" ]; then
    cat <<TEXT
A replay saves the host's per-kernel launch work, so it pays most where
kernels are shortest (the $bs model at context $bc, $bp%); the saving runs
from $lo ms ($los, context $loc) to $hi ms ($his, context $hic). The
data-parallel strategies, whose hooks start collectives from the host,
run directly.
TEXT
    echo
  fi
fi

# ---- figure -----------------------------------------------------------------
if [ -z "$GNUPLOT" ]; then
  echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
  echo
  exit 0
fi
tmp="$OUT/torch_compile.tmp.csv"
{ echo "series,params,step_ms"; [ ! -f "$tc_fig" ] || cat "$tc_fig"; } > "$tmp"
"$GNUPLOT" -c "$REPORTS/lm_paths.gp" "$tmp" "$OUT/torch_compile.svg" \
  "Training step time against model size (batch $tb x 512 tokens, one GPU)"
rm -f "$tmp"
echo "![Training step time against model size, ours and PyTorch's, fp32 and bf16](torch_compile.svg)"
echo
echo "_The training-step table against parameter count, log axes: ours (solid),"
echo "PyTorch eager (dashed), torch.compile (large points); GPU: $gpus._"
echo
