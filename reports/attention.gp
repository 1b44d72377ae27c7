# flash_benchmarking's figure: forward+backward TFLOP/s of our
# FlashAttention-2 and of materialised attention, bf16 and fp32, against the
# sequence length, one panel per head dim, with PyTorch's fastest SDPA
# backend where the anchor has a bf16 causal shape.
#
#   gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv OURS16.csv
#
# IN.csv: `csvtool select` of flash_benchmarking's ok rows with the columns
# precision, impl, d_head, seq, fwd_bwd_tflops, sorted by precision, impl,
# d_head, seq (each series one run of rows). ANCHOR.csv: d_head, seq,
# fwd_bwd_tflops of PyTorch (one point per head dim at most), drawn as
# crosses in the panel of its head dim. OURS16.csv: the same columns for our
# FlashAttention-2 at the anchor's 16-head shape (flash_leaderboard), drawn
# as a circle. FLOPs: forward 4 T^2 d, backward 10 T^2 d per head, causal
# half (jobs/attention.c, the anchor's convention too).
if (ARGC < 4) {
  print "usage: gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv OURS16.csv"
  exit status 2
}
in = ARG1
anchor = ARG3
ours16 = ARG4
# Fixed size and font: the SVG must be byte-identical from run to run.
set terminal svg size 1100,900 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set logscale x 2
set logscale y 10
set format y "%g"
set xrange [96:87381]
set yrange [0.01:1000]
set xtics ("128" 128, "512" 512, "2K" 2048, "8K" 8192, "32K" 32768, "64K" 65536)
set grid xtics ytics lc rgb "#dddddd"
set border 3
set tics nomirror
# series: precision:impl; the legend says them in words.
series = "bf16:flash bf16:materialized fp32:flash fp32:materialized"
prec(s) = s[1:strstrt(s, ":") - 1]
impl(s) = s[strstrt(s, ":") + 1:]
words_of(s) = sprintf("%s (ours), %s", (impl(s) eq "flash") ? "FlashAttention-2" : "materialised", prec(s))
colour(s) = (prec(s) eq "bf16") ? ((impl(s) eq "flash") ? "#d62728" : "#ff9896") \
                                : ((impl(s) eq "flash") ? "#1f77b4" : "#aec7e8")
dashed(s) = (impl(s) eq "flash") ? 1 : 2
mine(s, d) = (strcol("precision") eq prec(s) && strcol("impl") eq impl(s) && column("d_head") == d)
set multiplot title "Causal attention on one H100, batch 1, one head: forward+backward throughput"
# Four panels and a strip for the one legend below them (screen fractions).
set key off
do for [i=1:4] {
  d = word("16 32 64 128", i)
  col = (i - 1) % 2
  row = (i - 1) / 2
  set lmargin at screen 0.07 + col * 0.49
  set rmargin at screen 0.48 + col * 0.49
  set tmargin at screen 0.92 - row * 0.40
  set bmargin at screen 0.66 - row * 0.40
  set title sprintf("head dimension %s", d)
  set xlabel "sequence length (tokens)"
  set ylabel "forward+backward TFLOP/s"
  plot for [k=1:words(series)] in \
         using (mine(word(series, k), d + 0) ? column("seq") : NaN):"fwd_bwd_tflops" \
         with linespoints lw 2 dt dashed(word(series, k)) pt 7 ps 0.6 \
         lc rgb colour(word(series, k)), \
       anchor using (column("d_head") == d + 0 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with points pt 2 ps 1.8 lw 2 lc rgb "#000000", \
       ours16 using (column("d_head") == d + 0 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with points pt 6 ps 1.8 lw 2 lc rgb "#d62728"
}
# The legend: an empty plot of the same styles over the full width.
set lmargin at screen 0.07
set rmargin at screen 0.98
set tmargin at screen 0.13
set bmargin at screen 0.01
unset title
unset border
unset tics
unset grid
unset xlabel
unset ylabel
unset logscale
set xrange [0:1]
set yrange [0:1]
set key center center vertical maxrows 3 Left reverse samplen 2.5 width 2 spacing 1.3
plot for [k=1:words(series)] 2 with linespoints lw 2 dt dashed(word(series, k)) pt 7 ps 0.6 \
       lc rgb colour(word(series, k)) title words_of(word(series, k)), \
     2 with points pt 2 ps 1.8 lw 2 lc rgb "#000000" \
       title "PyTorch, fastest SDPA backend, bf16", \
     2 with points pt 6 ps 1.8 lw 2 lc rgb "#d62728" \
       title "FlashAttention-2 (ours), bf16, 16 heads"
unset multiplot
unset output
