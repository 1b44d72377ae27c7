#!/bin/sh
# The writeup's opening summary: each headline result next to the strongest
# anchor measured on the same GPU kind, both read from CSVs (ours from
# DATA, PyTorch's from reports/anchors/, each file written by a script
# there). The GPU is read from our row and the anchors are those measured
# on that GPU (section_lib.sh's anchor_rows); where there are none, the
# line says PyTorch is not yet measured on it. A line whose own rows are
# missing is left out, never guessed.
# make report copies this table into README.md (readme_summary.sh), so the
# two cannot disagree. Environment as for every section (no CSV of its own).
set -eu
. "$REPORT_LIB"

ar_anchor="$ANCHORS/collectives_torch.csv"
ddp_anchor="$ANCHORS/ddp_pytorch_compiled.csv"
# for_gpu NAME GPU_NAME: anchor NAME's rows measured on GPU_NAME.
for_gpu() { GPU=$2; anchor_rows "$1"; }

# The value of COL in FILE under the --where filters (rows with a status
# column: ok ones only), or empty; with a --sort, the first row's (without
# one, rows that disagree are an error).
val() {
  f=$1 col=$2
  shift 2
  [ -f "$f" ] || return 0
  case " $* " in *" --sort "*) set -- "$@" --agg first ;; esac
  case $(head -n 1 "$f") in
    *,status,* | status,* | *,status) set -- --where status=ok "$@" ;;
  esac
  tool value "$f" --col "$col" "$@" --default ''
}
kind() { gpu_kind "$1"; }
# same_kind OURS THEIRS: both named and the same kind.
same_kind() { [ -n "$1" ] && [ -n "$2" ] && [ "$(kind "$1")" = "$(kind "$2")" ]; }
# lost OURS THEIRS WHAT: note WHAT among the losses the closing sentence
# names when OURS (a time or a size) is the larger.
losses=''
lost() {
  is_true "$1 > $2" || return 0
  losses="${losses:+$losses|}$3"
}

# step_row WHAT GPU MS MIB THEIRS THEIR_MS THEIR_GIB SCRIPT LOSS [NOTE]: a
# row of a step's time and peak against an anchor's (THEIRS, measured by
# reports/anchors/SCRIPT; "not yet measured" when THEIR_MS or THEIR_GIB
# is empty), its losses noted as "on LOSS" and "on LOSS's memory"; NOTE
# ends the anchor's cell.
step_row() {
  _sw=$1 _sg=$2 _sm=$3 _sb=$4 _tn=$5 _tm=$6 _tb=$7
  _so="$(calc '%.1f' "$_sm") ms, $(calc '%.1f' "$_sb / 1024") GiB"
  if [ -z "$_tm" ] || [ -z "$_tb" ]; then
    echo "| $_sw | $(kind "$_sg") | $_so | not yet measured on the $(kind "$_sg") (reports/anchors/$8) |"
    return 0
  fi
  num "$_tn ms" "$_tm"; num "$_tn GiB" "$_tb"
  if is_true "$_sb / 1024 <= $_tb"; then _sx="ours the smaller"
  else _sx="**we use $(calc '%.2f' "$_sb / 1024 / $_tb")x the memory**"; fi
  echo "| $_sw | $(kind "$_sg") | $_so | $_tn $(calc '%.1f' "$_tm") ms, $(calc '%.1f' "$_tb") GiB: $(verdict "$_sm" "$_tm"), $_sx${10:+; ${10}} |"
  lost "$_sm" "$_tm" "on $9"
  lost "$_sb / 1024" "$_tb" "on $9's memory"
}

echo "## Summary"
echo
echo "| result | GPU | ours | strongest PyTorch, same GPU kind |"
echo "|---|---|--:|---|"

