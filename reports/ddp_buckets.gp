# DDP overhead against bucket size: the handout's model
#     overhead(n_b) = n_b o + s / (n_b w)
# with full buckets (n_b = s / b, minimum at b* = sqrt(s o w)) and at the
# bucket counts the runs had, next to what was measured: the communication
# left after backward (what the model describes) and the 2-GPU step minus
# the 1-GPU step (what the second GPU costs).
#
#   gnuplot -c ddp_buckets.gp FP32.csv BF16.csv OUT.svg S_MIB O_MS W_MIB_PER_MS
#
# FP32.csv, BF16.csv: one precision's rows each, sorted by bucket_mb, with
# columns bucket_mb, n_b, overhead_ms (2-GPU - 1-GPU step), exposed_ms
# (after backward), model_ms (the model at n_b). One file per precision,
# "-" for a precision not measured (one of the two at least).
# A value of zero or less cannot sit on the log axis: that point is left
# out (ddp.sh says so under the figure).
#
# Each series is drawn without a title and its key entry by a plot of
# nothing (NaN) in the same style: the SVG terminal writes a key sample and
# its curve as one path ("M sample L sample M curve ..."), which
# ImageMagick's own SVG renderer (convert) strokes, when dashed, as one
# line from the sample below the plot to the curve's first point. The
# model's points are drawn as circles (`with circles`), which every SVG
# renderer draws; gnuplot's point symbols are <use> references that
# ImageMagick leaves out.
if (ARGC < 6) {
  print "usage: gnuplot -c ddp_buckets.gp FP32.csv BF16.csv OUT.svg S_MIB O_MS W_MIB_PER_MS"
  exit status 2
}
f32 = ARG1
b16 = ARG2
s = real(ARG4)
o = real(ARG5)
w = real(ARG6)
bstar = sqrt(s * o * w)
# Full buckets of b MiB: n_b = s / b, at least one.
ideal(b) = (b < s) ? s * o / b + b / w : o + s / w

# Fixed size and font: the SVG must be byte-identical from run to run.
set terminal svg size 900,600 font "DejaVu Sans,12" noenhanced background "white"
set output ARG3
set datafile separator comma
set datafile columnheaders

set title sprintf("Overhead of bucketed DDP per step (xl, 2 GPUs): the model and the measurements\nmodel fitted to the all-reduce benchmark: s = %.0f MiB, o = %.3f ms per call, w = %.0f MiB/ms", s, o, w)
set logscale xy
set xrange [0.5:10000]
set yrange [0.1:1000]
set xtics ("1 MiB" 1, "10 MiB" 10, "100 MiB" 100, "1 GiB" 1024, "8 GiB" 8192)
set format y "%g"
set xlabel "maximum bucket size (MiB of fp32 gradients)"
set ylabel "overhead per step (ms)"
set grid xtics ytics lc rgb "#dddddd" lw 1 dt 1
set border 3
set tics nomirror
set samples 400
set key outside below Left reverse samplen 3 maxrows 3 width 2 height 1.5
set arrow 1 from bstar, 0.1 to bstar, 1000 nohead dt (4,4) lc rgb "#555555"
set label 1 sprintf("optimal bucket b* = sqrt(s o w) = %.0f MiB", bstar) at bstar / 1.1, 500 \
  right tc rgb "#555555"

# The value if positive, else nothing (a gap).
pos(v) = (v > 0) ? v : NaN
set style circle radius screen 0.008
# The plot command, one series at a time: a precision given as "-" (no
# rows) has neither series nor key entries; the model's circles come from
# either file (n_b is the same in both).
has32 = ARG1 ne "-"
has16 = ARG2 ne "-"
fm = has32 ? f32 : b16
C = 'ideal(x) with lines lw 1.5 dt (6,4) lc rgb "#555555" notitle'
C = C . ', fm using "bucket_mb":(pos(column("model_ms"))) with circles lw 1.5 lc rgb "#000000" fs empty notitle'
if (has32) C = C . ', f32 using "bucket_mb":(pos(column("exposed_ms"))) with linespoints lw 1.5 dt (2,3) pt 7 lc rgb "#d62728" notitle'
if (has16) C = C . ', b16 using "bucket_mb":(pos(column("exposed_ms"))) with linespoints lw 1.5 dt (2,3) pt 5 lc rgb "#1f77b4" notitle'
if (has32) C = C . ', f32 using "bucket_mb":(pos(column("overhead_ms"))) with linespoints lw 2 pt 7 lc rgb "#d62728" notitle'
if (has16) C = C . ', b16 using "bucket_mb":(pos(column("overhead_ms"))) with linespoints lw 2 pt 5 lc rgb "#1f77b4" notitle'
C = C . ', NaN with lines lw 1.5 dt (6,4) lc rgb "#555555" title "model with full buckets (n_b = s / b)"'
C = C . ', NaN with circles lw 1.5 lc rgb "#000000" fs empty title "model at the runs'' bucket counts"'
if (has32) C = C . ', NaN with linespoints lw 1.5 dt (2,3) pt 7 lc rgb "#d62728" title "fp32: communication left after backward"'
if (has16) C = C . ', NaN with linespoints lw 1.5 dt (2,3) pt 5 lc rgb "#1f77b4" title "bf16: communication left after backward"'
if (has32) C = C . ', NaN with linespoints lw 2 pt 7 lc rgb "#d62728" title "fp32: 2-GPU step minus 1-GPU step"'
if (has16) C = C . ', NaN with linespoints lw 2 pt 5 lc rgb "#1f77b4" title "bf16: 2-GPU step minus 1-GPU step"'
eval 'plot ' . C
unset output
