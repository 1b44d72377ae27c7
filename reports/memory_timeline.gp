# The engine's memory in use over one lm job's first step, stacked by what
# it holds, against time.
#
#   gnuplot -c memory_timeline.gp IN.csv OUT.svg TITLE "PHASES"
#
# IN.csv: columns t_ms (milliseconds since the step's forward began), then
# the cumulative GiB of params, +grads, +optimizer, +activations,
# +workspace, +other (each column the sum of its group and every group
# before it); one row per allocation or free in time order, the first row
# what the engine held at the left edge and the last what it held at the
# right edge. PHASES: "START:END:LABEL ..." (ms, LABEL without spaces), one
# per phase of the step: a dashed line at each phase's start and at the
# last one's end, the label centred above its phase. Drawn largest sum
# first, so each group's band shows between its sum and the previous one.
if (ARGC < 4) {
  print "usage: gnuplot -c memory_timeline.gp IN.csv OUT.svg TITLE PHASES"
  exit status 2
}
set terminal svg size 900,480 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set key outside right top title "memory held for"
set grid ytics
set title ARG3
set xlabel "time since the step's forward pass began (ms)"
set ylabel "memory in use (GiB)"
set yrange [0:*]
set autoscale xfix
set offsets 0, 0, graph 0.12, 0
set style fill solid 0.85 noborder
phases = ARG4
do for [i=1:words(phases)] {
  p = word(phases, i)
  c1 = strstrt(p, ":")
  rest = p[c1 + 1:]
  c2 = strstrt(rest, ":")
  x0 = real(p[1:c1 - 1])
  x1 = real(rest[1:c2 - 1])
  lab = rest[c2 + 1:]
  set arrow from x0, graph 0 to x0, graph 1 nohead front dt 2 lw 1.5 lc rgb "#222222"
  if (i == words(phases)) {
    set arrow from x1, graph 0 to x1, graph 1 nohead front dt 2 lw 1.5 lc rgb "#222222"
  }
  set label lab at (x0 + x1) / 2.0, graph 0.95 center front font ",11"
}
plot ARG1 using 1:7 with fillsteps lc rgb "#bbbbbb" title "token ids", \
     "" using 1:6 with fillsteps lc rgb "#e6ab02" title "workspace", \
     "" using 1:5 with fillsteps lc rgb "#66a61e" title "activations", \
     "" using 1:4 with fillsteps lc rgb "#e7298a" title "AdamW moments", \
     "" using 1:3 with fillsteps lc rgb "#d95f02" title "gradients", \
     "" using 1:2 with fillsteps lc rgb "#1b9e77" title "parameters"
