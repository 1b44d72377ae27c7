# flash_benchmarking's figure: forward+backward TFLOP/s of our
# FlashAttention-2 and of materialised attention, bf16 and fp32, against the
# sequence length, one panel per head dim, with PyTorch's fastest SDPA
# backend where the anchor has a bf16 causal shape.
#
#   gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv OURS16.csv GPU
#
# IN.csv: `csvtool select` of flash_benchmarking's ok rows with the columns
# precision, impl, d_head, seq, fwd_bwd_tflops, sorted by precision, impl,
# d_head, seq (each series one run of rows). ANCHOR.csv: d_head, seq,
# heads, fwd_bwd_tflops of PyTorch (a row per shape, sorted by heads,
# d_head and seq: a NaN between two rows would break the line), each drawn as a black ring in the panel of its head dim, the
# one-head rings joined by a dashed black line. OURS16.csv: d_head, seq,
# fwd_bwd_tflops of our FlashAttention-2 at the anchor's 16-head shape
# (flash_leaderboard), drawn as a red disc of the ring's size (filling the
# ring where the two agree). GPU: the rows' GPU kind, for the title. FLOPs: forward
# 4 T^2 d, backward 10 T^2 d per head, causal half (jobs/attention.c, the
# anchor's convention too). The legend lists only what has rows.
#
# A file without rows is plotted as IN with every point NaN: gnuplot warns
# of a data file with no lines, not of one whose points are all left out.
# The rings and dots are `with circles`, which every SVG renderer draws:
# gnuplot's point symbols are <use> references that ImageMagick's own SVG
# renderer (convert) leaves out, so PyTorch's points vanished there while
# the legend still named them. The lines' point symbols only decorate.
if (ARGC < 5) {
  print "usage: gnuplot -c attention.gp IN.csv OUT.svg ANCHOR.csv OURS16.csv GPU"
  exit status 2
}
in = ARG1
anchor = ARG3
ours16 = ARG4
gpu = ARG5
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
# Data rows of a file, or of one series of IN.csv (its first two columns).
rows(f) = int(system(sprintf("tail -n +2 '%s' | grep -c .", f)))
series_rows(s) = int(system(sprintf("grep -c '^%s,%s,' '%s'", prec(s), impl(s), in)))
n_anchor = rows(anchor)
n_ours16 = rows(ours16)
# Ring (PyTorch) and disc (ours, 16 heads), one radius in screen units:
# round on the log-log panels. The disc is drawn first, so the ring shows
# around it where they meet.
set style circle radius screen 0.008
set multiplot title sprintf("Causal attention on one %s, batch 1, one head: forward+backward throughput", gpu)
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
       (n_ours16 > 0 ? ours16 : in) \
         using (n_ours16 > 0 && column("d_head") == d + 0 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with circles lc rgb "#d62728" fs solid 1.0 noborder, \
       (n_anchor > 0 ? anchor : in) \
         using (n_anchor > 0 && column("d_head") == d + 0 && column("heads") == 1 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with lines lw 1.5 dt 2 lc rgb "#000000", \
       (n_anchor > 0 ? anchor : in) \
         using (n_anchor > 0 && column("d_head") == d + 0 ? column("seq") : NaN):"fwd_bwd_tflops" \
         with circles lw 2 lc rgb "#000000" fs empty
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
# (An empty title leaves an entry out.)
plot for [k=1:words(series)] 2 with linespoints lw 2 dt dashed(word(series, k)) pt 7 ps 0.6 \
       lc rgb colour(word(series, k)) \
       title (series_rows(word(series, k)) > 0 ? words_of(word(series, k)) : ""), \
     2 with circles lw 2 lc rgb "#000000" fs empty \
       title (n_anchor > 0 ? "PyTorch, fastest SDPA backend, bf16" : ""), \
     2 with circles lc rgb "#d62728" fs solid 1.0 noborder \
       title (n_ours16 > 0 ? "FlashAttention-2 (ours), bf16, 16 heads" : "")
unset multiplot
unset output