# Our fastest path (fused, flash, CUDA graphs), AdamW after backward and in
# backward, from section T's experiment; PyTorch's torch.compile + SDPA +
# fused AdamW.
oib=$DATA/optimizer_in_backward.csv
lm() { # PRECISION OPTIMIZER COL
  val "$oib" "$3" --sort -utc --where size=2.7B --where context=512 --where precision="$1" --where optimizer="$2" --where adamw_blocks=0
}
plm() { # PRECISION COL: from lm_anchor
  pt_compiled "$lm_anchor" 2.7B 512 "$1" "$2"
}
ms=$(lm bf16 after_backward step_ms_median)
mib=$(lm bf16 after_backward engine_peak_mib)
gpu=$(lm bf16 after_backward gpu_name)
lm_anchor=$(for_gpu torch_lm "$gpu")
pms=$(plm bf16 step_ms_median)
pgib=$(plm bf16 peak_gib)
pgpu=$(plm bf16 gpu)
ims=$(lm bf16 in_backward step_ms_median)
imib=$(lm bf16 in_backward engine_peak_mib)
iform="AdamW in backward"
# ...or, where faster on the same GPU, a variant of it (section T)
best=$(inbwd_best "$gpu")
if [ -n "$best" ] && [ -n "$ims" ]; then
  set -- $best
  if is_true "$1 < $ims"; then
    ims=$1; imib=$2; shift 2; iform="AdamW in backward, $*"
  fi
fi
if [ -n "$ms" ]; then
  num ms "$ms"; num mib "$mib"
  if same_kind "$gpu" "$pgpu"; then
    num pms "$pms"; num pgib "$pgib"
    echo "| 2.7B training step, bf16, context 512, batch 4, median (section T) | $(kind "$gpu") | $(calc '%.1f' "$ms") ms | torch.compile + SDPA + fused AdamW $(calc '%.1f' "$pms") ms: $(verdict "$ms" "$pms") |"
    if is_true "$mib / 1024 > $pgib"; then m="**we use $(calc '%.2f' "$mib / 1024 / $pgib")x the memory**"
    else m="ours $(calc '%.2f' "$mib / 1024 / $pgib")x the memory"; fi
    echo "| peak memory of that step | $(kind "$gpu") | $(calc '%.1f' "$mib / 1024") GiB | $(calc '%.1f' "$pgib") GiB: $m |"
    lost "$ms" "$pms" "on the bf16 step's time"
    lost "$mib / 1024" "$pgib" "on memory with AdamW after backward"
    if [ -n "$ims" ]; then
      num ims "$ims"; num imib "$imib"
      # inbwd_row LABEL MS MIB: an in-backward form against PyTorch's step
      inbwd_row() {
        echo "| $1 (section T) | $(kind "$gpu") | $(calc '%.1f' "$2") ms, $(calc '%.1f' "$3 / 1024") GiB | the same $(calc '%.1f' "$pms") ms, $(calc '%.1f' "$pgib") GiB: $(verdict "$2" "$pms") in $(calc '%.2f' "$3 / 1024 / $pgib")x the memory |"
      }
      inbwd_row "the same step with $iform" "$ims" "$imib"
      lost "$imib / 1024" "$pgib" "on memory even with AdamW in backward"
      # the fastest form where it is not the one above (past the goal's
      # 50 GiB, say)
      fast=$(inbwd_best "$gpu" any)
      if [ -n "$fast" ]; then
        set -- $fast
        if is_true "$1 < $ims"; then
          fms=$1; fmib=$2; shift 2
          inbwd_row "its fastest form: $*" "$fms" "$fmib"
          lost "$fmib / 1024" "$pgib" "on memory with the fastest in-backward form"
        fi
      fi
    fi
  else
    echo "| 2.7B training step, bf16, context 512, batch 4, median (section T) | $(kind "$gpu") | $(calc '%.1f' "$ms") ms, $(calc '%.1f' "$mib / 1024") GiB | not yet measured on the $(kind "$gpu") (reports/anchors/torch_lm.py) |"
  fi
