# All-reduce: median time and bus bandwidth against message size.
#
#   gnuplot -c allreduce.gp IN.csv OUT.svg "mpi:2 mpi:4 nccl:2" [ANCHOR.csv "2 4"]
#
# IN.csv: `csvtool select` output with the columns backend, world_size,
# size_mib, time_ms_median, busbw_gbps (ok rows only), sorted by backend,
# world_size, size_mib so that each series is one contiguous run of rows.
# The third argument names the series to draw, backend:world_size each.
# ANCHOR.csv (optional): world_size, size_mib, time_ms_median, busbw_gbps of
# PyTorch's NCCL all-reduce, sorted by world_size, size_mib; the fifth
# argument names its rank counts, each drawn dashed in the colour of our
# NCCL series with as many ranks.
#
# gnuplot 5.4 has no `plot ... if`: rows of other series are turned into
# NaN by the using expressions, and NaN points are skipped.

if (ARGC < 3) {
  print "usage: gnuplot -c allreduce.gp IN.csv OUT.svg \"backend:ranks ...\" [ANCHOR.csv \"ranks ...\"]"
  exit status 2
}
in = ARG1
series = ARG3
anchor = (ARGC >= 4) ? ARG4 : ""
aranks = (ARGC >= 5 && anchor ne "") ? ARG5 : ""

# Fixed size and font: the SVG must be byte-identical from run to run.
set terminal svg size 1100,600 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2

set datafile separator comma
set datafile columnheaders

# "nccl:4" -> backend "nccl", ranks 4
be(s) = s[1:strstrt(s, ":") - 1]
ranks(s) = int(s[strstrt(s, ":") + 1:])
pretty(b) = (b eq "mpi") ? "MPI+CPU" : (b eq "nccl") ? "NCCL+GPU" : b
title_of(s) = sprintf("%s, %d ranks", pretty(be(s)), ranks(s))
# Colour by backend (blues and purples for MPI, reds and pinks for NCCL),
# marker by rank count.
colour(s) = (be(s) eq "mpi") \
  ? ((ranks(s) == 2) ? "#1f77b4" : (ranks(s) == 4) ? "#17becf" : \
     (ranks(s) == 6) ? "#6a3d9a" : "#393b79") \
  : ((ranks(s) == 2) ? "#d62728" : (ranks(s) == 4) ? "#ff7f0e" : \
     (ranks(s) == 6) ? "#8c564b" : "#e377c2")
marker(s) = (ranks(s) == 2) ? 7 : (ranks(s) == 4) ? 5 : (ranks(s) == 6) ? 9 : 13
mine(s) = (strcol("backend") eq be(s) && column("world_size") == ranks(s))
x_of(s) = mine(s) ? column("size_mib") : NaN
ax_of(r) = (column("world_size") == r) ? column("size_mib") : NaN

set logscale x 2
# Range from the data, with room for the end markers; of the labelled tics
# gnuplot draws only those inside that range.
set autoscale x
set offsets graph 0.04, graph 0.04, 0, 0
set xtics ("1 KiB" 1.0/1024, "10 KiB" 10.0/1024, "100 KiB" 100.0/1024, \
           "1 MiB" 1, "10 MiB" 10, "100 MiB" 100, "1 GiB" 1024, "10 GiB" 10240)
set xlabel "message size per rank (fp32 data, MiB = 2^20 bytes)"
set grid xtics ytics mytics lc rgb "#dddddd" lw 1 dt 1
set border 3
set tics nomirror
set logscale y 10
set format y "%g"
# Panels and the legend are placed by hand (screen fractions): one legend
# for both panels, in a strip of its own below them, where it hides no data.
set multiplot title "All-reduce (sum) of fp32 data on one node: MPI between CPU processes, NCCL between GPUs"
set tmargin at screen 0.90
set bmargin at screen 0.31
unset key

set lmargin at screen 0.07
set rmargin at screen 0.48
set ylabel "median time per all-reduce (ms)"
plot for [i=1:words(series)] in \
       using (x_of(word(series, i))):"time_ms_median" \
       with linespoints lw 2 pt marker(word(series, i)) ps 0.9 \
       lc rgb colour(word(series, i)), \
     for [k=1:words(aranks)] anchor using (ax_of(int(word(aranks, k)))):"time_ms_median" \
       with linespoints lw 1.5 dt (6,4) pt 6 ps 0.9 lc rgb colour("nccl:" . word(aranks, k))

set lmargin at screen 0.57
set rmargin at screen 0.98
set ylabel "bus bandwidth (GB/s, 10^9 bytes/s)"
plot for [i=1:words(series)] in \
       using (x_of(word(series, i))):"busbw_gbps" \
       with linespoints lw 2 pt marker(word(series, i)) ps 0.9 \
       lc rgb colour(word(series, i)), \
     for [k=1:words(aranks)] anchor using (ax_of(int(word(aranks, k)))):"busbw_gbps" \
       with linespoints lw 1.5 dt (6,4) pt 6 ps 0.9 lc rgb colour("nccl:" . word(aranks, k))

# The legend: an empty plot of the same styles over the full width.
set lmargin at screen 0.07
set rmargin at screen 0.98
set tmargin at screen 0.19
set bmargin at screen 0.01
unset border
unset tics
unset grid
unset xlabel
unset ylabel
unset logscale
unset offsets
set xrange [0:1]
set yrange [0:1]
set key center center vertical maxrows 4 Left reverse samplen 2.5 \
  width 2 spacing 1.3
plot for [i=1:words(series)] 2 \
       with linespoints lw 2 pt marker(word(series, i)) ps 0.9 \
       lc rgb colour(word(series, i)) title title_of(word(series, i)), \
     for [k=1:words(aranks)] 2 \
       with linespoints lw 1.5 dt (6,4) pt 6 ps 0.9 lc rgb colour("nccl:" . word(aranks, k)) \
       title sprintf("PyTorch NCCL, %s ranks", word(aranks, k))

unset multiplot
unset output
