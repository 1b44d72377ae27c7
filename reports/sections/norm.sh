#!/bin/sh
# The 2024 edition's RMSNorm / LayerNorm problems (shared/spec/
# handout-extras.md, section 2), one per PROBLEM; a problem whose parts
# read several experiments is listed with this script once per experiment
# (reports/problems.def), and the CSV's name says which part this call
# prints:
#   pytorch_layernorm           (a) pytorch_layernorm.csv, (b) norm_model.csv
#   triton_rmsnorm_forward      code: where our kernels are
#   rmsnorm_forward_benchmarking (a) pytorch_layernorm.csv, (b) norm_model.csv
#                               (+ DATA/norm_model_fused.csv)
#   rmsnorm_jvp_g, rmsnorm_jvp_x  the derivations, and where they are coded
#   triton_rmsnorm_backward     code
#   rmsnorm_benchmarking        (a) pytorch_layernorm.csv, (b)
#                               norm_model_fused.csv (+ DATA/norm_model.csv)
#   torch_compile_2024          (a), (b) pytorch_layernorm.csv; (c) pointers
# Ours: the norm kind (one layer over 50,000 rows) and the lm kind (the
# model, op by op with either norm, and the fused path's RMSNorm). PyTorch's
# numbers: reports/anchors/torch_norm.csv's rows from the GPU of
# pytorch_layernorm.csv (reports/anchors/torch_norm.py: eager RMSNorm,
# compiled RMSNorm, F.rms_norm, F.layer_norm). The handout's Triton kernels are PyTorch code; ours are
# CUDA kernels, which play their role here. Every number in the prose is
# read from those CSVs; a part whose CSV is missing (or has no ok row) says
# so. Environment (mkreport.sh): PROBLEM, CSV, DATA, OUT, CSVTOOL,
# REPORT_LIB. mkreport.sh prints the problem's heading; this its parts.
set -eu
. "$REPORT_LIB"
on_gpu "$DATA/pytorch_layernorm.csv"
anchor=$(anchor_rows torch_norm)
csv=${CSV:-}
exp=${csv##*/}
exp=${exp%.csv}

# ---- helpers -------------------------------------------------------------------

# no_pt: true, having said so in one line, when PyTorch's norms are not
# measured on our rows' GPU; the parts comparing with them stop there.
no_pt() {
  ! has_anchor "$anchor" || return 1
  anchor_missing norms are reports/anchors/torch_norm.py reports/anchors/torch_norm.csv
  echo
}
# Ours (pytorch_layernorm.csv): IMPL COLS COLUMN, the latest ok row's value.
[ ! -f "$csv" ] ||
  memo OV "$csv" impl,cols fwd_ms_per_pass,bwd_ms_per_pass,fwd_bwd_ms_per_pass \
    --where status=ok --sort -utc
ov() { memo_get OV "$@"; printf '%s\n' "$MV"; }
# PyTorch's (the anchor): IMPL COLS COLUMN.
memo AV "$anchor" impl,cols fwd_ms,bwd_ms,fwd_bwd_ms --where status=ok --sort -utc
av() { memo_get AV "$@"; printf '%s\n' "$MV"; }
impl_words() {
  case $1 in
    rmsnorm) printf "PyTorch's eager RMSNorm (the handout's module)" ;;
    rmsnorm_compiled) printf 'the same RMSNorm under torch.compile' ;;
    rms_norm) printf 'F.rms_norm' ;;
    layernorm) printf 'F.layer_norm (torch.nn.LayerNorm)' ;;
    *) printf '%s' "$1" ;;
  esac
}
cell() { [ -n "$1" ] && calc %.3f "$1" || printf -- '-'; }
ratio() { [ -n "$1" ] && [ -n "$2" ] && calc %.2f "$1 / $2" || printf -- '-'; }
# "LO to HI" of the numbers on stdin (one a line), in FMT.
range_of() { # FMT
  awk -v f="$1" 'NF { if (!n++ || $1 < lo) lo = $1; if (!hi || $1 > hi) hi = $1 }
    END { if (n) printf f " to " f, lo, hi }'
}
# The widths measured (ours), in order.
widths() { tool distinct "$csv" --cols cols --where status=ok --sort cols; }