fi
# fp32: our faster of section T's row (flash) and torch_compile's fused
# steps (materialised attention runs on cuBLAS, flash on CUDA cores).
fms=$(lm fp32 after_backward step_ms_median)
fgpu=$(lm fp32 after_backward gpu_name)
fatt=flash
tc() { # COL
  val "$DATA/torch_compile.csv" "$1" --sort step_ms_mean --where size=2.7B --where context=512 \
    --where precision=fp32 --where mode=train_step --where fusion=fused
}
tms=$(tc step_ms_mean)   # its rows predate the median; fp32 steps of ~1 s vary little
if [ -n "$tms" ] && { [ -z "$fms" ] || is_true "$tms < $fms"; }; then
  fms=$tms; fgpu=$(tc gpu_name); fatt=$(tc attention)
fi
lm_anchor=$(for_gpu torch_lm "$fgpu")
pfms=$(plm fp32 step_ms_median)
pfgpu=$(plm fp32 gpu)
if [ -n "$fms" ] && [ -n "$pfms" ] && same_kind "$fgpu" "$pfgpu"; then
  num fms "$fms"; num pfms "$pfms"
  [ "$fatt" = flash ] && fatt="flash attention" || fatt="attention materialised"
  echo "| the same step in fp32 (no TF32; $fatt) | $(kind "$fgpu") | $(calc '%.0f' "$fms") ms | torch.compile + SDPA + fused AdamW $(calc '%.0f' "$pfms") ms: $(verdict "$fms" "$pfms") |"
  lost "$fms" "$pfms" "on the fp32 step"
elif [ -n "$fms" ]; then
  num fms "$fms"
  echo "| the same step in fp32 (no TF32) | $(kind "$fgpu") | $(calc '%.0f' "$fms") ms | not yet measured on the $(kind "$fgpu") (reports/anchors/torch_lm.py) |"
fi
# 3xtf32: the same step with every fp32 product on TF32 tensor cores at
# fp32's accuracy (flash included), against the same fp32 anchor: PyTorch's
# fp32 attention multiplies so too (appendix A)
xms=$(val "$DATA/benchmarking_3xtf32_flash.csv" step_ms_median --sort -utc --where size=2.7B --where context=512)
xgpu=$(val "$DATA/benchmarking_3xtf32_flash.csv" gpu_name --sort -utc --where size=2.7B --where context=512)
if [ -n "$xms" ] && [ -n "$pfms" ] && same_kind "$xgpu" "$pfgpu"; then
  num xms "$xms"
  echo "| the same step in 3xtf32 (fp32-accurate products on TF32 tensor cores; flash) | $(kind "$xgpu") | $(calc '%.0f' "$xms") ms | the same $(calc '%.0f' "$pfms") ms: $(verdict "$xms" "$pfms") |"
  lost "$xms" "$pfms" "on the 3xtf32 step"
fi

# Activation checkpointing (2026.1): the 2.7B at context 2048, one
# checkpoint a layer, against torch.compile with torch.utils.checkpoint
# at the same grouping; with AdamW in backward where measured (its peak
# holds no whole gradient buffer), else after backward.
gck=$DATA/gradient_checkpointing.csv
gc() { # COL
  val "$gck" "$1" --sort -utc --where precision=bf16 --where optimizer="$copt" --where checkpoint_layers=1
}
copt=in_backward cform=""
cms=$(gc step_ms_median)
[ -n "$cms" ] || { copt=after_backward; cms=$(gc step_ms_median); }
if [ -n "$cms" ]; then
  cgpu=$(gc gpu_name) cmib=$(gc engine_peak_mib)
  # ...or the in-backward step keeping the norms, where faster on that GPU
  gk() { # COL
    val "$DATA/gradient_checkpointing_keep_norms.csv" "$1" --sort -utc --where precision=bf16 \
      --where checkpoint_layers=1 --where gpu_name="$cgpu"
  }
  kms=$(gk step_ms_median)
  if [ "$copt" = in_backward ] && [ -n "$kms" ] && is_true "$kms < $cms"; then
    cms=$kms cmib=$(gk engine_peak_mib) cform=", norms kept"
  fi
  num cms "$cms"; num cmib "$cmib"
  ck_anchor=$(for_gpu torch_lm "$cgpu")
  pcms=$(val "$ck_anchor" step_ms_median --where size=2.7B --where context=2048 --where precision=bf16 --where config=compiled_ckpt1)
  pcgib=$(val "$ck_anchor" peak_gib --where size=2.7B --where context=2048 --where precision=bf16 --where config=compiled_ckpt1)
  step_row "2.7B step, bf16, context 2048, a checkpoint every layer, AdamW ${copt%_backward} backward$cform (2026.1)" \
    "$cgpu" "$cms" "$cmib" "torch.compile + torch.utils.checkpoint" "$pcms" "$pcgib" \
    torch_lm.py "the checkpointed step"
