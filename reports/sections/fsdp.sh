#!/bin/sh
# Writeup sections fsdp and fsdp_accounting (the 2026 edition's section 7)
# and its leaderboard (section 9):
# what the FSDP code does and how it meets the handout's rules, its rows
# (experiments/fsdp_accounting.cfg, kind fsdp: xl, 2 sequences of 128 a
# GPU, on 1 and 2 GPUs); (a) the peak FSDP should save, predicted item by
# item from the one-GPU row (what a rank keeps 1/W of, what it keeps
# whole) beside the two-GPU row when there is one; (b) whether the
# gathers keep up with forward: the two-GPU forward against the one-GPU
# forward when measured, else the bytes of each layer's gather over NCCL's
# measured 2-GPU bus bandwidth (allreduce.csv) against a layer's forward;
# and the 2026 leaderboard, the ~8B step on 2 GPUs
# (experiments/leaderboard_2026.cfg). Environment as for every section.
set -eu
. "$REPORT_LIB"

csv=$CSV
on_gpu "$csv"

# v COL PREC WORLD [OPTIMIZER]: COL of the latest ok row (AdamW after
# backward unless OPTIMIZER says), or ""
cols=params,step_ms_median,fwd_ms_mean,gathers,gather_mib,gather_ms_mean
cols=$cols,exposed_gather_ms_mean,engine_peak_mib,shards_mib,grads_mib
cols=$cols,optstate_mib,window_mib,activations_mib
[ ! -f "$csv" ] ||
  memo FV "$csv" precision,world_size,optimizer "$cols" --where status=ok --sort -utc
v() {
  [ -f "$csv" ] || return 0
  memo_get FV "$2" "$3" "${4:-after_backward}" "$1"
  printf '%s\n' "$MV"
}

case $PROBLEM in
fsdp)
  cat <<'TEXT'
