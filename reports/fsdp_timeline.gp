# One FSDP step of one rank: each weight group's all-gather (a bar on the
# communicator's stream, from its start to its end) and the moment the
# compute stream needs that group (a dot), one row per use in the order
# forward and backward need them.
#
#   gnuplot -c fsdp_timeline.gp IN.csv OUT.svg TITLE FORWARD_USES
#
# IN.csv: columns kind (gather or need), use (the row: the use's place in
# the step's order, from 0), t0, t1 in ms from the step's start (a need:
# t0 = t1). FORWARD_USES: how many uses forward makes (a line between
# forward's rows and backward's). A bar that ends right of its dot is
# time the compute stream waited.
if (ARGC < 4) {
  print "usage: gnuplot -c fsdp_timeline.gp IN.csv OUT.svg TITLE FORWARD_USES"
  exit status 2
}
set terminal svg size 1000,560 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set title ARG3
set xlabel "time from the step's start (ms)"
set ylabel "weight use, in the step's order (forward, then backward)"
set yrange [-1:*] reverse
set ytics 0, 10
set grid x
set key top right
fwd = real(ARG4) - 0.5
set arrow from graph 0, first fwd to graph 1, first fwd nohead dt 2 lc rgb "gray40"
set label "backward" at graph 0.01, first fwd + 1.5 tc rgb "gray40"
is(k) = (strcol("kind") eq k)
plot ARG1 using (is("gather") ? column("t0") : NaN):"use":(column("t1") - column("t0")):(0) \
       with vectors nohead lw 3 lc rgb "0x1b9e77" title "all-gather of the group (communicator's stream)", \
     ARG1 using (is("need") ? column("t0") : NaN):"use" \
       with points pt 7 ps 0.5 lc rgb "0xd95f02" title "compute needs the group"