fi

# FSDP (2026.2): the xl step at the most GPUs measured, bf16, AdamW after
# backward, against PyTorch's FSDP2 + torch.compile at the same shape and
# world size (reports/anchors/torch_ddp.py, fsdp_compiled).
fck=$DATA/fsdp_accounting.csv
fw=$(val "$fck" world_size --where precision=bf16 --where optimizer=after_backward --sort -world_size)
if [ -n "$fw" ]; then
  fv() { val "$fck" "$1" --where precision=bf16 --where optimizer=after_backward --where world_size="$fw" --sort -utc; }
  fms=$(fv step_ms_median) fmib=$(fv engine_peak_mib) fgpu=$(fv gpu_name)
  num fms "$fms"; num fmib "$fmib"
  fa=$(for_gpu torch_ddp "$fgpu")
  pv() { val "$fa" "$1" --where 'config=fsdp_compiled|fsdp_compiled_cudagraphs' --where precision=bf16 --where world_size="$fw" --where size=xl --where context=128 --sort step_ms_median; }
  pfms=$(pv step_ms_median) pfgib=$(pv peak_gib)
  # PyTorch unsharded with CUDA graphs on one GPU: how much of FSDP2's
  # time is its host cost (2026.2)
  ug=$(val "$fa" step_ms_median --where config=compiled_cudagraphs --where precision=bf16 \
    --where world_size=1 --where size=xl --where context=128 --where rank_batch=2 --sort step_ms_median)
  step_row "FSDP, xl, context 128, 2 sequences a GPU, bf16, $fw GPU$( [ "$fw" = 1 ] || echo s) (2026.2)" \
    "$fgpu" "$fms" "$fmib" "FSDP2 + torch.compile + fused AdamW" "$pfms" "$pfgib" \
    torch_ddp.py "the FSDP step" \
    "${ug:+FSDP2 is host-bound here: unsharded with CUDA graphs, one GPU, $(calc '%.1f' "$ug") ms}"
  # AdamW in backward at that world size, against the same PyTorch row
  iv() { val "$fck" "$1" --where precision=bf16 --where optimizer=in_backward --where world_size="$fw" --sort -utc; }
  ims=$(iv step_ms_median) imib=$(iv engine_peak_mib)
  if [ -n "$ims" ] && [ -n "$pfms" ] && same_kind "$(iv gpu_name)" "$fgpu"; then
    step_row "the same FSDP step with AdamW in backward" "$fgpu" "$ims" "$imib" \
      "the same" "$pfms" "$pfgib" torch_ddp.py "the FSDP step with AdamW in backward"
  fi
fi