# The rows, the passes and the GPU of pytorch_layernorm.csv, and how both
# sides time.
intro_kernels() {
  rows=$(tool value "$csv" --col rows --where status=ok --agg first)
  passes=$(tool value "$csv" --col passes --where status=ok --agg first)
  warm=$(tool value "$csv" --col warmup --where status=ok --agg first)
  machine=$(tool value "$csv" --col machine --where status=ok --agg first)
  agpu=$(tool value "$anchor" --col gpu --where status=ok --agg first --default "")
  tv=$(tool value "$anchor" --col torch --where status=ok --agg first --default "")
  cat <<TEXT
One norm layer over $rows rows of random fp32 values, ms per pass. Ours:
the \`norm\` kind (jobs/norm.c, experiments/pytorch_layernorm.cfg) on
$machine, kernels/cuda/rmsnorm.cu and layernorm.cu (one thread block per
row): $warm untimed passes, then $passes forwards and $passes forward+backward
passes, each loop closed by one synchronisation.
TEXT
  if [ -n "$agpu" ]; then
    echo "PyTorch $tv on an $agpu"
    echo "(reports/anchors/torch_norm.csv, do_bench medians): the handout's"
    echo "RMSNorm eager and compiled, F.rms_norm, and F.layer_norm (torch.nn.LayerNorm)."
  fi
  echo
}

# A table of one timing column (fwd / fwd_bwd) at every width: ours, then
# every PyTorch implementation.
kernel_table() { # OUR_COL ANCHOR_COL
  echo "| last dim | ours RMSNorm | ours LayerNorm | PyTorch RMSNorm, eager | RMSNorm, torch.compile | F.rms_norm | F.layer_norm | ours LayerNorm / RMSNorm | PyTorch eager RMSNorm / F.layer_norm |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  for d in $(widths); do
    r=$(ov rmsnorm "$d" "$1"); l=$(ov layernorm "$d" "$1")
    pe=$(av rmsnorm "$d" "$2"); pc=$(av rmsnorm_compiled "$d" "$2")
    pf=$(av rms_norm "$d" "$2"); pl=$(av layernorm "$d" "$2")
    for v in $r $l $pe $pc $pf $pl; do num "a time at width $d" "$v"; done
    echo "| $d | $(cell "$r") | $(cell "$l") | $(cell "$pe") | $(cell "$pc") | $(cell "$pf") | $(cell "$pl") | $(ratio "$l" "$r") | $(ratio "$pe" "$pl") |"
  done
  echo
}

# Where ours loses to PyTorch's fastest kernel of the same norm, for one
# timing column, or that it never does: RMSNorm's sentence (left out with
# SKIP_RMS "skip_rms", where the caller has said ours is fastest), then
# LayerNorm's.
losses() { # OUR_COL ANCHOR_COL WHAT [SKIP_RMS]
  rl='' ll=''
  for d in $(widths); do
    r=$(ov rmsnorm "$d" "$1"); l=$(ov layernorm "$d" "$1")
    pc=$(av rmsnorm_compiled "$d" "$2"); pf=$(av rms_norm "$d" "$2")
    pl=$(av layernorm "$d" "$2")
    best='' bi=''
    for i in rmsnorm_compiled rms_norm; do
      v=$(av $i "$d" "$2")
      [ -n "$v" ] || continue
      if [ -z "$best" ] || is_true "$v < $best"; then best=$v bi=$i; fi
    done
    if [ -n "$r" ] && [ -n "$best" ] && is_true "$r > $best"; then
      rl="$rl$d ($(calc %.3f "$r") against $(calc %.3f "$best") ms)|$bi
"
    fi
    if [ -n "$l" ] && [ -n "$pl" ] && is_true "$l > $pl"; then
      ll="$ll$d ($(calc %.3f "$l") against $(calc %.3f "$pl") ms)
"
    fi
  done
  text=''
  if [ "${4:-}" = skip_rms ]; then :
  elif [ -n "$rl" ]; then
    # one implementation for every width: name it once
    if [ "$(printf '%s' "$rl" | cut -d'|' -f2 | sort -u | wc -l)" -eq 1 ]; then
      text="Our RMSNorm $3 loses to PyTorch's fastest fused RMSNorm, $(impl_words "$(printf '%s' "$rl" | head -n 1 | cut -d'|' -f2)"), at $(printf '%s' "$rl" | cut -d'|' -f1 | and_list)."
    else
      text="Our RMSNorm $3 loses to PyTorch's fastest fused RMSNorm at $(printf '%s' "$rl" | while IFS='|' read -r a b; do echo "${a%)}, $(impl_words "$b"))"; done | and_list)."
    fi
  else
    text="Our RMSNorm $3 is at least as fast as PyTorch's fused RMSNorms at every width."
  fi
  if [ -n "$ll" ]; then
    text="$text Our LayerNorm $3 loses to F.layer_norm at $(printf '%s' "$ll" | and_list)."
  else
    text="$text Our LayerNorm $3 is at least as fast as F.layer_norm at every width."
  fi
  printf '%s' "${text# }"
}

# "LOx (D) to HIx (D) OF" for a per-width ratio of OF ($1), each extreme
# with its width; "Rx OF at every width" when every ratio prints the same.
span() { # "d r" lines on stdin
  awk -v of="$1" 'BEGIN { n = 0 } NF { d[n] = $1; r[n] = $2; n++ }
    END { if (n == 0) exit
      lo = 0; hi = 0
      for (i = 1; i < n; i++) { if (r[i] < r[lo]) lo = i; if (r[i] > r[hi]) hi = i }
      if (sprintf("%.2f", r[lo]) == sprintf("%.2f", r[hi]))
        printf "%.2fx %s at every width", r[lo], of
      else printf "%.2fx (%d) to %.2fx (%d) %s", r[lo], d[lo], r[hi], d[hi], of }'
}

# Our forward's traffic (x read, y written: 8 bytes an element) over a
# time, in TB/s.
tbps() { [ -n "$2" ] || { printf -- -; return; }; calc %.2f "8 * $rows * $1 / ($2 * 1e-3) / 1e12"; }

# ---- the kernels, forward (pytorch_layernorm (a)) --------------------------------

kernels_forward() {
  echo "### (a) RMSNorm against LayerNorm, ours and PyTorch's: forward"
  echo
  if ! has_rows "$csv"; then not_measured pytorch_layernorm "on a GPU"; return 0; fi
  intro_kernels
  kernel_table fwd_ms_per_pass fwd_ms
  failed_jobs "$csv" impl,cols,status,message "impl,cols,status,message"
  if no_pt; then return 0; fi
  d0=$(widths | head -n 1); d1=$(widths | tail -n 1)
  nfast=0 nslow=0 n=0   # widths where RMSNorm is >2% faster / slower
  for d in $(widths); do
    r=$(ov rmsnorm "$d" fwd_ms_per_pass); l=$(ov layernorm "$d" fwd_ms_per_pass)
    [ -n "$r" ] && [ -n "$l" ] || continue
    n=$((n + 1))
    ! is_true "$r * 1.02 < $l" || nfast=$((nfast + 1))
    ! is_true "$l * 1.02 < $r" || nslow=$((nslow + 1))
  done
  ours_trend=$(for d in $(widths); do
      r=$(ov rmsnorm "$d" fwd_ms_per_pass); l=$(ov layernorm "$d" fwd_ms_per_pass)
      [ -n "$r" ] && [ -n "$l" ] && echo "$d $(calc %.4f "$l / $r")"
    done | span "RMSNorm's time")
  pt_trend=$(for d in $(widths); do
      e=$(av rmsnorm "$d" fwd_ms); l=$(av layernorm "$d" fwd_ms)
      [ -n "$e" ] && [ -n "$l" ] && echo "$d $(calc %.4f "$e / $l")"
    done | span "F.layer_norm's time")
  r0=$(ov rmsnorm "$d0" fwd_ms_per_pass); r1=$(ov rmsnorm "$d1" fwd_ms_per_pass)
  c0=$(av rmsnorm_compiled "$d0" fwd_ms); c1=$(av rmsnorm_compiled "$d1" fwd_ms)
  # PyTorch's two fused RMSNorms against F.layer_norm, each counted on its
  # own (they differ), with the widths where one loses and its times.
  nc=0 nf=0 nw=0 closs='' floss=''
  for d in $(widths); do
    l=$(av layernorm "$d" fwd_ms); c=$(av rmsnorm_compiled "$d" fwd_ms); f=$(av rms_norm "$d" fwd_ms)
    [ -n "$l" ] && [ -n "$c" ] && [ -n "$f" ] || continue
    nw=$((nw + 1))
    if is_true "$c < $l"; then nc=$((nc + 1))
    else closs="$closs${closs:+; }$d, $(cell "$c") against $(cell "$l") ms"; fi
    if is_true "$f < $l"; then nf=$((nf + 1))
    else floss="$floss${floss:+; }$d, $(cell "$f") against $(cell "$l") ms"; fi
  done
  fused="fused, RMSNorm under torch.compile beats F.layer_norm at $nc of $nw widths${closs:+ (it loses at $closs)}"
  fused="$fused, and F.rms_norm beats it at $nf of $nw${floss:+ (it loses at $floss)}"
  less="one reduction per row where LayerNorm needs two, no subtraction or bias"
  if [ "$nfast" -eq "$n" ]; then
    why="RMSNorm does less: $less; both load four floats at a time."
  else
    why="RMSNorm does less ($less), but both read and write the same bytes, four floats at a time, and the bytes bound them."
  fi
  if [ "$nfast" -eq 0 ] && [ "$nslow" -eq 0 ]; then
    which="Our two kernels tie, within 2% at all $n widths: LayerNorm takes $ours_trend."
  else
    which="Of our two kernels RMSNorm is faster by more than 2% at $nfast of $n widths; LayerNorm takes $ours_trend."
  fi
  cat <<TEXT
**Which is faster.** $which $why Eager PyTorch RMSNorm is several kernels, each a pass
through memory, against F.layer_norm's one, so it takes $pt_trend;
$fused.

**With the hidden size.** A norm reads and writes each element once, so
each time grows about linearly with the width and the gap is what each
kernel does per byte: our RMSNorm forward moves $(tbps "$d0" "$r0") TB/s at $d0 and
$(tbps "$d1" "$r1") at $d1 (x read, y written), compiled RMSNorm $(tbps "$d0" "$c0") and $(tbps "$d1" "$c1").

**Where we lose.** $(losses fwd_ms_per_pass fwd_ms "forward") Up to 8192 columns
our kernels read each row once, holding it in registers between the sums
and the write, as PyTorch's fused kernels do (wider rows twice).

TEXT
}

# ---- the model with either norm, forward (pytorch_layernorm (b)) -----------------

# The model's rows: SIZE NORM MODE COLUMN, the latest ok row's value.
mv() {
  tool value "$1" --sort -utc --agg first --default "" --where status=ok \
    --where size="$2" --where norm="$3" --where mode="$4" --col "$5"
}
# The sizes of a model CSV, by parameter count.
model_sizes() {
  tool distinct "$1" --cols params,size --where status=ok --sort params --sep '|' |
    awk -F'|' 'NF && !seen[$2]++ { print $2 }'
}
# The norms' own kernel time in a row's message ("... rmsnorm 1.234; ..."),
# in ms per step, or "".
norm_ms() { # FILE SIZE NORM MODE
  m=$(mv "$1" "$2" "$3" "$4" message)
  printf '%s' "$m" | sed -n "s/.*[:;] $3 \([0-9][0-9.]*\).*/\1/p"
}
intro_model() { # FILE
  machine=$(tool value "$1" --col machine --where status=ok --agg first)
  b=$(tool value "$1" --col batch --where status=ok --agg first)
  t=$(tool value "$1" --col context --where status=ok --agg first)
  v=$(tool value "$1" --col vocab --where status=ok --agg first)
  p=$(tool value "$1" --col precision --where status=ok --agg first)
  st=$(tool value "$1" --col steps --where status=ok --agg first)
  w=$(tool value "$1" --col warmup --where status=ok --agg first)
  if [ "$b/$t/$v" = 16/128/10000 ]; then
    shape="the 2024 defaults (batch $b, context $t, vocabulary $v)"
  else
    shape="batch $b, context $t, vocabulary $v (the 2024 defaults are 16, 128 and 10000)"
  fi
  [ "$w" = 1 ] && ws=step || ws=steps
  printf '%s' "$shape, $p, on $machine; means of $st timed steps after $w warm-up $ws"
}

model_forward() {
  echo "### (b) The model with LayerNorm in place of RMSNorm: forward"
  echo
  if ! has_rows "$csv"; then not_measured norm_model "on a GPU"; return 0; fi
  echo "The \`lm\` kind op by op (experiments/norm_model.cfg) at"
  echo "$(intro_model "$csv")."
  echo "\`model.norm = \"layernorm\"\` puts torch.nn.LayerNorm (weight, bias, eps"
  echo "1e-5) in every norm; \"norms\": their kernels' time in one profiled forward."
  echo
  echo "| size | RMSNorm forward (ms) | LayerNorm forward (ms) | LayerNorm / RMSNorm | norms, RMSNorm / LayerNorm (ms) |"
  echo "|---|--:|--:|--:|--:|"
  lo='' hi='' los='' his='' share=''
  for s in $(model_sizes "$csv"); do
    r=$(mv "$csv" "$s" rmsnorm forward fwd_ms_mean)
    l=$(mv "$csv" "$s" layernorm forward fwd_ms_mean)
    nr=$(norm_ms "$csv" "$s" rmsnorm forward); nl=$(norm_ms "$csv" "$s" layernorm forward)
    for v in $r $l $nr $nl; do num "a forward time of $s" "$v"; done
    echo "| $s | $(cell "$r") | $(cell "$l") | $(ratio "$l" "$r") | $(cell "$nr") / $(cell "$nl") |"
    [ -n "$r" ] && [ -n "$l" ] || continue
    x=$(calc %.4f "100 * ($l / $r - 1)")
    if [ -z "$lo" ] || is_true "$x < $lo"; then lo=$x los=$s; fi
    if [ -z "$hi" ] || is_true "$x > $hi"; then hi=$x his=$s; fi
    if [ -n "$nl" ]; then
      sh=$(calc %.1f "100 * $nl / $l")
      share="${share}$s $sh
"
    fi
  done
  echo
  failed_jobs "$csv" size,norm,mode,status,message "size,norm,mode,status,message"
  [ -n "$lo" ] || return 0
  text="With LayerNorm the forward's time changes by $(calc %+.1f "$lo")% ($los) to $(calc %+.1f "$hi")% ($his) against RMSNorm."
  if [ -n "$share" ]; then
    text="$text LayerNorm's kernels are $(printf '%s\n' "$share" | awk 'NF { print $2 }' | range_of %.1f)% of the forward: a norm costs d_model per token, the products d_model^2."
  fi
  printf '%s\n\n' "$text"
}

# ---- code problems ---------------------------------------------------------------

code_line() {
  echo "The handout asks for PyTorch classes behind its pytest adapters; this"
  echo "project has no PyTorch, so our CUDA kernels play Triton's role and the"
  echo "CPU engine plays plain PyTorch's, both reached through one entry point"
  echo "per operation (kernels/ops.def); the tests listed below establish them."
  echo
}

triton_rmsnorm_forward() {
  code_line
  cat <<'TEXT'
### (a) RMSNorm's forward in plain code

`k_rmsnorm_fwd` on the CPU engine (`kernels/cpu/rmsnorm.c`): eq. 5 row by
row, the sum of squares in double, rstd = 1/sqrt(mean + eps) kept for
backward. A tensor whose last dimension is H is n = numel / H rows of H
(the model's activations: [batch x seq, d_model]).

### (b) The fused GPU kernel

`kernels/cuda/rmsnorm.cu`: one thread block per row, as the handout's one
program instance per row; each thread sums the squares of its columns
(four at a time when H % 4 = 0, the handout's mask playing no role then),
a fixed tree over the warp's shuffles and over the warps, rstd written
once, then y = x * rstd * g. Reached through the same `k_rmsnorm_fwd`
(argument checks, then the engine's kernel), so the model and the `norm`
kind call it unchanged.
TEXT
  echo
}

triton_rmsnorm_backward() {
  echo "As in triton_rmsnorm_forward, our CUDA kernel plays Triton's role and"
  echo "the CPU engine plain PyTorch's."
  echo
  cat <<'TEXT'
`k_rmsnorm_bwd` in `kernels/cuda/rmsnorm.cu` takes x, g, the upstream
gradient and the rstd forward kept (one float a row: nothing else is
stored; x * rstd is recomputed). ∇g as the handout builds it: blocks of 32
columns times a chunk of rows write partial sums to a [chunks, H] buffer,
then one thread per column adds the chunks in order (the handout's N x H
partial buffer and `torch.sum`, with rows summed in chunks first, so the
result repeats bit for bit); ∇x one block per row from the same inputs,
after ∇g so that ∇x may overwrite the upstream gradient. The CPU engine's
`kernels/cpu/rmsnorm.c` is the reference it is tested against.
TEXT
  echo
}

rmsnorm_jvp_g() {
  cat <<'TEXT'
### (a) The gradient of the gain

Write x as N rows of H (every leading dimension is a row), dy = ∇_y L for
y = RMSNorm(x, g), and r_i = ((1/H) Σ_k x_ik² + ε)^(-1/2). Then
y_ij = x_ij r_i g_j, and r_i does not depend on g, so ∂y_ij/∂g_k =
x_ij r_i δ_jk and

    (∇_g L)_k = Σ_i Σ_j dy_ij ∂y_ij/∂g_k = Σ_i dy_ik x_ik r_i,

the column sum over all rows of dy ⊙ x ⊙ r (r broadcast along the row):
x ⊙ r is the normalised input before the gain.

### (b) Where it is computed

The `dg` output of `k_rmsnorm_bwd` (kernels/ops.def), accumulated into the
model's gradient: on the CPU engine a double sum per column
(`kernels/cpu/rmsnorm.c`), on the GPU the two-kernel column sum of
triton_rmsnorm_backward. Its inputs are the handout's three tensors plus
the rstd forward kept.
TEXT
  echo
}

rmsnorm_jvp_x() {
  cat <<'TEXT'
### (a) The gradient of the input

With r_i as above, ∂r_i/∂x_ik = -(1/2) ((1/H) Σ_m x_im² + ε)^(-3/2)
(2 x_ik / H) = -r_i³ x_ik / H, and rows do not mix, so

    ∂y_ij/∂x_ik = g_j (δ_jk r_i - x_ij r_i³ x_ik / H),
    (∇_x L)_ik = Σ_j dy_ij ∂y_ij/∂x_ik
               = r_i g_k dy_ik - x_ik r_i³ (1/H) Σ_j dy_ij g_j x_ij.

Per row: scale the gain-weighted upstream gradient by r_i, and remove its
component along x_i (the mean of g ⊙ dy ⊙ x times r_i³ x_i).

### (b) Where it is computed

The `dx` output of `k_rmsnorm_bwd`, in exactly this form (kernels/ops.def
states it; `kernels/cpu/rmsnorm.c`, `kernels/cuda/rmsnorm.cu`).

### (c) The backward of the whole norm

The model's backward (`model/backward.c`, `norm_bwd`) is the
autograd.Function's backward: forward saved the norm's input x (the
residual stream, kept anyway), the gain g (a parameter) and rstd (one float
a row); backward calls `k_rmsnorm_bwd` with the upstream gradient, which
writes ∇x and adds ∇g to the gain's gradient. The same holds with LayerNorm
(`k_layernorm_bwd`, which keeps the mean too). The whole model's gradient
is checked against finite differences.
TEXT
  echo
}

# ---- forward benchmarking (rmsnorm_forward_benchmarking) -------------------------

forward_benchmarking_kernels() {
  echo "### (a) Our RMSNorm kernel against PyTorch's norms, forward"
  echo
  if ! has_rows "$csv"; then not_measured pytorch_layernorm "on a GPU"; return 0; fi
  if no_pt; then return 0; fi
  echo "pytorch_layernorm (a)'s forward times (pytorch_layernorm.csv, $(tool value "$csv" --col machine --where status=ok --agg first)):"
  echo "our CUDA kernel in Triton's place; \"x\": PyTorch's time over ours."
  echo
  echo "| last dim | ours RMSNorm (ms) | PyTorch RMSNorm, eager (ms) | x | F.layer_norm (ms) | x | fastest fused PyTorch RMSNorm (ms) | x |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|"
  be='' bl='' bf=''
  for d in $(widths); do
    r=$(ov rmsnorm "$d" fwd_ms_per_pass)
    e=$(av rmsnorm "$d" fwd_ms); l=$(av layernorm "$d" fwd_ms)
    f=''
    for i in rmsnorm_compiled rms_norm; do
      v=$(av $i "$d" fwd_ms)
      [ -n "$v" ] || continue
      if [ -z "$f" ] || is_true "$v < $f"; then f=$v; fi
    done
    for v in $r $e $l $f; do num "a forward time at $d" "$v"; done
    echo "| $d | $(cell "$r") | $(cell "$e") | $(ratio "$e" "$r") | $(cell "$l") | $(ratio "$l" "$r") | $(cell "$f") | $(ratio "$f" "$r") |"
    [ -n "$r" ] || continue
    [ -z "$e" ] || be="$be$d $(calc %.6f "$e / $r")
"
    [ -z "$l" ] || bl="$bl$d $(calc %.6f "$l / $r")
"
    [ -z "$f" ] || bf="$bf$d $(calc %.6f "$f / $r")
"
  done
  echo
  # "Nx to Mx as fast as THING at every width", or the widths where we win
  # and lose with each factor, from "d theirs/ours" lines.
  said() { # LINES THING
    printf '%s' "$1" | awk -v thing="$2" "$FACTOR_AWK"'
      BEGIN { n = 0; w = 0 } NF { d[n] = $1; r[n] = $2; t[n] = factor($2); if ($2 > 1) w++; n++ }
      END { if (n == 0) { printf "not compared with %s", thing; exit }
        lo = hi = 0
        for (i = 1; i < n; i++) { if (r[i] < r[lo]) lo = i; if (r[i] > r[hi]) hi = i }
        if (w == n) {
          if (t[lo] == t[hi]) printf "%sx as fast as %s at every width", t[lo], thing
          else printf "%sx to %sx as fast as %s at every width", t[lo], t[hi], thing
          exit }
        if (w == 0) { printf "at no width faster than %s (%sx to %sx as fast)", thing, t[lo], t[hi]; exit }
        printf "faster than %s at ", thing; k = 0
        for (i = 0; i < n; i++) if (r[i] > 1) printf "%s%d (%sx as fast)", (k++ ? (k == w ? " and " : ", ") : ""), d[i], t[i]
        printf ", not at "; k = 0
        for (i = 0; i < n; i++) if (r[i] <= 1) printf "%s%d (%sx)", (k++ ? (k == n - w ? " and " : ", ") : ""), d[i], t[i] }'
  }
  if printf '%s' "$be$bl$bf" | awk '$2 > 1 { y = 1 } END { exit !y }'; then yes="Yes"; else yes="No"; fi
  echo "**Answer.** $yes: our kernel is $(said "$be" "the eager RMSNorm"); $(said "$bl" "F.layer_norm");"
  echo "and $(said "$bf" "PyTorch's fastest fused RMSNorm (compiled or F.rms_norm)")."
  echo "Against the eager module the gain is fusion: one pass over memory."
  echo
}

forward_benchmarking_model() {
  echo "### (b) The model's forward with each norm"
  echo
  if ! has_rows "$csv"; then not_measured norm_model "on a GPU"; return 0; fi
  fused="$DATA/norm_model_fused.csv"
  echo "Forward (ms), norm_model.csv and norm_model_fused.csv, setup as in"
  echo "pytorch_layernorm (b), on $(tool value "$csv" --col machine --where status=ok --agg first): op by op with either norm,"
  echo "and the fused path, whose RMSNorm kernel folds in the residual add and"
  echo "which fuses more than the norm (torch_compile (b))."
  echo
  echo "| size | RMSNorm, op by op | LayerNorm, op by op | fused path (RMSNorm) |"
  echo "|---|--:|--:|--:|"
  for s in $(model_sizes "$csv"); do
    r=$(mv "$csv" "$s" rmsnorm forward fwd_ms_mean)
    l=$(mv "$csv" "$s" layernorm forward fwd_ms_mean)
    f=''
    ! has_rows "$fused" || f=$(mv "$fused" "$s" rmsnorm forward fwd_ms_mean)
    for v in $r $l $f; do num "a forward time of $s" "$v"; done
    echo "| $s | $(cell "$r") | $(cell "$l") | $(cell "$f") |"
  done
  echo
  if ! has_rows "$fused"; then
    echo "_Not yet measured: the fused column (run"
    echo "\`./runner experiments/norm_model_fused.cfg\` on a GPU)._"
    echo
  fi
}

# ---- forward+backward (rmsnorm_benchmarking) -------------------------------------

benchmarking_kernels() {
  echo "### (a) Forward+backward of every norm"
  echo
  if ! has_rows "$csv"; then not_measured pytorch_layernorm "on a GPU"; return 0; fi
  echo "As pytorch_layernorm (a) (pytorch_layernorm.csv, $(tool value "$csv" --col machine --where status=ok --agg first)), forward then"
  echo "backward with a random upstream gradient, ms per pass."
  echo
  kernel_table fwd_bwd_ms_per_pass fwd_bwd_ms
  if no_pt; then return 0; fi
  best=$(for d in $(widths); do
      for i in rmsnorm rmsnorm_compiled rms_norm layernorm; do
        v=$(av $i "$d" fwd_bwd_ms); [ -z "$v" ] || echo "$d $v $i"
      done
      for i in rmsnorm layernorm; do
        v=$(ov $i "$d" fwd_bwd_ms_per_pass); [ -z "$v" ] || echo "$d $v ours_$i"
      done
    done | sort -k1,1n -k2,2g | awk '!seen[$1]++ { print $1 ": " $3 }' |
    sed 's/ours_rmsnorm/our RMSNorm/; s/ours_layernorm/our LayerNorm/; s/rmsnorm_compiled/compiled RMSNorm/; s/rms_norm/F.rms_norm/; s/: layernorm/: F.layer_norm/; s/: rmsnorm$/: eager RMSNorm/')
  # one name for every width: said once
  skip=''
  if [ "$(printf '%s\n' "$best" | sed 's/^[^:]*: //' | sort -u | wc -l)" -eq 1 ]; then
    best="fastest at every width: $(printf '%s\n' "$best" | head -n 1 | sed 's/^[^:]*: //')"
    [ "$best" != "fastest at every width: our RMSNorm" ] || skip=skip_rms
  else
    best="fastest at each width: $(printf '%s\n' "$best" | and_list)"
  fi
  # the eager module over the fastest fused RMSNorm; forward+backward over
  # forward, every implementation and width
  eg=$(for d in $(widths); do
      e=$(av rmsnorm "$d" fwd_bwd_ms); c=$(av rmsnorm_compiled "$d" fwd_bwd_ms); f=$(av rms_norm "$d" fwd_bwd_ms)
      [ -n "$e" ] && [ -n "$c" ] && [ -n "$f" ] && calc '%.4f\n' "$e / ($c < $f ? $c : $f)"
    done | range_of %.1f)
  fb=$(for d in $(widths); do
      for i in rmsnorm rmsnorm_compiled rms_norm layernorm; do
        a=$(av $i "$d" fwd_ms); b=$(av $i "$d" fwd_bwd_ms)
        [ -n "$a" ] && [ -n "$b" ] && calc '%.4f\n' "$b / $a"
      done
      for i in rmsnorm layernorm; do
        a=$(ov $i "$d" fwd_ms_per_pass); b=$(ov $i "$d" fwd_bwd_ms_per_pass)
        [ -n "$a" ] && [ -n "$b" ] && calc '%.4f\n' "$b / $a"
      done
    done | range_of %.1f)
  echo "Forward+backward, $best. $(losses fwd_bwd_ms_per_pass fwd_bwd_ms "forward+backward" "$skip")"
  echo "Eager backward is autograd's chain of elementwise kernels, so eager"
  echo "forward+backward takes $eg times the fastest fused RMSNorm's. Forward+backward"
  echo "costs $fb forwards: backward reads x, dy and g, writes dx, and reduces"
  echo "over all rows for dg."
  echo
}

benchmarking_model() {
  echo "### (b) The whole model: our fused RMSNorm against op by op"
  echo
  opbyop="$DATA/norm_model.csv"
  if ! has_rows "$csv"; then not_measured norm_model_fused "on a GPU"; return 0; fi
  if ! has_rows "$opbyop"; then not_measured norm_model "on a GPU"; return 0; fi
  echo "Forward and backward (ms) of the op-by-op path (norm_model.cfg) against"
  echo "the fused path (norm_model_fused.cfg, our Triton RMSNorm module's"
  echo "counterpart, fusing more than the norm), setup as in pytorch_layernorm"
  echo "(b), on $(tool value "$csv" --col machine --where status=ok --agg first); \"norms\": the RMSNorm kernels' time in one profiled pass."
  echo
  echo "| size | op by op fwd / bwd | fused fwd / bwd | speed-up fwd | speed-up bwd | norms, op by op / fused |"
  echo "|---|--:|--:|--:|--:|--:|"
  sp=''
  for s in $(model_sizes "$opbyop"); do
    of=$(mv "$opbyop" "$s" rmsnorm forward_backward fwd_ms_mean)
    ob=$(mv "$opbyop" "$s" rmsnorm forward_backward bwd_ms_mean)
    ff=$(mv "$csv" "$s" rmsnorm forward_backward fwd_ms_mean)
    fb=$(mv "$csv" "$s" rmsnorm forward_backward bwd_ms_mean)
    no=$(norm_ms "$opbyop" "$s" rmsnorm forward_backward)
    nf=$(norm_ms "$csv" "$s" rmsnorm forward_backward)
    for v in $of $ob $ff $fb $no $nf; do num "a time of $s" "$v"; done
    echo "| $s | $(cell "$of") / $(cell "$ob") | $(cell "$ff") / $(cell "$fb") | $(ratio "$of" "$ff") | $(ratio "$ob" "$fb") | $(cell "$no") / $(cell "$nf") |"
    [ -n "$of" ] && [ -n "$ff" ] && [ -n "$ob" ] && [ -n "$fb" ] || continue
    sp="$sp$s $(calc %.4f "$of / $ff") $(calc %.4f "$ob / $fb")
"
  done
  echo
  failed_jobs "$csv" size,mode,status,message "size,mode,status,message"
  [ -n "$sp" ] || return 0
  printf '%s' "$sp" | awk "$FACTOR_AWK"'NF { if (!n++ || $2 < fl) { fl = $2; fls = $1 } if ($2 > fh) { fh = $2; fhs = $1 }
      if (n == 1 || $3 < bl) { bl = $3; bls = $1 } if ($3 > bh) { bh = $3; bhs = $1 } }
    END { printf "Against op by op the fused path'"'"'s forward is %sx (%s) to %sx (%s) as fast, its backward %sx (%s) to %sx (%s). ", factor(fl), fls, factor(fh), fhs, factor(bl), bls, factor(bh), bhs }'
  shares=$(for s in $(model_sizes "$opbyop"); do
      of=$(mv "$opbyop" "$s" rmsnorm forward_backward step_ms_mean)
      no=$(norm_ms "$opbyop" "$s" rmsnorm forward_backward)
      [ -n "$of" ] && [ -n "$no" ] && calc '%.4f\n' "100 * $no / $of"
    done | range_of %.1f)
  if [ -n "$shares" ]; then
    echo "The RMSNorm kernels take $shares% of the op-by-op forward+backward, which"
    echo "bounds what a faster norm alone could save; the rest is the other fusions."
  fi
  echo
}

# ---- torch.compile, 2024 (torch_compile_2024) ------------------------------------

compile_table() { # OUR_COL ANCHOR_COL
  echo "| last dim | PyTorch RMSNorm, eager (ms) | torch.compile (ms) | compiled x | F.rms_norm (ms) | ours (ms) | ours against compiled |"
  echo "|--:|--:|--:|--:|--:|--:|---|"
  for d in $(widths); do
    e=$(av rmsnorm "$d" "$2"); c=$(av rmsnorm_compiled "$d" "$2")
    f=$(av rms_norm "$d" "$2"); o=$(ov rmsnorm "$d" "$1")
    for v in $e $c $f $o; do num "a time at $d" "$v"; done
    vs=-
    [ -z "$o" ] || [ -z "$c" ] || vs=$(as_fast "$o" "$c")
    echo "| $d | $(cell "$e") | $(cell "$c") | $(ratio "$e" "$c") | $(cell "$f") | $(cell "$o") | $vs |"
  done
  echo
}

torch_compile_2024() {
  if ! has_rows "$csv"; then
    for p in a b; do echo "### ($p) Compiled RMSNorm"; echo; not_measured pytorch_layernorm "on a GPU"; done
  elif ! has_anchor "$anchor"; then
    for p in a b; do echo "### ($p) Compiled RMSNorm"; echo; no_pt; done
  else
    sp() { # ANCHOR_COL: compiled's speed-up over eager, "LOx to HIx"
      for d in $(widths); do
        e=$(av rmsnorm "$d" "$1"); c=$(av rmsnorm_compiled "$d" "$1")
        [ -n "$e" ] && [ -n "$c" ] && calc %.4f "$e / $c" && echo
      done | awk "$FACTOR_AWK"'NF { if (!n++ || $1 < lo) lo = $1; if ($1 > hi) hi = $1 } END { printf "%sx to %sx", factor(lo), factor(hi) }'
    }
    echo "### (a) Compiled RMSNorm, forward"
    echo
    echo "The handout's RMSNorm compiled, eager and F.rms_norm"
    echo "(reports/anchors/torch_norm.csv), and ours (pytorch_layernorm.csv,"
    echo "$(tool value "$csv" --col machine --where status=ok --agg first)), ms per pass; \"compiled x\": eager over compiled."
    echo
    compile_table fwd_ms_per_pass fwd_ms
    nc=0 nw=0
    for d in $(widths); do
      c=$(av rmsnorm_compiled "$d" fwd_ms); f=$(av rms_norm "$d" fwd_ms)
      [ -n "$c" ] && [ -n "$f" ] || continue
      nw=$((nw + 1))
      ! is_true "$c <= $f" || nc=$((nc + 1))
    done
    echo "**Answer.** torch.compile fuses the module into generated Triton code,"
    echo "$(sp fwd_ms) as fast as eager and at least as fast as F.rms_norm at"
    echo "$nc of $nw widths; the last column says where ours wins and loses."
    echo
    echo "### (b) Compiled RMSNorm, forward+backward"
    echo
    compile_table fwd_bwd_ms_per_pass fwd_bwd_ms
    echo "**Answer.** With backward, compiled is $(sp fwd_bwd_ms) as fast as eager:"
    echo "it fuses autograd's chain of elementwise kernels too."
    echo
  fi
  compile_model
}

# (c): the handout's vanilla against compiled model, every Table 1 size,
# forward and forward+backward+optimizer, at the 2024 shapes.
# torch_lm_reference.py's reference_compiled is that measurement
# (lm_pytorch.csv); torch_lm.py times training steps only, of another
# model (SDPA, fused AdamW). Say what each holds on this GPU, and the
# command for what is missing; a table once those rows exist.
compile_model() {
  echo "### (c) The whole model compiled"
  echo
  # the 2024 shapes as our op-by-op rows ran them, else the handout's
  nm="$DATA/norm_model.csv"
  b=16 t=128 p=fp32
  if has_rows "$nm"; then
    b=$(tool value "$nm" --col batch --where status=ok --agg first)
    t=$(tool value "$nm" --col context --where status=ok --agg first)
    p=$(tool value "$nm" --col precision --where status=ok --agg first)
  fi
  ref=$(anchor_rows lm_pytorch)
  memo RV "$ref" size,config,mode time_ms --where status=ok --where batch="$b" \
    --where context="$t" --where precision="$p" --sort -utc
  nref=$(tool count "$ref" --where status=ok --where batch="$b" --where context="$t" \
           --where precision="$p" --where config=reference_compiled)
  cmd="python3 reports/anchors/torch_lm_reference.py reports/anchors/lm_pytorch.csv --contexts $t --batch $b --precisions $p --modes forward,train_step --configs reference,reference_compiled"
  if [ "$nref" -gt 0 ]; then
    # our forward at the same shapes beside it: op by op with RMSNorm
    # (2024.1 (b)) and the fused path (2024.7 (b)), where measured here
    nf="$DATA/norm_model_fused.csv" ours=""
    for f in "$nm" "$nf"; do
      ! on_this_gpu "$f" || ours="$ours${ours:+ }$f"
    done
    [ ! -f "$nm" ] || memo OV "$nm" size,mode,norm fwd_ms_mean --where status=ok --sort -utc
    [ ! -f "$nf" ] || memo OF "$nf" size,mode,norm fwd_ms_mean --where status=ok --sort -utc
    echo "The course's reference module (materialised attention, AdamW) eager and under"
    echo "torch.compile (reports/anchors/lm_pytorch.csv), batch $b, context $t, $p, on"
    echo "the $GPU_KIND; mean ms; \"compiled x\": eager over compiled. Ours: the forward"
    echo "op by op (norm_model.csv, as in 2024.1 (b)) and fused (norm_model_fused.csv), forward rows."
    echo
    echo "| size | forward, eager | forward, compiled | compiled x | ours forward, op by op / fused | train step, eager | train step, compiled | compiled x |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|"
    st=""
    for sz in small medium large xl 2.7B; do
      memo_get RV "$sz" reference forward time_ms; fe=$MV
      memo_get RV "$sz" reference_compiled forward time_ms; fc=$MV
      memo_get RV "$sz" reference train_step time_ms; te=$MV
      memo_get RV "$sz" reference_compiled train_step time_ms; tc=$MV
      [ -n "$fe$fc$te$tc" ] || continue
      oo="" of=""
      case " $ours " in *" $nm "*) memo_get OV "$sz" forward rmsnorm fwd_ms_mean; oo=$MV ;; esac
      case " $ours " in *" $nf "*) memo_get OF "$sz" forward rmsnorm fwd_ms_mean; of=$MV ;; esac
      for v in $fe $fc $te $tc $oo $of; do num "a model time of $sz" "$v"; done
      echo "| $sz | $(f1 "$fe") | $(f1 "$fc") | $(ratio "$fe" "$fc") | $(f1 "$oo") / $(f1 "$of") | $(f1 "$te") | $(f1 "$tc") | $(ratio "$te" "$tc") |"
      st="$st$sz $fe $fc $te $tc ${oo:--} ${of:--}
"
    done
    echo
    # the answer: compiling's gain by pass, and our forward against compiled
    printf '%s' "$st" | awk "$FACTOR_AWK"'
      function rng(lo, hi) { return factor(lo) == factor(hi) ? factor(lo) "x" : factor(lo) "x to " factor(hi) "x" }
      NF == 7 { n++; s[n] = $1; f = $2 / $3; t = $4 / $5
        if (n == 1 || f < flo) { flo = f; fmin = $1 }; if (n == 1 || f > fhi) { fhi = f; fmax = $1 }
        if (n == 1 || t < tlo) tlo = t; if (n == 1 || t > thi) thi = t
        if ($7 != "-") { m++; o = $3 / $7; if (m == 1 || o < olo) olo = o; if (m == 1 || o > ohi) ohi = o
          if (o > 1) w++ } }
      END {
        if (!n) exit
        printf "**Answer.** Compiling the reference runs its forward pass %s as fast as eager and its training step %s", rng(flo, fhi), rng(tlo, thi)
        if (fmax != fmin) printf " (forward: the most at %s, the least at %s)", fmax, fmin
        printf ": it fuses the elementwise work (softmax, norms, SwiGLU) and leaves the fp32 products, which grow to dominate the larger models"
        printf "."
        if (m) printf " Our fused forward is %s as fast as the compiled one (faster at %d of %d sizes), without a compiler: its kernels are fused by hand.", rng(olo, ohi), w, m
        printf "\n\n" }' | fold -s -w 76 | sed 's/ *$//'
    return 0
  fi
  # what compiled PyTorch this GPU has at all: torch_lm.py's training steps
  strong=$(anchor_rows torch_lm)
  nst=$(tool count "$strong" --where status=ok --where 'config=compiled|compiled_cudagraphs')
  if [ "$nst" -gt 0 ]; then
    sb=$(tool distinct "$strong" --cols batch --where status=ok --where 'config=compiled|compiled_cudagraphs' | paste -sd/ -)
    sc=$(tool distinct "$strong" --cols context --where status=ok --where 'config=compiled|compiled_cudagraphs' | sort -n | paste -sd, - | sed 's/,/, /g')
    echo "Measured on the $GPU_KIND: PyTorch's compiled training step (reports/anchors/torch_lm.py:"
    echo "torch.compile, SDPA, fused AdamW; $nst rows, batch $sb, contexts $sc), in"
    echo "sections 1.3.1 (b) and T. It is not the handout's measurement: a training step only, no forward"
    echo "alone, SDPA rather than the reference's attention, and not at batch $b."
  fi
  echo "Not measured: the course's reference model eager against compiled at the 2024"
  echo "shapes (batch $b, context $t, $p), each Table 1 size, forward and"
  echo "forward+backward+optimizer (lm_pytorch.csv holds no compiled reference row"
  echo "there on the $GPU_KIND). \`$cmd\` on one measures it."
  echo
  todo "PyTorch's reference model eager against compiled at the 2024 shapes on the $GPU_KIND (\`$cmd\`)"
}

# ---- dispatch ---------------------------------------------------------------------

case ${PROBLEM:-}:$exp in
  pytorch_layernorm:pytorch_layernorm) kernels_forward ;;
  pytorch_layernorm:norm_model) model_forward ;;
  triton_rmsnorm_forward:*) triton_rmsnorm_forward ;;
  rmsnorm_forward_benchmarking:pytorch_layernorm) forward_benchmarking_kernels ;;
  rmsnorm_forward_benchmarking:norm_model) forward_benchmarking_model ;;
  rmsnorm_jvp_g:*) rmsnorm_jvp_g ;;
  rmsnorm_jvp_x:*) rmsnorm_jvp_x ;;
  triton_rmsnorm_backward:*) triton_rmsnorm_backward ;;
  rmsnorm_benchmarking:pytorch_layernorm) benchmarking_kernels ;;
  rmsnorm_benchmarking:norm_model_fused) benchmarking_model ;;
  torch_compile_2024:pytorch_layernorm) torch_compile_2024 ;;
  *)
    echo "norm.sh: no part for problem \"${PROBLEM:-}\" with $exp.csv (reports/problems.def lists which)" >&2
    exit 1 ;;
esac
