#!/bin/sh
# Writeup section 2.1 (pytorch_attention, flash_benchmarking and the 2025
# leaderboard shape): prints the Markdown section on stdout and draws
# OUT/attention.svg.
#
# Environment (mkreport.sh sets it): DATA (folder of the CSVs: reads
# pytorch_attention.csv, flash_benchmarking.csv, flash_leaderboard.csv),
# OUT, CSVTOOL, GNUPLOT (empty: no figure). CSV (the section's own entry)
# is ignored: this section reads three experiments.
#
# Numbers come from the CSVs and from reports/anchors/attention_pytorch_h100.csv;
# the memory accounting is computed here from the shapes (bytes per
# element x elements), and the FLOP convention is jobs/attention.c's.
set -eu
LC_ALL=C
export LC_ALL

here=$(cd "$(dirname "$0")" && pwd)
reports=$(dirname "$here")
anchor="$reports/anchors/attention_pytorch_h100.csv"
gp="$reports/attention.gp"
GNUPLOT=${GNUPLOT:-}
pa="$DATA/pytorch_attention.csv"
fb="$DATA/flash_benchmarking.csv"
lb="$DATA/flash_leaderboard.csv"
. "$REPORT_LIB"
for f in "$anchor" "$gp"; do
  [ -f "$f" ] || { echo "attention.sh: $f is missing" >&2; exit 1; }
done