# The 2026 leaderboard (2026.9): the ~8B step on 2 GPUs, our fastest k and
# resharding, against PyTorch's fastest FSDP2 at that shape on the same
# GPU kind (reports/anchors/torch_ddp.py, any configuration).
lb=$DATA/leaderboard_2026.csv
lbv() { val "$lb" "$1" --sort step_ms_median; }
lms=$(lbv step_ms_median)
if [ -n "$lms" ]; then
  lmib=$(lbv engine_peak_mib) lgpu=$(lbv gpu_name) lsize=$(lbv size)
  lvocab=$(lbv vocab) lctx=$(lbv context) lrb=$(lbv rank_batch) lw=$(lbv world_size)
  num lms "$lms"; num lmib "$lmib"; num lrb "$lrb"; num lw "$lw"
  la=$(for_gpu torch_ddp "$lgpu")
  # the anchor rows at our shape (lwh: a list of arguments, split on use)
  lwh="--where size=$lsize --where vocab=$lvocab --where context=$lctx --where rank_batch=$lrb --where world_size=$lw --where precision=bf16"
  # shellcheck disable=SC2086
  lpv() { val "$la" "$1" $lwh --sort step_ms_median; }
  lwhat="2026 leaderboard step, ~8B, $((lrb * lw)) x $lctx tokens, bf16, $lw GPUs (2026.9)"
  [ "$(lbv checkpoint_keep_attention)" != true ] || lwhat="$lwhat, attention kept through the reruns"
  lpt="FSDP2 + torch.compile + checkpoints + fused AdamW"
  # shellcheck disable=SC2086
  ltried=$(tool count "$la" $lwh)
  if [ -z "$(lpv step_ms_median)" ] && [ "$ltried" -gt 0 ]; then
    # tried on this GPU kind, no step completed (out of memory, as a rule)
    echo "| $lwhat | $(kind "$lgpu") | $(calc '%.1f' "$lms") ms, $(calc '%.1f' "$lmib / 1024") GiB | $lpt: no configuration completed a step (section 2026.9) |"
  else
    step_row "$lwhat" "$lgpu" "$lms" "$lmib" "$lpt" \
      "$(lpv step_ms_median)" "$(lpv peak_gib)" torch_ddp.py "the leaderboard step"
    # where the fastest needs more memory than PyTorch's: our fastest row
    # within it
    ppk=$(lpv peak_gib)
    if [ -n "$ppk" ] && ! is_true "$lmib / 1024 <= $ppk"; then
      fit=$(tool select "$lb" --cols step_ms_median,engine_peak_mib,checkpoint_layers,reshard_after_forward \
              --where status=ok --sort step_ms_median | tail -n +2 |
            while IFS=, read -r a b k rs; do
              if is_true "$b / 1024 <= $ppk"; then echo "$a,$b,$k,$rs"; break; fi
            done)
      if [ -n "$fit" ]; then
        IFS=, read -r fms fpk fk frs <<ROW
$fit
ROW
        step_row "the same step within PyTorch's memory (k = $fk, resharded: $frs; section 2026.9)" \
          "$lgpu" "$fms" "$fpk" "$lpt" "$(lpv step_ms_median)" "$ppk" torch_ddp.py \
          "the leaderboard step's time within PyTorch's memory"
      fi
    fi
  fi
fi

# Attention: the leaderboard shape against cuDNN's SDPA, the long head-dim
# 128 shape against SDPA's default.
fb=$(val "$DATA/flash_leaderboard.csv" fwd_bwd_ms_per_pass --sort -utc --where impl=flash)
fbgpu=$(val "$DATA/flash_leaderboard.csv" gpu_name --sort -utc --where impl=flash)
at_anchor=$(for_gpu torch_attention "$fbgpu")
at() { # IMPL SEQ DHEAD HEADS COL: from at_anchor
  val "$at_anchor" "$5" --sort -utc --where impl="$1" --where seq="$2" --where d_head="$3" --where heads="$4" \
    --where precision=bf16 --where causal=true
}
cu=$(at sdpa_cudnn 16384 64 16 fwd_bwd_ms)
sd=$(at sdpa 16384 64 16 fwd_bwd_ms)
agpu=$(at sdpa 16384 64 16 gpu)
if [ -n "$fb" ] && [ -n "$cu" ] && same_kind "$fbgpu" "$agpu"; then
  num fb "$fb"; num cu "$cu"; num sd "$sd"
  echo "| attention fwd+bwd, leaderboard shape (1 x 16 x 16384, d 64, bf16, causal) | $(kind "$fbgpu") | $(calc '%.2f' "$fb") ms | SDPA cuDNN $(calc '%.2f' "$cu") ms (default $(calc '%.2f' "$sd")): $(verdict "$fb" "$cu") |"
  lost "$fb" "$cu" "to cuDNN's attention at the leaderboard shape"
elif [ -n "$fb" ]; then
  num fb "$fb"
  echo "| attention fwd+bwd, leaderboard shape (1 x 16 x 16384, d 64, bf16, causal) | $(kind "$fbgpu") | $(calc '%.2f' "$fb") ms | not yet measured on the $(kind "$fbgpu") (reports/anchors/torch_attention.py) |"
