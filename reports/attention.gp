# FlashAttention-2 against materialised attention: forward+backward TFLOP/s
# against sequence length, one panel per head dim.
#
#   gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv
#
# IN.csv: `csvtool select` of flash_benchmarking's ok rows with the columns
# precision, impl, d_head, seq, fwd_tflops, fwd_bwd_tflops, sorted by
# precision, impl, d_head, seq (each series one run of rows). ANCHOR.csv:
# d_head, seq, fwd_bwd_tflops, label of PyTorch SDPA points, drawn as
# crosses in the panel of their head dim. FLOPs: forward 4 T^2 d, backward
# 10 T^2 d per head, causal half (jobs/attention.c).
if (ARGC < 3) {
  print "usage: gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv"
  exit status 2
}
in = ARG1
anchor = ARG3
set terminal svg size 1100,760 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set logscale x 2
set logscale y 10
set format y "%g"
set xrange [96:87381]
set xtics ("128" 128, "512" 512, "2K" 2048, "8K" 8192, "32K" 32768)
set grid xtics ytics lc rgb "#dddddd"
set border 3
set tics nomirror
set key top left Left reverse samplen 2 font ",10"
series = "bf16:flash bf16:materialized fp32:flash fp32:materialized"
prec(s) = s[1:strstrt(s, ":") - 1]
impl(s) = s[strstrt(s, ":") + 1:]
colour(s) = (prec(s) eq "bf16") ? ((impl(s) eq "flash") ? "#d62728" : "#ff9896") \
                                : ((impl(s) eq "flash") ? "#1f77b4" : "#aec7e8")
dashed(s) = (impl(s) eq "flash") ? 1 : 2
mine(s, d) = (strcol("precision") eq prec(s) && strcol("impl") eq impl(s) && column("d_head") == d)
set multiplot layout 2,2 title "Causal attention, batch 1, one head: forward+backward TFLOP/s (causal FLOPs counted half)"
do for [d in "16 32 64 128"] {
  set title sprintf("d_head %s", d)
  set xlabel "sequence length"
  set ylabel "TFLOP/s"
  plot for [i=1:words(series)] in \
         using (mine(word(series, i), d + 0) ? column("seq") : NaN):"fwd_bwd_tflops" \
         with linespoints lw 2 dt dashed(word(series, i)) pt 7 ps 0.6 \
         lc rgb colour(word(series, i)) title word(series, i), \
       anchor using (column("d_head") == d + 0 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with points pt 2 ps 1.6 lw 2 lc rgb "#000000" title "PyTorch SDPA (anchor)"
}
unset multiplot
unset output
