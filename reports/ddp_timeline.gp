# The last timed step of two DDP runs, per rank: backward (from its start to
# the last gradient-ready mark, each mark a tick) and every gradient
# all-reduce (a box from its start to its end), on one time axis.
#
#   gnuplot -c ddp_timeline.gp IN.csv OUT.svg "TITLE 1" "TITLE 2" XMIN XMAX
#
# IN.csv: columns panel (1: upper panel, 2: lower), lane (4: rank 0
# backward, 3: rank 0 all-reduces, 2: rank 1 backward, 1: rank 1
# all-reduces), kind (bwd: the backward interval; ready: a gradient
# finished, t0 only; comm: one collective; cut: the lane's recording was
# cut short after t0), t0, t1 in ms from the step's start. Both panels
# share the x range [XMIN:XMAX] so they compare by eye.
# gnuplot 5.4 has no `plot ... if`: rows of other panels or kinds become
# NaN in the using expressions and are skipped.
if (ARGC < 6) {
  print "usage: gnuplot -c ddp_timeline.gp IN.csv OUT.svg \"TITLE 1\" \"TITLE 2\" XMIN XMAX"
  exit status 2
}
in = ARG1
xmin = real(ARG5)
xmax = real(ARG6)

# Fixed size and font: the SVG must be byte-identical from run to run.
set terminal svg size 1100,680 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders

is(p, k) = (column("panel") == p && strcol("kind") eq k)
mid(p, k) = is(p, k) ? (column("t0") + column("t1")) / 2 : NaN
half(p, k) = is(p, k) ? (column("t1") - column("t0")) / 2 : NaN
tick(p) = is(p, "ready") ? column("t0") : NaN
cut(p) = is(p, "cut") ? column("t0") : NaN

set xrange [xmin:xmax]
set yrange [0.4:4.6]
set ytics ("rank 0 backward" 4, "rank 0 all-reduces" 3, \
           "rank 1 backward" 2, "rank 1 all-reduces" 1)
set grid xtics lc rgb "#dddddd" lw 1 dt 1
set border 3
set tics nomirror
set style fill solid 1.0 noborder
unset key

# Panels and the legend placed by hand (screen fractions), the legend in a
# strip of its own at the bottom.
set multiplot
set lmargin at screen 0.17
set rmargin at screen 0.98

do for [p=1:2] {
  if (p == 1) {
    set tmargin at screen 0.94
    set bmargin at screen 0.62
    set title ARG3
    unset xlabel
  } else {
    set tmargin at screen 0.52
    set bmargin at screen 0.20
    set title ARG4
    set xlabel "time from the step's start (ms; forward runs first, then backward)"
  }
  plot in using (mid(p, "bwd")):"lane":(half(p, "bwd")):(0.22) \
         with boxxyerror lc rgb "#9ecae1", \
       in using (tick(p)):(column("lane") - 0.22):(0):(0.44) \
         with vectors nohead lw 0.5 lc rgb "#08519c", \
       in using (mid(p, "comm")):"lane":(half(p, "comm")):(0.3) \
         with boxxyerror lc rgb "#d62728", \
       in using (cut(p)):"lane":("  recording cut here") \
         with labels left font ",11" tc rgb "#555555"
}

# The legend: a plot of nothing (NaN) in the same styles over the full width.
set tmargin at screen 0.09
set bmargin at screen 0.0
unset border
unset tics
unset grid
unset title
unset xlabel
set xrange [0:1]
set yrange [0:1]
set key center center horizontal maxrows 1 Left reverse samplen 2.5 width 2
plot NaN with boxes lc rgb "#9ecae1" title "backward", \
     NaN with lines lw 1 lc rgb "#08519c" title "a gradient is final (hook)", \
     NaN with boxes lc rgb "#d62728" \
       title "gradient all-reduce (communication stream)"

unset multiplot
unset output