`parallel/fsdp.c` over a model whose weight matrices are bound from
outside (`model_options.bound_weights`). Each rank keeps 1/W of every
group (the embedding, a layer's seven matrices, the head) in fp32 with
its AdamW moments, and no bf16 copy; the norms' gains stay whole.

- **Forward and backward**: a hook before the model first reads a group
  waits for its all-gather and starts the next one, in a window of three
  slots: a gather starts once the group two uses back is released (the
  handout's rule); k + 2 slots with checkpoints of k layers; a slot per
  group, one gather each, with `reshard_after_forward = false`.
- **Gradients**: a group's gradient slot is reduce-scattered (averaged)
  as backward finishes it; the gains' are all-reduced after backward;
  AdamW updates each rank's chunks (`in_backward`: on a side stream as
  each reduce-scatter lands).
- **Mixed precision**: bf16 matrices are cast before communication (each
  rank casts its chunk into its block of the slot, then gathers in
  place); master weights, gradients and the embedding stay fp32. fp16
  too (the course tests it), with a dynamic loss scale.
- `fsdp_gather_full_params` returns every weight whole, by name.

TEXT
  if has_rows "$csv"; then
    echo "| GPUs | precision | AdamW | step (ms) | forward (ms) | gathers a step | gathered a step, per GPU (MiB) | gathering (ms) | compute waited (ms) | peak (GiB) |"
    echo "|--:|---|---|--:|--:|--:|--:|--:|--:|--:|"
    for p in fp32 bf16; do
      for w in 1 2; do
        for o in after_backward in_backward; do
          s=$(v step_ms_median "$p" "$w" "$o")
          [ -n "$s" ] || continue
          echo "| $w | $p | ${o%_backward} backward | $(f1 "$s") | $(f1 "$(v fwd_ms_mean "$p" "$w" "$o")") | $(v gathers "$p" "$w" "$o") | $(calc %.0f "$(v gather_mib "$p" "$w" "$o")") | $(f1 "$(v gather_ms_mean "$p" "$w" "$o")") | $(calc %.2f "$(v exposed_gather_ms_mean "$p" "$w" "$o")") | $(gib "$(v engine_peak_mib "$p" "$w" "$o")") |"
        done
      done
    done
    echo
    echo "_$GPU, xl, 2 sequences of 128 tokens a GPU; step: median of 10, the"
    echo "rest means. Gathering: the gathers' time on the communicator's stream;"
    echo "compute waited: how long the compute stream stood still for them (on"
    echo "one GPU a gather is a copy, in bf16 a cast)._"
    echo
    # PyTorch's FSDP2 on this GPU (reports/anchors/torch_ddp.py)
    pt=$(anchor_rows torch_ddp)
    # FSDP2 compiled in torch.compile's default mode or with CUDA graphs
    # (reduce-overhead), whichever is faster
    fsdp_pt='config=fsdp_compiled|fsdp_compiled_cudagraphs'
    pv() { # COL PREC WORLD: the fastest such row's COL
      tool value "$pt" --col "$1" --where status=ok --where "$fsdp_pt" \
        --where size=xl --where context=128 --where rank_batch=2 --where precision="$2" \
        --where world_size="$3" --sort step_ms_median --agg first --default ''
    }
    lines=''
    for p in fp32 bf16; do
      for w in 1 2; do
        o=$(v step_ms_median "$p" "$w")
        t=$(pv step_ms_median "$p" "$w")
        [ -n "$o" ] || continue
        if [ -z "$t" ]; then
          lines="$lines| $w | $p | $(f1 "$o") ms, $(gib "$(v engine_peak_mib "$p" "$w")") GiB | not yet measured on the $GPU_KIND | |
"
          todo "PyTorch's FSDP2 in $p on $w x $GPU_KIND (reports/anchors/torch_ddp.py \`--configs fsdp_compiled --precisions $p --world-sizes $w\`)"
          continue
        fi
        num "step" "$o"; num "PyTorch step" "$t"
        op=$(v engine_peak_mib "$p" "$w")
        tp=$(pv peak_gib "$p" "$w")
        m="ours the smaller"
        is_true "$op / 1024 <= $tp" || m="**we use $(calc %.2f "$op / 1024 / $tp")x its memory**"
        lines="$lines| $w | $p | $(f1 "$o") ms, $(gib "$op") GiB | $(f1 "$t") ms, $(f1 "$tp") GiB | $(verdict "$o" "$t"); $m |
"
      done
    done
    echo "PyTorch on the same GPU: FSDP2 (\`fully_shard\` per block, bf16"
    echo "gathers, fp32 reduce-scatters) + torch.compile + fused AdamW, the"
    echo "faster of the default mode and CUDA graphs (reports/anchors/torch_ddp.py):"
    echo
    echo "| GPUs | precision | ours | PyTorch FSDP2 | |"
    echo "|--:|---|--:|--:|---|"
    printf '%s' "$lines"
    echo
    # One GPU, unsharded: what the step costs PyTorch without FSDP2's hooks,
    # compiled in the default mode and with CUDA graphs; FSDP2 with CUDA
    # graphs on one GPU and two.
    u() { # CONFIG [GPUS, default 1]
      tool value "$pt" --col step_ms_median --where status=ok --where config="$1" \
        --where size=xl --where context=128 --where rank_batch=2 --where world_size="${2:-1}" \
        --where precision=bf16 --sort step_ms_median --agg first --default ''; }
    uc=$(u compiled) ug=$(u compiled_cudagraphs) fg=$(u fsdp_compiled_cudagraphs)
    fg2=$(u fsdp_compiled_cudagraphs 2)
    ours1=$(v step_ms_median bf16 1)
    if [ -n "$uc" ] && [ -n "$ug" ] && [ -n "$ours1" ]; then
      echo "At 256 tokens a GPU PyTorch's step is host-bound: unsharded on one"
      echo "GPU (bf16) it takes $(f1 "$uc") ms compiled and $(f1 "$ug") ms with CUDA graphs"
      echo "(\`mode=\"reduce-overhead\"\`), ours $(f1 "$ours1")$([ -z "$fg" ] || printf '; FSDP2 with CUDA graphs takes %s ms' "$(f1 "$fg")")$([ -z "$fg2" ] || printf ' (%s on two)' "$(f1 "$fg2")")."
      echo "The gap is FSDP2's host cost, not the sharding."
      # the 2-GPU comparison above is only as strong as the configurations tried
      g2=$(tool count "$pt" --where config=fsdp_compiled_cudagraphs --where world_size=2 \
        --where size=xl --where context=128 --where rank_batch=2)
      if [ "$g2" -eq 0 ]; then
        echo "FSDP2 with CUDA graphs is not yet measured on 2 GPUs (\`--configs"
        echo "fsdp_compiled_cudagraphs --world-sizes 2\`)."
        todo "PyTorch's FSDP2 with CUDA graphs on 2 x $GPU_KIND (reports/anchors/torch_ddp.py)"
      fi
    elif [ -n "$uc" ]; then
      echo "At 256 tokens a GPU PyTorch's step is slow even unsharded (compiled,"
      echo "bf16: $(f1 "$uc") ms), which points at its per-operation host cost, not the sharding."
    fi
    echo
  fi
  if [ -f "$csv" ]; then
    failed_jobs "$csv" precision,world_size,optimizer,status,message "precision,GPUs,AdamW,status,message"
  else
    echo "Not measured yet: \`./runner experiments/fsdp_accounting.cfg\`."
    echo
    todo "fsdp_accounting.csv (\`./runner experiments/fsdp_accounting.cfg\`)"
  fi
  ;;

fsdp_accounting)
  echo "### (a) What FSDP saves from the peak"
  echo
  p1=$(v params fp32 1)
  if [ -z "$p1" ]; then
    echo "Not measured yet: \`./runner experiments/fsdp_accounting.cfg\`."
  else
    cat <<'TEXT'
Optimizer-state sharding (3.2) divides AdamW's moments (8 bytes a
parameter) by W; FSDP divides the weights (4) and gradients
(4) too. Activations, the gathered window and the two gradient slots stay
whole: the floor as W grows. Per GPU, GiB: the one-GPU row's items, each
sharded one halved (predicted), and the measured 2-GPU row:

TEXT
    echo "| item | fp32, 1 GPU | fp32, 2 GPUs predicted | fp32, 2 GPUs | bf16, 1 GPU | bf16, 2 GPUs predicted | bf16, 2 GPUs |"
    echo "|---|--:|--:|--:|--:|--:|--:|"
    # per precision: items at 1 GPU, and predicted at 2
    row() { # LABEL COL SHARDED
      line="| $1"
      for p in fp32 bf16; do
        a=$(v "$2" "$p" 1)
        b=$(v "$2" "$p" 2)
        P=$(v params "$p" 1)
        if [ "$3" = grads ]; then
          # the gradient shard (4 bytes a parameter) halves; the slots do not
          pr=$(calc %.3f "$a - $P * 4 / 1048576 / 2")
        elif [ "$3" = 1 ]; then pr=$(calc %.3f "$a / 2")
        else pr=$a; fi
        line="$line | $(gib "$a") | $(gib "$pr") | $(gib "$b")"
      done
      echo "$line |"
    }
    row "weights (fp32 shard, gains)" shards_mib 1
    row "gradients (shard, two slots)" grads_mib grads
    row "AdamW's moments" optstate_mib 1
    row "gathered window" window_mib 0
    row "activations" activations_mib 0
    for p in fp32 bf16; do
      a=$(v engine_peak_mib "$p" 1)
      P=$(v params "$p" 1)
      num "engine_peak_mib" "$a"
      saved=$(calc %.3f "($P * (4 + 4 + 8)) / 1048576 / 2")
      eval "pk_$p=\$a sv_$p=\$saved"
    done
    echo
    ib=$(v engine_peak_mib bf16 1 in_backward)
    [ -z "$ib" ] || { echo "With AdamW in backward no gradient shard lives through backward: the"
                      echo "one-GPU bf16 peak is $(gib "$ib") GiB against $(gib "$(v engine_peak_mib bf16 1)")."; echo; }
    echo "At 2 GPUs FSDP should take the fp32 peak from $(gib "$pk_fp32") to about"
    echo "$(gib "$(calc %.3f "$pk_fp32 - $sv_fp32")") GiB and the bf16 one from $(gib "$pk_bf16") to about"
    echo "$(gib "$(calc %.3f "$pk_bf16 - $sv_bf16")") GiB: it saves about $(calc %.0f "100 * $sv_fp32 / $pk_fp32")% against the $(calc %.0f "100 * $(v optstate_mib fp32 1) / 2 / $pk_fp32")% that sharding"
    echo "only the moments saves."
    m32=$(v engine_peak_mib fp32 2)
    m16=$(v engine_peak_mib bf16 2)
    [ -z "$m32" ] || [ -z "$m16" ] ||
      echo "Measured on 2 GPUs: $(gib "$m32") and $(gib "$m16") GiB."
    echo
  fi
  echo "### (b) Do the gathers keep up with forward?"
  echo
  L=48   # xl (model.md): d_model 1600, d_ff 6400, 48 layers
  f1=$(v fwd_ms_mean bf16 1)
  f2=$(v fwd_ms_mean bf16 2)
  if [ -n "$f1" ]; then
    echo "On one GPU, where each bf16 gather is a cast, compute waited"
    echo "$(calc %.2f "$(v exposed_gather_ms_mean bf16 1)") ms of $(f1 "$(v gather_ms_mean bf16 1)") ms of gathering a bf16 step: each gather runs while the"
    echo "group before it computes, as the schedule intends."
    echo
  fi
  # The figure: rank 0's last step (AdamW after backward) in fp32 and in
  # bf16, on 2 GPUs when measured, else on one: each gather against the
  # need it serves. fp32's gathers are long enough to see; bf16's are the
  # ones the text above counts.
  jsonl="${csv%.csv}.samples.jsonl"
  tw=2
  [ -n "$f2" ] || tw=1
  # tl_csv PREC OUT: that step's gathers and needs as fsdp_timeline.gp
  # reads them; prints forward's use count, nothing if not measured
  tl_csv() {
    tl_line=''
    [ ! -f "$jsonl" ] || tl_line=$(awk -v w="\"world_size\": \"$tw\"" -v p="\"precision\": \"$1\"" '
      index($0, w) && index($0, p) &&
      !index($0, "\"in_backward\"") && index($0, "\"gather_start_ms\"") { l = $0 }
      END { print l }' "$jsonl")
    [ -n "$tl_line" ] || return 0
    tl_g="$REPORT_TMP/fsdp_gathers_$1" tl_u="$REPORT_TMP/fsdp_uses_$1"
    sample_list "$tl_line" gather_group > "$tl_g.1"
    sample_list "$tl_line" gather_start_ms > "$tl_g.2"
    sample_list "$tl_line" gather_end_ms > "$tl_g.3"
    paste -d, "$tl_g.1" "$tl_g.2" "$tl_g.3" > "$tl_g"
    sample_list "$tl_line" use_group > "$tl_u.1"
    sample_list "$tl_line" need_ms > "$tl_u.2"
    paste -d, "$tl_u.1" "$tl_u.2" > "$tl_u"
    # gather i serves the first use of its group at or after its start
    awk -F, 'NR == FNR { ug[NR - 1] = $1; un[NR - 1] = $2; n = NR; next }
             FNR == 1 { print "kind,use,t0,t1" }
             { for (k = 0; k < n; k++) if (ug[k] == $1 && un[k] >= $2) { printf "gather,%d,%s,%s\n", k, $2, $3; break } }
             END { for (k = 0; k < n; k++) printf "need,%d,%s,%s\n", k, un[k], un[k] }' \
      "$tl_u" "$tl_g" > "$2"
    # forward's uses: the groups in rising order, up to the first repeat
    tl_nf=$(awk 'NR > 1 && $1 <= p { print NR - 1; exit } { p = $1 }' "$tl_u.1")
    echo "${tl_nf:-0}"
  }
  set --
  for p in fp32 bf16; do
    nf=$(tl_csv $p "$REPORT_TMP/fsdp_timeline_$p.csv")
    [ -z "$nf" ] || set -- "$@" "$REPORT_TMP/fsdp_timeline_$p.csv" "$p" "$nf"
  done
  if [ -n "$GNUPLOT" ] && [ $# -gt 0 ]; then
    "$GNUPLOT" -c "$REPORTS/fsdp_timeline.gp" "$OUT/fsdp_timeline.svg" \
      "xl, context 128, 2 sequences a GPU, $tw x $GPU_KIND, rank 0's last step" "$@"
    echo "![All-gathers against the moments compute needs each group](fsdp_timeline.svg)"
    echo
    echo "_A bar ending right of its dot is time compute waited._"
    echo
  fi
  if [ -n "$f2" ] && [ -n "$f1" ]; then
    # keeps up: compute waited under 5% of the step. A gather's time
    # (gathering / gathers) against a layer's forward on one GPU (its
    # forward / L): the batch from which it would.
    for p in fp32 bf16; do
      w=$(v exposed_gather_ms_mean "$p" 2)
      st=$(v step_ms_median "$p" 2)
      # a precision the sweep left out
      [ -n "$w$st" ] || continue
      num "exposed_gather_ms_mean" "$w"
      num "step_ms_median" "$st"
      one=$(calc %.3f "$(v gather_ms_mean "$p" 2) / $(v gathers "$p" 2)")
      lay=$(calc %.3f "$(v fwd_ms_mean "$p" 1) / $L")
      if is_true "$w <= 0.05 * $st"; then verdict_p="**keeps up**"
      else verdict_p="**does not keep up**"; fi
      echo "- $p on 2 GPUs $verdict_p: compute waited $(calc %.2f "$w") ms of a $(f1 "$st") ms step for"
      echo "  $(f1 "$(v gather_ms_mean "$p" 2)") ms of gathers; forward $(f1 "$(v fwd_ms_mean "$p" 2)") ms against $(f1 "$(v fwd_ms_mean "$p" 1)") on one GPU."
      echo "  A gather takes $(calc %.2f "$one") ms, a layer's forward $(calc %.2f "$lay") ms at 2 sequences a GPU$(
        is_true "$one > $lay" && printf ': a layer would hide its gather from about %s sequences' "$(calc %.0f "2 * $one / $lay + 0.5")")."
    done
    echo
  elif [ -n "$f1" ] && [ -n "$(v fwd_ms_mean fp32 1)" ]; then
    lay=$(calc %.0f "(4 * 1600 * 1600 + 3 * 1600 * 6400)")
    ar="$DATA/allreduce.csv"
    bw=''
    [ -f "$ar" ] && bw=$(tool value "$ar" --col busbw_gbps --where status=ok \
                          --where backend=nccl --where world_size=2 --where size_mib=100 \
                          --sort -utc --agg first --default '')
    echo "Not measured: it needs 2 GPUs (\`./runner experiments/fsdp_accounting.cfg\`"
    echo "on two). Predicted from what is measured: xl's layer is $(calc %.1f "$lay / 1e6") M parameters;"
    if [ -n "$bw" ]; then
      tb=$(calc %.3f "$lay * 2 / 2 / ($bw * 1e9) * 1e3")
      tf=$(calc %.3f "$lay * 4 / 2 / ($bw * 1e9) * 1e3")
      cb=$(calc %.3f "$f1 / $L")
      cf=$(calc %.3f "$(v fwd_ms_mean fp32 1) / $L")
      echo "each GPU receives half of it, at the $(calc %.0f "$bw") GB/s bus bandwidth NCCL"
      echo "reached between 2 ${GPU_KIND}s (allreduce.csv, 100 MiB): $(calc %.2f "$tb") ms a layer in bf16,"
      echo "$(calc %.2f "$tf") ms in fp32, against a layer's forward of $(calc %.2f "$cb") and $(calc %.2f "$cf") ms"
      keeps() { is_true "$1 <= $2" && echo "should keep up" || echo "should not keep up"; }
      echo "on one GPU, 2 sequences of 128 tokens: **fp32 $(keeps "$tf" "$cf"), bf16"
      echo "$(keeps "$tb" "$cb")**. A layer's products grow with the batch and its gather does"
      echo "not: bf16 hides its gathers from about $(calc %.0f "2 * $tb / $cb + 0.5") sequences a GPU."
    fi
    echo
  else
    echo "Not measured yet: \`./runner experiments/fsdp_accounting.cfg\`."
    echo
  fi
  ;;
leaderboard_2026)
  # the 2026 leaderboard: the 8B step (experiments/leaderboard_2026.cfg);
  # its shape from the rows
  if has_rows "$csv"; then
    lone() { tool value "$csv" --col "$1" --where status=ok --agg first; }
    sN=$(lone params) sT=$(lone context) sR=$(lone rank_batch) sW=$(lone world_size) sS=$(lone steps)
    for x in "$sN" "$sT" "$sR" "$sW" "$sS"; do num "leaderboard_2026 shape" "$x"; done
    echo "The leaderboard's model ($(calc %.2f "$sN / 1e9") B parameters), $((sR * sW)) sequences of $sT"
    echo "tokens, bf16, on $sW GPUs: FSDP, AdamW in backward, checkpoints of k layers;"
  else
    echo "The leaderboard's model: FSDP, AdamW in backward, checkpoints of k layers;"
  fi
  echo "weights resharded after forward or kept, attention's output kept for"
  echo "reruns or rerun, logits whole or in chunks."
  echo
  if has_rows "$csv"; then
    # head_chunk: a column since the job took it (older rows: 0, whole)
    hc=
    case ",$(head -n 1 "$csv")," in *,head_chunk,*) hc=,head_chunk ;; esac
    # each arrangement's latest ok row (lv), and its first (atk)
    memo L "$csv" "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention$hc" \
      step_ms_median,engine_peak_mib --where status=ok --sort -utc
    memo LF "$csv" "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention$hc" \
      step_ms_median,engine_peak_mib --where status=ok
    echo "| k | resharded after forward | attention kept | head chunk (tokens) | step (ms) | peak per GPU (GiB) |"
    echo "|--:|---|---|--:|--:|--:|"
    tool distinct "$csv" --cols "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention$hc" \
        --where status=ok --sort checkpoint_layers | while IFS=: read -r k rs ka ch; do
      lv() { memo_get L "$k" "$rs" "$ka" ${hc:+"$ch"} "$1"; printf '%s\n' "$MV"; }
      echo "| $k | $rs | $ka | ${ch:-0} | $(f1 "$(lv step_ms_median)") | $(gib "$(lv engine_peak_mib)") |"
    done
    echo
    echo "_${GPU}s; median of $sS steps$(commits_note "$csv")._"
    echo
    # the best row, its model FLOPs (6 a non-embedding parameter a token,
    # causal attention's 6 L d T a token; recomputation not counted) and
    # rank 0's kernel families
    best=$(tool select "$csv" --cols "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention,step_ms_median,size,context,tokens_per_step,vocab,params${hc:-,checkpoint_layers},message" \
             --where status=ok --sort step_ms_median | sed -n 2p)
    IFS=, read -r bk brs bka bms bsize bT btok bV bN bch bmsg <<ROW
