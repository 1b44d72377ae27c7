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
# first, so each group's band shows between its sum and the previous one;
# the key names each group with its size (the least and the most in the
# window where they differ), and leaves out a group that holds nothing in
# the window.
#
# Each dashed line is a plot element of its own, so the SVG holds one path
# per line: with the lines as `set arrow`s the SVG terminal writes them as
# one path of several "M ... L ..." pieces, which ImageMagick's own SVG
# renderer (convert) strokes as one zigzag, dashed from the top of each
# line to the foot of the next.
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
nph = words(phases)
# Phase I's start and end (ms) and label, from "START:END:LABEL".
ph_rest(i) = word(phases, i)[strstrt(word(phases, i), ":") + 1:]
ph_x0(i) = real(word(phases, i)[1:strstrt(word(phases, i), ":") - 1])
ph_x1(i) = real(ph_rest(i)[1:strstrt(ph_rest(i), ":") - 1])
ph_lab(i) = ph_rest(i)[strstrt(ph_rest(i), ":") + 1:]
# Boundary K of nph + 1: each phase's start, then the last one's end.
bx(k) = (k <= nph) ? ph_x0(k) : ph_x1(nph)
# The labels sit above the lines' tops (the data stay below 0.89 of the
# height: the offsets above), so a label wider than its phase (the
# optimizer step's) overhangs its boundaries without being crossed.
do for [i=1:nph] {
  set label i ph_lab(i) at (ph_x0(i) + ph_x1(i)) / 2.0, graph 0.955 center front font ",11"
}
# Each group's band (column K minus column K - 1; column 2 is the first
# group's own): its least and most GiB in the window, for the key.
# One unit for both ends of a range, from its most: GiB from 1 GiB, MiB
# below (two decimals under 1 MiB); nothing is "0".
unit(g) = (g >= 1) ? "GiB" : "MiB"
amount(g, most) = (g <= 0) ? "0" : (most >= 1) ? sprintf("%.1f", g) \
                  : (most * 1024 >= 1) ? sprintf("%.0f", g * 1024) : sprintf("%.2f", g * 1024)
array bmin[7]
array bmax[7]
do for [k=2:7] {
  stats ARG1 using (column(k) - ((k > 2) ? column(k - 1) : 0)) nooutput
  bmin[k] = STATS_min
  bmax[k] = STATS_max
}
# The key's entry: "NAME, SIZE UNIT" or "NAME, LEAST-MOST UNIT"; none for
# a group that holds nothing (gnuplot leaves an empty title out).
entry(k, name) = (bmax[k] <= 0) ? "" \
  : (amount(bmin[k], bmax[k]) eq amount(bmax[k], bmax[k])) \
  ? sprintf("%s, %s %s", name, amount(bmax[k], bmax[k]), unit(bmax[k])) \
  : sprintf("%s, %s-%s %s", name, amount(bmin[k], bmax[k]), amount(bmax[k], bmax[k]), unit(bmax[k]))
# The boundaries on a second y axis of [0:1], so that they reach the same
# height (under the labels) whatever the memory's range.
set y2range [0:1]
unset y2tics
plot ARG1 using 1:7 with fillsteps lc rgb "#bbbbbb" title entry(7, "token ids"), \
     "" using 1:6 with fillsteps lc rgb "#e6ab02" title entry(6, "workspace"), \
     "" using 1:5 with fillsteps lc rgb "#66a61e" title entry(5, "activations"), \
     "" using 1:4 with fillsteps lc rgb "#e7298a" title entry(4, "AdamW moments"), \
     "" using 1:3 with fillsteps lc rgb "#d95f02" title entry(3, "gradients"), \
     "" using 1:2 with fillsteps lc rgb "#1b9e77" title entry(2, "parameters"), \
     for [k=1:nph + 1] "+" every ::0::0 using (bx(k)):(0):(0):(0.91) axes x1y2 \
       with vectors nohead dt 2 lw 1.5 lc rgb "#222222" notitle