echo "## 2.1 Attention and FlashAttention-2"
echo
cat <<EOF
Job kind \`attention\` (jobs/attention.c) times one attention layer on one
GPU: q, k, v [batch x heads, seq, d_head] of random values in the job's
precision, \`warmup\` untimed forward+backward passes, then \`passes\`
forwards, \`passes\` backwards (after one more forward) and \`passes\`
forward+backward pairs, each loop closed by a synchronisation; times below
are per pass (loop time / passes). **materialized** computes as the
reference model does: S = QK^T / sqrt(d) in fp32, P = softmax(S) stored in
the precision (kept for backward), O = PV, the products by cuBLAS with fp32
accumulation. **flash** is our FlashAttention-2 (kernels/cuda/flash_*.cu):
tiled online softmax, only O and the logsumexp L stored, backward recomputes
P from L; bf16 on tensor cores, fp32 on CUDA cores (true fp32, no TF32).
On the H100 the bf16 forward at d 64 / 80 / 128 runs on Hopper's wgmma
with TMA loads, and the bf16 backward at d 64 in one pass on wgmma (a
block owns 128 keys; S and dP computed once per pair; dQ added into an
fp32 accumulator by atomic bulk reductions, so dq may differ in its last
bits between runs); the other head dims' backward runs two passes on
mma.sync (dK/dV, then dQ; no atomics; S and dP computed twice). TFLOP/s count forward
4 T^2 d and backward 10 T^2 d FLOPs per head (FlashAttention-2's
convention), causal half of that. Memory is the engine's exact accounting
(every allocation, scratch included) after the forward that precedes the
backward loop.

EOF

# ---- pytorch_attention ------------------------------------------------------
echo "### pytorch_attention: materialised attention, batch 8, one head, fp32"
echo
if [ ! -f "$pa" ]; then
  echo "_Not yet measured: run \`./runner experiments/pytorch_attention.cfg\`._"
  echo
else
  tool table "$pa" --cols d_head,seq,fwd_ms_per_pass,bwd_ms_per_pass,mem_before_bwd_mib,peak_mib,status,message \
    --head "d_head,seq,forward (ms),backward (ms),memory before backward (MiB),peak (MiB),status,message" \
    --sort d_head,seq --fmt fwd_ms_per_pass=%.3f --fmt bwd_ms_per_pass=%.3f \
    --fmt mem_before_bwd_mib=%.0f --fmt peak_mib=%.0f
  echo
  machine=$(tool value "$pa" --col machine --agg first --default "")
  noom=$(tool count "$pa" --where status=oom)
  # The accounting of one configuration, fp32 (4 bytes): inputs and output
  # Q, K, V, O, dO (5 B T d), P (B T^2, kept for backward), the scores S
  # (B T^2 fp32 scratch, reused for dP in backward), L (B T), and the
  # gradients dQ, dK, dV (3 B T d) written by backward.
  account() { # d seq
    awk -v d="$1" -v t="$2" 'BEGIN { b = 8; m = 1048576
      x = 5 * b * t * d * 4; p = b * t * t * 4; s = b * t * t * 4; g = 3 * b * t * d * 4
      printf "Q, K, V, O, dO %.1f MiB + P %.1f MiB + S/dP scratch %.1f MiB + L %.2f MiB + dQ, dK, dV %.1f MiB = %.1f MiB (%.2f GiB)",
        x / m, p / m, s / m, b * t * 4 / m, g / m, (x + p + s + b * t * 4 + g) / m, (x + p + s + b * t * 4 + g) / m / 1024 }'
  }
  total_gib() { # d seq
    awk -v d="$1" -v t="$2" 'BEGIN { b = 8; printf "%.2f", (8 * b * t * d * 4 + 2 * b * t * t * 4 + b * t * 4) / 1073741824 }'
  }
  # The GPU's memory as its driver counts it (cudaMemGetInfo's total), in
  # GiB: engine_cuda.c quotes it in every out-of-memory message ("... X GiB
  # free of Y GiB ..."). The first such row on the same GPU, in this
  # section's CSVs first, then in any of DATA; prints "Y|FILE" or nothing.
  gpu_total() { # GPU_NAME
    for f in "$pa" "$fb" "$lb" "$DATA"/*.csv; do
      [ -f "$f" ] || continue
      hdr=$(head -n 1 "$f")
      case ",$hdr," in *,status,*) ;; *) continue ;; esac
      case ",$hdr," in *,message,*) ;; *) continue ;; esac
      case ",$hdr," in *,gpu_name,*) ;; *) continue ;; esac
      # Best effort: a CSV it cannot read is some other section's to report.
      msgs=$(tool select "$f" --cols message --where status=oom --where gpu_name="$1") || continue
      t=$(printf '%s\n' "$msgs" | sed -n 's/.* GiB free of \([0-9][0-9.]*\) GiB.*/\1/p' | head -n 1)
      if [ -n "$t" ]; then
        printf '%s|%s' "$t" "${f##*/}"
        return 0
      fi
    done
  }
  gname=$(tool value "$pa" --col gpu_name --agg first --default "")
  cap=''
  [ -z "$gname" ] || cap=$(gpu_total "$gname")
  cap_gib=${cap%%|*} cap_file=${cap#*|}
  [ -z "$cap" ] || num "the GPU's total memory" "$cap_gib"
  # "against ...": the measured total where a row quotes it, else the
  # nominal size in the card's name ("... 80GB ...").
  if [ -n "$cap" ]; then
    against="the total the driver reports for this GPU model, $cap_gib GiB (cudaMemGetInfo, quoted by an out-of-memory row of $cap_file)"
  else
    gb=$(printf '%s\n' "$gname" | sed -n 's/.* \([0-9][0-9]*\)GB.*/\1/p')
    against=''
    [ -z "$gb" ] || against="the $gb GB in the card's name"
  fi
  if [ "$noom" -gt 0 ]; then
    [ -n "$against" ] || against="the GPU's memory"
    first=$(tool distinct "$pa" --cols seq,d_head --where status=oom --sort seq,d_head | head -n 1)
    s=${first%%:*} d=${first#*:}
    echo "The smallest configuration that runs out of memory on $machine is"
    echo "seq $s, d_head $d: $(account "$d" "$s"), against $against."
  else
    big=$(tool distinct "$pa" --cols seq,d_head --where status=ok --sort -seq,-d_head | head -n 1)
    s=${big%%:*} d=${big#*:}
    need2=$(total_gib "$d" $((2 * s))) need4=$(total_gib "$d" $((4 * s)))
    fits=''
    if [ -n "$cap" ]; then
      # Which of the two would fit, by this accounting alone.
      fit() { # GiB: workspace included
        if is_true "$1 + 32 / 1024 <= $cap_gib"; then printf 'would fit'; else printf 'would not'; fi
      }
      fits=": by this accounting seq $((2 * s)) $(fit "$need2"), seq $((4 * s)) $(fit "$need4")"
    fi
    echo "No configuration runs out of memory on $machine. The largest,"
    echo "seq $s, d_head $d, needs $(account "$d" "$s")."
    echo "The T^2 terms (P and the scores) are almost all of it and grow 4x per"
    echo "doubling of seq: by the same accounting seq $((2 * s)) would need"
    echo "$need2 GiB and seq $((4 * s)) $need4 GiB (plus the 32 MiB cuBLAS workspace)${against:+, against $against}$fits."
  fi
  echo
fi

# ---- flash_benchmarking -------------------------------------------------------
echo "### flash_benchmarking: batch 1, one head, causal"
echo
if [ ! -f "$fb" ]; then
  echo "_Not yet measured: run \`./runner experiments/flash_benchmarking.cfg\`._"
  echo
else
  tmp="$OUT/attention.tmp.csv"
  tool select "$fb" --cols precision,d_head,seq,impl,fwd_ms_per_pass,bwd_ms_per_pass,fwd_bwd_ms_per_pass,fwd_bwd_tflops,status \
    --sort precision,d_head,seq,impl > "$tmp"
  echo "Times in ms per pass; speed-up = materialised / flash forward+backward."
  echo
  echo "| precision | d_head | seq | flash fwd | flash bwd | flash fwd+bwd | flash TFLOP/s | materialised fwd | materialised bwd | materialised fwd+bwd | speed-up |"
  echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
    { k = $c["precision"] "," $c["d_head"] "," $c["seq"]
      if (!(k in seen)) { seen[k] = 1; order[n++] = k }
      if ($c["status"] != "ok") { f[k, $c["impl"]] = $c["status"]; next }
      f[k, $c["impl"]] = sprintf("%.3f|%.3f|%.3f", $c["fwd_ms_per_pass"], $c["bwd_ms_per_pass"], $c["fwd_bwd_ms_per_pass"])
      fb[k, $c["impl"]] = $c["fwd_bwd_ms_per_pass"]
      if ($c["impl"] == "flash") tf[k] = sprintf("%.1f", $c["fwd_bwd_tflops"]) }
    END { for (i = 0; i < n; i++) { k = order[i]; split(k, p, ",")
      a = f[k, "flash"]; b = f[k, "materialized"]
      if (a !~ /\|/) a = a "||"; if (b !~ /\|/) b = b "||"
      gsub(/\|/, " | ", a); gsub(/\|/, " | ", b)
      sp = (fb[k, "flash"] > 0 && fb[k, "materialized"] > 0) ? sprintf("%.1fx", fb[k, "materialized"] / fb[k, "flash"]) : ""
      printf "| %s | %s | %s | %s | %s | %s | %s |\n", p[1], p[2], p[3], a, tf[k], b, sp } }' "$tmp"
  echo
  rm -f "$tmp"
  if [ -n "$GNUPLOT" ]; then
    tmp="$OUT/attention.tmp.csv"
    atmp="$OUT/attention_anchor.tmp.csv"
    tool select "$fb" --cols precision,impl,d_head,seq,fwd_tflops,fwd_bwd_tflops --where status=ok \
      --sort precision,impl,d_head,seq > "$tmp"
    # SDPA's forward+backward rate at its shapes, our convention.
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; print "d_head,seq,fwd_bwd_tflops,label"; next }
      $c["impl"] == "sdpa" && $c["phase"] == "fwd_bwd" && $c["precision"] == "bf16" {
        f = 14 * 0.5 * $c["batch"] * $c["heads"] * $c["seq"] * $c["seq"] * $c["d_head"]
        printf "%s,%s,%.1f,%s heads\n", $c["d_head"], $c["seq"], f / ($c["time_ms"] * 1e-3) / 1e12, $c["heads"] }' "$anchor" > "$atmp"
    "$GNUPLOT" -c "$gp" "$tmp" "$OUT/attention.svg" "$atmp"
    rm -f "$tmp" "$atmp"
    echo "![FlashAttention-2 and materialised attention, TFLOP/s against sequence length](attention.svg)"
    echo
    echo "_Forward+backward TFLOP/s per head dim; crosses: PyTorch SDPA (bf16) on an"
    echo "H100 at the anchor's shapes (the d_head 64 point has 16 heads, the d_head"
    echo "128 point one)._"
  else
    echo "_The figure needs gnuplot 5.4 or later, which configure did not find._"
  fi
  echo
fi

# ---- leaderboard and goals ----------------------------------------------------
echo "### The 2025 leaderboard shape and the goals"
echo
a_fb=$(tool value "$anchor" --col time_ms --where impl=sdpa --where heads=16 --where precision=bf16 --where phase=fwd_bwd --agg first)
a_mat=$(tool value "$anchor" --col time_ms --where impl=materialized --where phase=fwd_bwd --agg first)
a_f128=$(tool value "$anchor" --col time_ms --where impl=sdpa --where seq=65536 --where phase=fwd --agg first)
num "SDPA fwd+bwd" "$a_fb"; num "materialised fwd+bwd" "$a_mat"; num "SDPA fwd d128" "$a_f128"
a_f128_tf=$(calc "%.0f" "2 * 65536 * 65536 * 128 / ($a_f128 * 1e-3) / 1e12")
if [ ! -f "$lb" ]; then
  echo "_Not yet measured: run \`./runner experiments/flash_leaderboard.cfg\`._"
else
  tool table "$lb" --cols impl,fwd_ms_per_pass,bwd_ms_per_pass,fwd_bwd_ms_per_pass,fwd_bwd_tflops,peak_mib,status,machine \
    --head "impl,forward (ms),backward (ms),forward+backward (ms),TFLOP/s,peak (MiB),status,machine" --sort impl \
    --fmt fwd_ms_per_pass=%.3f --fmt bwd_ms_per_pass=%.3f --fmt fwd_bwd_ms_per_pass=%.3f --fmt fwd_bwd_tflops=%.1f --fmt peak_mib=%.0f
  echo
  echo "Batch 1, 16 heads, seq 16384, d_head 64, bf16, causal. PyTorch on an H100"
  echo "(anchor): SDPA $a_fb ms, materialised $a_mat ms forward+backward."
  echo
  ours=$(tool value "$lb" --col fwd_bwd_ms_per_pass --where impl=flash --where status=ok --agg first --default "")
  if [ -n "$ours" ]; then
    num "our flash fwd+bwd" "$ours"
    v=$(awk -v o="$ours" 'BEGIN { exit !(o <= 4.5) }' && echo "**met**" || echo "**not met**")
    echo "- Goal \"leaderboard shape forward+backward at most 4.5 ms\": $v: $(calc "%.2f" "$ours") ms, $(calc "%.2f" "$ours / $a_fb") times SDPA's."
  fi
fi
if [ -f "$fb" ]; then
  f128=$(tool value "$fb" --col fwd_tflops --where impl=flash --where precision=bf16 --where d_head=128 --where seq=65536 --where status=ok --agg first --default "")
  if [ -n "$f128" ]; then
    num "flash fwd TFLOP/s" "$f128"
    v=$(awk -v o="$f128" 'BEGIN { exit !(o >= 450) }' && echo "**met**" || echo "**not met**")
    echo "- Goal \"d_head 128, seq 65536, bf16 causal forward at least 450 TFLOP/s\": $v: $(calc "%.0f" "$f128") TFLOP/s (SDPA $a_f128_tf)."
  fi
fi
echo
