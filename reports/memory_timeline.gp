# The engine's memory timeline of one lm job, stacked by what it holds.
#
#   gnuplot -c memory_timeline.gp IN.csv OUT.svg TITLE "PHASES"
#
# IN.csv: columns event, then the cumulative GiB of params, +grads,
# +optimizer, +activations, +workspace, +other (each column the sum of its
# group and every group before it), one row per allocation or free (row 0:
# what the engine held when the log started). PHASES: "event:label ..."
# pairs, a dashed line where each phase starts (labels stacked downwards:
# phases without allocations share an event). Drawn largest sum first, so
# each group's band shows between its sum and the previous one.
if (ARGC < 4) {
  print "usage: gnuplot -c memory_timeline.gp IN.csv OUT.svg TITLE PHASES"
  exit status 2
}
set terminal svg size 900,480 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set key outside right top
set grid ytics
set title ARG3
set xlabel "allocation event (engine log, model creation to the end of the first step)"
set ylabel "GiB in use"
set yrange [0:*]
set style fill solid 0.85 noborder
phases = ARG4
do for [i=1:words(phases)] {
  p = word(phases, i)
  x = real(p[1:strstrt(p, ":") - 1])
  lab = p[strstrt(p, ":") + 1:]
  set arrow from x, graph 0 to x, graph 1 nohead front dt 2 lw 1.5 lc rgb "#222222"
  set label lab at x, graph (0.96 - 0.07 * (i - 1)) left offset 0.4, 0 front font ",10"
}
plot ARG1 using 1:7 with fillsteps lc rgb "#bbbbbb" title "other (token ids)", \
     "" using 1:6 with fillsteps lc rgb "#e6ab02" title "workspace", \
     "" using 1:5 with fillsteps lc rgb "#66a61e" title "activations", \
     "" using 1:4 with fillsteps lc rgb "#e7298a" title "optimizer state", \
     "" using 1:3 with fillsteps lc rgb "#d95f02" title "gradients", \
     "" using 1:2 with fillsteps lc rgb "#1b9e77" title "parameters"