$best
ROW
    [ -n "$hc" ] || bch=0
    for x in "$bms" "$bT" "$btok" "$bV" "$bN"; do num "leaderboard_2026 best row" "$x"; done
    bd=${bsize%%/*}
    bL=$(printf '%s' "$bsize" | cut -d/ -f3)
    floors "$GPU"
    aflops=$(calc %.6g "6 * $bL * $bd * $bT * $btok")
    flops=$(calc %.6g "6 * ($bN - $bV * $bd) * $btok + $aflops")
    tf=$(calc %.0f "$flops / ($bms / 1000) / 2 / 1e12")
    att=$(fam "$bmsg" attention)
    mm=$(fam "$bmsg" matmul)
    worst=$(tool value "$csv" --col step_ms_median --where status=ok \
              --where reshard_after_forward="$brs" --where checkpoint_keep_attention="$bka" \
              ${hc:+--where head_chunk="$bch"} --agg max)
    other=$([ "$brs" = true ] && echo false || echo true)
    atk() { # COL RESHARD [K [KEPT [CHUNK]]]: the ok row's COL at k = K,
            # attention kept or not, head chunk (each the best row's by
            # default), or ""
      memo_get LF "${3:-$bk}" "$2" "${4:-$bka}" ${hc:+"${5:-$bch}"} "$1"; printf '%s\n' "$MV"
    }
    # " (rows from two commits)" where the best row and the one it is
    # compared with were measured from different commits
    b_git=$(atk git_commit "$brs")
    vintage() { [ "$1" = "$b_git" ] || printf 'rows from two commits'; }
    ok_ms=$(atk step_ms_median "$other")   # the same k the other way
    ok_pk=$(atk engine_peak_mib "$other")
    b_pk=$(atk engine_peak_mib "$brs")
    rs_w() { [ "$1" = true ] && echo "resharded" || echo "kept"; }
    ka_w() { [ "$1" = true ] && echo "kept" || echo "rerun"; }
    ch_w() { [ "$1" = 0 ] && echo "whole logits" || echo "chunks of $1 tokens"; }
    # the course's naive baseline: 10 s a step
    echo "**Best step: $(f1 "$bms") ms** (k = $bk, weights $(rs_w "$brs"), attention $(ka_w "$bka"), $(ch_w "$bch")) on ${GPU}s$(
      is_true "$bms < 10000" && echo ", under the course's naive baseline of 10 s (timed on B200s)"):"
    echo "$(calc %.0f "$btok / ($bms / 1000)") tokens/s, $tf TFLOP/s a GPU of model"
    echo "FLOPs (6 a non-embedding parameter a token plus attention's 6 L d T,"
    echo "reruns not counted), $(calc %.0f "100 * $tf / $BF16_TFLOPS")% of $([ "$FLOORS_GPU" = "$GPU" ] && echo the || echo "an $FLOORS_KIND's") measured bf16 product rate ($BF16_TFLOPS TFLOP/s)."
    if [ -n "$att" ] && [ -n "$mm" ]; then
      echo "Rank 0's attention takes $(calc %.0f "$att") ms against the products' $(calc %.0f "$mm") ms"
      echo "for $(calc %.0f "100 * $aflops / $flops")% of the FLOPs: attention is the lever."
    fi
    # One setting changed at a time from the best row, the others as it
    # has them; then over every such pair in the table (each arrangement's
    # latest row), since a setting's effect depends on the others (keeping
    # the weights loses with attention rerun at k = 2).
    # shellcheck disable=SC2086 # hc: empty, or one more column
    lrows=$(tool select "$csv" --where status=ok --sort -utc \
              --first-of "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention$hc" \
              --cols "checkpoint_layers,reshard_after_forward,checkpoint_keep_attention$hc,step_ms_median" --sep '|')
    # pairs FIELD A B: "N WINS LO HI" over the rows that differ only in
    # field FIELD (1 k, 2 resharded, 3 attention kept, 4 head chunk), A's
    # speed against B's (B's time over A's; WINS: A the faster)
    pairs() {
      printf '%s\n' "$lrows" | awk -F'|' -v f="$1" -v a="$2" -v b="$3" '
        NF == 4 { $5 = $4; $4 = 0 }   # rows without head_chunk: whole
        NF >= 4 { key = ""; for (i = 1; i <= 4; i++) if (i != f) key = key "|" $i
                  if ($f == a) ta[key] = $5; else if ($f == b) tb[key] = $5 }
        END { for (k in ta) if (k in tb) { r = tb[k] / ta[k]; n++; w += r > 1
                if (n == 1 || r < lo) lo = r; if (n == 1 || r > hi) hi = r }
              if (n) printf "%d %d %.2f %.2f\n", n, w, lo, hi }'
    }
    # over_all FIELD A B: "LOx to HIx, faster at W of N" over the table's
    # pairs, or nothing with one pair
    over_all() {
      # shellcheck disable=SC2046 # "N WINS LO HI": four words
      set -- $(pairs "$1" "$2" "$3")
      [ $# -eq 4 ] && [ "$1" -gt 1 ] || return 0
      printf '%sx to %sx, faster at %s of %s' "$3" "$4" "$2" "$1"
    }
    # notes A B: " (A; B)" of those not empty, or nothing
    notes() {
      _n="$1${1:+${2:+; }}$2"
      [ -z "$_n" ] || printf ' (%s)' "$_n"
    }
    echo "One setting changed from the best row (in parentheses, over every such pair in the table):"
    if [ -n "$ok_ms" ] && [ -n "$ok_pk" ]; then
      num "leaderboard_2026 peak" "$ok_pk"
      num "leaderboard_2026 peak" "$b_pk"
      echo "weights $(rs_w "$brs") against $(rs_w "$other"): $(as_fast "$bms" "$ok_ms"), $(calc %+.1f "($b_pk - $ok_pk) / 1024") GiB a GPU$(notes "$(over_all 2 "$brs" "$other")" "$(vintage "$(atk git_commit "$other")")");"
    fi
    na=$([ "$bka" = true ] && echo false || echo true)
    ka_ms=$(atk step_ms_median "$brs" "$bk" "$na") ka_pk=$(atk engine_peak_mib "$brs" "$bk" "$na")
    if [ -n "$ka_ms" ] && [ -n "$ka_pk" ]; then
      num "leaderboard_2026 step" "$ka_ms"
      echo "attention $(ka_w "$bka") against $(ka_w "$na"): $(as_fast "$bms" "$ka_ms"), $(calc %+.1f "($b_pk - $ka_pk) / 1024") GiB$(notes "$(over_all 3 "$bka" "$na")" "$(vintage "$(atk git_commit "$brs" "$bk" "$na")")");"
    fi
    # the head in chunks against whole (or back), at the best row's k,
    # resharding and attention
    if [ -n "$hc" ]; then
      och=$(tool value "$csv" --col head_chunk --where status=ok --where head_chunk!="$bch" \
              --agg first --default '')
      ch_ms=$(atk step_ms_median "$brs" "$bk" "$bka" "$och") ch_pk=$(atk engine_peak_mib "$brs" "$bk" "$bka" "$och")
      if [ -n "$och" ] && [ -n "$ch_ms" ] && [ -n "$ch_pk" ]; then
        num "leaderboard_2026 step" "$ch_ms"
        echo "$(ch_w "$bch") against $(ch_w "$och"): $(as_fast "$bms" "$ch_ms"), $(calc %+.1f "($b_pk - $ch_pk) / 1024") GiB$(notes "$(over_all 4 "$bch" "$och")" "$(vintage "$(atk git_commit "$brs" "$bk" "$bka" "$och")")");"
        # chunks rerun the head's product in backward: 2 x tokens x d x V
        echo "chunks rerun the head's product, $(calc %.1f "100 * 2 * $btok * $bd * $bV / $flops")% more FLOPs."
      fi
    fi
    # k's spread: at the best row's other settings (worst, above), and the
    # widest over the table's settings, named
    kspread=$(printf '%s\n' "$lrows" | awk -F'|' '
      NF == 4 { $5 = $4; $4 = 0 }
      NF >= 4 { g = $2 "|" $3 "|" $4; if (!(g in lo) || $5 < lo[g]) lo[g] = $5; if ($5 > hi[g]) hi[g] = $5 }
      END { for (g in lo) { r = hi[g] / lo[g] - 1; if (r > best) { best = r; bg = g } }
            if (bg != "") { split(bg, x, "|"); printf "%.1f %s %s %s\n", 100 * best, x[1], x[2], x[3] } }')
    printf '%s' "k moves the step by $(calc %.1f "100 * ($worst - $bms) / $bms")% at most at the best row's settings"
    if [ -n "$kspread" ]; then
      # shellcheck disable=SC2086 # "PCT RESHARDED KEPT CHUNK": four words
      set -- $kspread
      [ "$2 $3 $4" = "$brs $bka $bch" ] || printf '%s' ", $1% over the table"
    fi
    echo ": every k reruns one forward."
    echo
    # PyTorch at this shape on this GPU (reports/anchors/torch_ddp.py):
    # FSDP2 + torch.compile + checkpoints, its fastest configuration
    pt=$(anchor_rows torch_ddp)
    bW=$(tool value "$csv" --col world_size --where status=ok --agg first)
    bR=$(tool value "$csv" --col rank_batch --where status=ok --agg first)
    lw="--where size=$bsize --where vocab=$bV --where context=$bT --where rank_batch=$bR --where world_size=$bW --where precision=bf16"
    # shellcheck disable=SC2086 # lw is a list of arguments
    if [ "$(tool count "$pt" $lw)" -gt 0 ]; then
      # shellcheck disable=SC2086
      pbest=$(tool select "$pt" --cols config,step_ms_median,peak_gib $lw --where status=ok \
                --sort step_ms_median | sed -n 2p)
      # its configurations as "config: status, ...": all, and those that
      # did not complete (the rest appear like for like below)
      # shellcheck disable=SC2086
      prows=$(tool distinct "$pt" --cols config,status $lw)
      # cfg_words CONFIG: torch_ddp.py's configuration name in words
      # (fsdp[_keep]_MODE[_ckptK][_keepattn][_chunkR]); a name of another
      # form as it is, in backquotes
      cfg_words() {
        _c=$1 _w=
        case $_c in fsdp_*) ;; *) printf "\`%s\`" "$1"; return ;; esac
        _c=${_c#fsdp_}
        case $_c in *_chunk*) _w=", the loss in chunks of ${_c##*_chunk} tokens" _c=${_c%_chunk*} ;; esac
        case $_c in *_keepattn) _w=", attention kept$_w" _c=${_c%_keepattn} ;; esac
        case $_c in *_ckpt*) _w=", checkpoints of k = ${_c##*_ckpt}$_w" _c=${_c%_ckpt*} ;; esac
        case $_c in keep_*) _w=", weights kept$_w" _c=${_c#keep_} ;; *) _w=", resharded$_w" ;; esac
        case $_c in
          compiled) _c=compiled ;; eager) _c=eager ;;
          compiled_cudagraphs) _c="compiled with CUDA graphs" ;;
          *) printf "\`%s\`" "$1"; return ;;
        esac
        printf '%s%s' "$_c" "$_w"
      }
      # listed: "config:status" lines as "WORDS: STATUS; ..."
      listed() {
        _l=
        while IFS=: read -r _lc _ls; do
          [ -n "$_lc" ] || continue
          case $_ls in oom) _ls="out of memory" ;; timeout) _ls="timed out" ;; esac
          _l="$_l${_l:+; }$(cfg_words "$_lc"): $_ls"
        done
        printf '%s' "$_l"
      }
      ptried=$(printf '%s\n' "$prows" | listed)
      pfailed=$(printf '%s\n' "$prows" | grep -v ':ok$' | listed)
      if [ -n "$pbest" ]; then
        IFS=, read -r pc pms pgib <<ROW
$pbest
ROW
        num "PyTorch leaderboard step" "$pms"
        num "PyTorch leaderboard peak" "$pgib"
        m="ours the smaller"
        is_true "$b_pk / 1024 <= $pgib" || m="**we use $(calc %.2f "$b_pk / 1024 / $pgib")x its memory**"
        echo "PyTorch on the same GPUs (FSDP2 + torch.compile + torch.utils.checkpoint +"
        echo "fused AdamW, reports/anchors/torch_ddp.py) at its fastest"
        echo "($(cfg_words "$pc")): $(f1 "$pms") ms, $(f1 "$pgib") GiB a GPU: $(verdict "$bms" "$pms"); $m."
        [ -z "$pfailed" ] || echo "Also tried: $pfailed."
        # the head in chunks: our fastest such row against that anchor
        # when its loss takes the logits whole (else the table below has
        # the like-for-like pair)
        if [ -n "$hc" ] && case $pc in *_chunk*) false ;; esac; then
          crow=$(tool select "$csv" --cols step_ms_median,engine_peak_mib,checkpoint_layers,reshard_after_forward,checkpoint_keep_attention,head_chunk \
                   --where status=ok --where head_chunk!=0 --sort step_ms_median | sed -n 2p)
          if [ -n "$crow" ]; then
            IFS=, read -r cms cpk ck crs cka cch <<ROW
$crow
ROW
            num "leaderboard_2026 step" "$cms"
            num "leaderboard_2026 peak" "$cpk"
            echo "With the head in chunks of $cch tokens (k = $ck, resharded: $crs, attention kept: $cka):"
            cm="in $(calc %.2f "$cpk / 1024 / $pgib")x its memory"
            is_true "$cpk / 1024 <= $pgib" || cm="**$cm**"
            echo "$(f1 "$cms") ms, $(gib "$cpk") GiB: $(verdict "$cms" "$pms") $cm (its loss unchunked)."
          fi
        fi
        # Like for like: each of its configurations against our row with
        # the same resharding and checkpoint group (fsdp_keep_*: not
        # resharded; _ckptK: k = K), as a table (ratios ours / PyTorch,
        # bold where we lose: time above 1, memory above 1.005)
        echo
        echo "Like for like (ours / PyTorch: bold where we lose):"
        echo
        echo "| PyTorch configuration | resharded | k | attention kept | head chunk | PyTorch ms, GiB | ours ms, GiB | time | memory |"
        echo "|---|---|--:|---|--:|--:|--:|--:|--:|"
        # shellcheck disable=SC2086
        tool select "$pt" --cols config,step_ms_median,peak_gib $lw --where status=ok \
            --sort config | tail -n +2 |
          while IFS=, read -r c cms cgib; do
            # _chunkR: its loss R tokens at a time, as our head_chunk = R;
            # else the whole logits, as our head_chunk = 0
            ch=0 k=$c
            case $k in *_chunk*) ch=${k##*_chunk} k=${k%_chunk*} ;; esac
            [ -n "$hc" ] || [ "$ch" = 0 ] || continue
            # _keepattn: its checkpoints save SDPA's output, as ours with
            # checkpoint_keep_attention; else both rerun attention
            ka=false
            case $k in *_keepattn) ka=true k=${k%_keepattn} ;; esac
            k=${k##*_ckpt}
            case $c in *_ckpt*) ;; *) continue ;; esac
            rs=true
            case $c in fsdp_keep_*) rs=false ;; esac
            oms=$(atk step_ms_median "$rs" "$k" "$ka" "$ch") opk=$(atk engine_peak_mib "$rs" "$k" "$ka" "$ch")
            { [ -n "$oms" ] && [ -n "$opk" ]; } || continue
            num "PyTorch leaderboard step" "$cms"
            tr=$(calc %.2f "$oms / $cms") mr=$(calc %.2f "$opk / 1024 / $cgib")
            is_true "$oms <= $cms" || tr="**$tr**"
            is_true "$opk / 1024 <= 1.005 * $cgib" || mr="**$mr**"
            echo "| \`$c\` | $rs | $k | $ka | $ch | $(f1 "$cms"), $(f1 "$cgib") | $(f1 "$oms"), $(gib "$opk") | $tr | $mr |"
          done
        echo
        # FSDP2's MixedPrecisionPolicy gathers the embedding in bf16 too,
        # so PyTorch's residual stream, which its checkpoints save, is
        # bf16 (reports/anchors/residual_dtype_check.py); ours is fp32
        echo "Part of its edge is precision: FSDP2 checkpoints a bf16 residual stream"
        echo "(reports/anchors/residual_dtype_check.py), ours fp32 as the course's model:"
        echo "$(calc %.1f "$bL * $bR * $bT * $bd * 2 / 1073741824") GiB a GPU more at k = 1."
      else
        echo "PyTorch on the same GPUs (FSDP2 + torch.compile + torch.utils.checkpoint +"
        echo "fused AdamW, reports/anchors/torch_ddp.py) did not complete a step: $ptried."
      fi
      # shellcheck disable=SC2086
      if [ "$bka" = true ] && ! tool distinct "$pt" --cols config $lw | grep -q '_keepattn'; then
        todo "PyTorch's checkpoints keeping SDPA's output (torch_ddp.py's _keepattn configs)"
      fi
      # shellcheck disable=SC2086
      if [ -n "$hc" ] && [ "$(tool count "$csv" --where status=ok --where head_chunk!=0)" -gt 0 ] &&
         ! tool distinct "$pt" --cols config $lw | grep -q '_chunk[0-9]*$'; then
        todo "PyTorch's loss in chunks (torch_ddp.py's _chunkR configs)"
      fi
    else
      echo "PyTorch at this shape is not yet measured on the $GPU_KIND (reports/anchors/torch_ddp.py's"
      echo "docstring gives the command)."
      todo "PyTorch's FSDP2 at the leaderboard shape on 2 x $GPU_KIND (reports/anchors/torch_ddp.py)"
    fi
    echo
  fi
  if [ -f "$csv" ]; then
    if [ -n "$hc" ]; then
      failed_jobs "$csv" checkpoint_layers,reshard_after_forward,checkpoint_keep_attention,head_chunk,status,message \
        "k,resharded,attention kept,head chunk,status,message"
    else
      failed_jobs "$csv" checkpoint_layers,reshard_after_forward,checkpoint_keep_attention,status,message \
        "k,resharded,attention kept,status,message"
    fi
  else
    echo "Not measured yet: it needs 2 GPUs (\`./runner experiments/leaderboard_2026.cfg\`)."
    echo
    todo "leaderboard_2026.csv on 2 GPUs (\`./runner experiments/leaderboard_2026.cfg\`)"
  fi
  ;;
esac