fi
fl() { # COL
  val "$DATA/flash_benchmarking.csv" "$1" --sort -utc --where impl=flash --where precision=bf16 --where seq=65536 --where d_head=128
}
f128=$(fl fwd_bwd_ms_per_pass)
ff128=$(fl fwd_ms_per_pass)
ft128=$(fl fwd_tflops)
fgpu128=$(fl gpu_name)
at_anchor=$(for_gpu torch_attention "$fgpu128")
s128=$(at sdpa 65536 128 1 fwd_bwd_ms)
sf128=$(at sdpa 65536 128 1 fwd_ms)
sgpu128=$(at sdpa 65536 128 1 gpu)
if [ -n "$f128" ] && [ -n "$s128" ] && same_kind "$fgpu128" "$sgpu128"; then
  num f128 "$f128"; num ff128 "$ff128"; num ft128 "$ft128"; num s128 "$s128"; num sf128 "$sf128"
  # SDPA's TFLOP/s from its time, with our FLOP count (ours over our time).
  st128=$(calc '%.1f' "$ft128 * $ff128 / $sf128")
  echo "| attention forward, 1 x 1 x 65536, d 128, bf16, causal | $(kind "$fgpu128") | $(calc '%.0f' "$ft128") TFLOP/s | SDPA $(calc '%.0f' "$st128") TFLOP/s ($(calc '%.2f' "$sf128") ms): $(verdict "$ff128" "$sf128") |"
  echo "| the same shape, fwd+bwd | $(kind "$fgpu128") | $(calc '%.2f' "$f128") ms | SDPA $(calc '%.2f' "$s128") ms: $(verdict "$f128" "$s128") |"
  lost "$ff128" "$sf128" "on long-sequence attention's forward at head dim 128"
  lost "$f128" "$s128" "on long-sequence attention's forward+backward at head dim 128"
elif [ -n "$f128" ]; then
  num f128 "$f128"
  echo "| attention fwd+bwd, 1 x 1 x 65536, d 128, bf16, causal | $(kind "$fgpu128") | $(calc '%.2f' "$f128") ms | not yet measured on the $(kind "$fgpu128") (reports/anchors/torch_attention.py) |"
fi

# NCCL's all-reduce against torch.distributed's on the same host.
bw=$(val "$DATA/allreduce.csv" busbw_gbps --sort -utc --where backend=nccl --where world_size=8 --where size_mib=1024)
pbw=$(val "$ar_anchor" busbw_gbps --sort -utc --where op=all_reduce --where world_size=8 --where size_mib=1024)
mach=$(val "$DATA/allreduce.csv" machine --sort -utc --where backend=nccl --where world_size=8 --where size_mib=1024)
# a row measured from an uncommitted tree is marked (its section says more)
ardirty=$(val "$DATA/allreduce.csv" git_dirty --sort -utc --where backend=nccl --where world_size=8 --where size_mib=1024)
pmach=$(val "$ar_anchor" machine --sort -utc --where op=all_reduce --where world_size=8 --where size_mib=1024)
if [ -n "$bw" ] && [ -n "$pbw" ] && same_kind "$mach" "$pmach"; then
  num bw "$bw"; num pbw "$pbw"
  echo "| NCCL all-reduce, 1 GiB fp32, 8 GPUs, bus bandwidth | 8 x $(kind "$mach") | $(calc '%.1f' "$bw") GB/s$([ "$ardirty" != 1 ] || printf ' (measured from an uncommitted tree; see 2.1.1)') | torch.distributed $(calc '%.1f' "$pbw") GB/s, same host |"
  lost "$pbw" "$bw" "on the all-reduce's bandwidth"
fi

