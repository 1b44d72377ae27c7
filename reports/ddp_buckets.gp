# DDP overhead against bucket size: measured (2-GPU step - 1-GPU step, and
# the communication left after backward) next to the handout's model
#     overhead(n_b) = n_b o + s / (n_b w)
# at the bucket counts the runs had, and its idealised curve with
# n_b = s / b (every bucket full), whose minimum is at b* = sqrt(s o w).
#
#   gnuplot -c ddp_buckets.gp IN.csv OUT.svg S_MIB O_MS W_MIB_PER_MS
#
# IN.csv: columns precision, bucket_mb, n_b, overhead_ms (2-GPU - 1-GPU
# step), exposed_ms (after backward), model_ms (the model at n_b), one row
# per precision and bucket size, sorted by precision then bucket_mb.
# gnuplot 5.4 has no `plot ... if`: rows of the other precision become NaN.
if (ARGC < 5) {
  print "usage: gnuplot -c ddp_buckets.gp IN.csv OUT.svg S_MIB O_MS W_MIB_PER_MS"
  exit status 2
}
in = ARG1
s = real(ARG3)
o = real(ARG4)
w = real(ARG5)
bstar = sqrt(s * o * w)
# Full buckets of b MiB: n_b = s / b, at least one.
ideal(b) = (b < s) ? s * o / b + b / w : o + s / w

# Fixed size and font: the SVG must be byte-identical from run to run.
set terminal svg size 900,560 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders

of(p, c) = (strcol("precision") eq p) ? column(c) : NaN

set logscale xy
set xrange [0.5:20000]
set yrange [0.1:1000]
set xtics ("1 MiB" 1, "10 MiB" 10, "100 MiB" 100, "1 GiB" 1024, "10 GiB" 10240)
set format y "%g"
set xlabel "bucket size (maximum, MiB of fp32 gradients)"
set ylabel "DDP overhead per step (ms)"
set grid xtics ytics lc rgb "#dddddd" lw 1 dt 1
set border 3
set tics nomirror
set samples 400
set key outside below Left reverse samplen 2.5 maxrows 3 width 1
set arrow 1 from bstar, 0.1 to bstar, 1000 nohead dt (4,4) lc rgb "#555555"
set label 1 sprintf("b* = sqrt(s o w) = %.0f MiB", bstar) at bstar * 1.1, 500 \
  left tc rgb "#555555"

plot ideal(x) with lines lw 1.5 dt (6,4) lc rgb "#555555" \
       title "model, full buckets (n_b = s/b)", \
     in using "bucket_mb":(of("fp32", "model_ms")) with points pt 6 ps 1.4 \
       lc rgb "#000000" title "model at the runs' bucket counts", \
     in using "bucket_mb":(of("fp32", "overhead_ms")) with linespoints lw 2 \
       pt 7 lc rgb "#d62728" title "fp32: 2-GPU step - 1-GPU step", \
     in using "bucket_mb":(of("bf16", "overhead_ms")) with linespoints lw 2 \
       pt 5 lc rgb "#1f77b4" title "bf16: 2-GPU step - 1-GPU step", \
     in using "bucket_mb":(of("fp32", "exposed_ms")) with linespoints lw 1.5 \
       dt (2,3) pt 7 ps 0.7 lc rgb "#d62728" title "fp32: communication after backward", \
     in using "bucket_mb":(of("bf16", "exposed_ms")) with linespoints lw 1.5 \
       dt (2,3) pt 5 ps 0.7 lc rgb "#1f77b4" title "bf16: communication after backward"
unset output