# Data parallel on two GPUs, xl, context 128, two sequences a GPU: our best
# bucket size of each form (gradients on the copy engines; ZeRO-1), from
# the form's run on the fused path (FORM_fused.csv) where that is the
# faster in bf16.
dp() { # CSV PRECISION COL
  val "$DATA/$1.csv" "$3" --sort step_ms_mean --where world_size=2 --where precision="$2"
}
for form in ddp_copy_engine zero1_copy_engine; do
  src=$form path=""
  if [ -f "$DATA/${form}_fused.csv" ]; then
    f16=$(dp "${form}_fused" bf16 step_ms_mean) o16=$(dp $form bf16 step_ms_mean)
    if [ -n "$f16" ] && { [ -z "$o16" ] || is_true "$f16 < $o16"; }; then
      src=${form}_fused path=" (fused + flash)"
    fi
  fi
  d32=$(dp $src fp32 step_ms_mean)
  d16=$(dp $src bf16 step_ms_mean)
  dg=$(dp $src bf16 gpu_name)
  [ -n "$d32" ] && [ -n "$d16" ] || continue
  num d32 "$d32"; num d16 "$d16"
  # the scripted anchor on our GPU (its fastest bucket size), as the DDP
  # section reads it; else the copied ddp_pytorch_compiled.csv
  pt2() { # PRECISION: the scripted anchor's fastest 2-GPU step on our GPU (median)
    val "$ANCHORS/torch_ddp.csv" step_ms_median --sort step_ms_median --where gpu="$dg" \
      --where 'config=compiled|compiled_cudagraphs' --where world_size=2 --where precision="$1" \
      --where size=xl --where context=128 --where rank_batch=2
  }
  p16=$(pt2 bf16) p32=$(pt2 fp32)
  # PyTorch's fp32 2-GPU step where it was measured without CUDA graphs
  # only: not its strongest form for certain (appendix B)
  g32=""
  [ -z "$p32" ] || [ "$(tool count "$ANCHORS/torch_ddp.csv" --where gpu="$dg" --where status=ok \
      --where config=compiled_cudagraphs --where world_size=2 --where precision=fp32 \
      --where size=xl --where context=128 --where rank_batch=2)" -gt 0 ] || g32=", without CUDA graphs (not measured with them)"
  pm=$dg
  if [ -z "$p16" ]; then
    p16=$(val "$ddp_anchor" step_ms --where world_size=2 --where precision=bf16 --where size=xl)
    pm=$(val "$ddp_anchor" machine --where world_size=2 --where precision=bf16 --where size=xl)
  fi
  case $form in
    ddp_copy_engine) what="DDP, gradients on the copy engines$path" ;;
    *) what="ZeRO-1 (AdamW's state sharded)$path" ;;
  esac
  if [ -n "$p16" ] && same_kind "$dg" "$pm"; then
    num p16 "$p16"
    them="PyTorch DDP + torch.compile + fused AdamW, bf16 $(calc '%.1f' "$p16") ms: $(verdict "$d16" "$p16")"
    lost "$d16" "$p16" "on data parallel ($form)"
    if [ -n "$p32" ] && [ "$pm" = "$dg" ]; then
      num p32 "$p32"
      them="PyTorch DDP + torch.compile + fused AdamW, fp32 $(calc '%.1f' "$p32") ms$g32: $(verdict "$d32" "$p32"); bf16 $(calc '%.1f' "$p16") ms: $(verdict "$d16" "$p16")"
      lost "$d32" "$p32" "on data parallel in fp32 ($form)"
    fi
  else
    them="PyTorch DDP + torch.compile + fused AdamW: not yet measured on 2 x $(kind "$dg") (reports/anchors/torch_ddp.py)"
  fi
  echo "| $what, xl, context 128, 2 sequences a GPU, fp32 / bf16 | 2 x $(kind "$dg") | $(calc '%.1f' "$d32") / $(calc '%.1f' "$d16") ms | $them |"
done
echo
echo "Each row's machine, commit and breakdown are in its section and CSV."
if [ -n "$losses" ]; then
  printf '%s\n' "$losses" | tr '|' '\n' | awk '
    { w[++n] = $0 }
    END {
      s = "We lose " w[1]
      for (i = 2; i <= n; i++) s = s (i == n ? (n > 2 ? ", and " : " and ") : ", ") w[i]
      print s "."
    }' | fold -s -w 72 | sed 's/ *$//'
fi
echo
