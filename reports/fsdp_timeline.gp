# One FSDP step of one rank, a panel per precision: each weight group's
# all-gather (a bar on the communicator's stream, from its start to its
# end) and the moment the compute stream needs that group (a dot), one row
# per use in the order forward and backward need them.
#
#   gnuplot -c fsdp_timeline.gp OUT.svg TITLE IN.csv LABEL FORWARD_USES \
#     [IN2.csv LABEL2 FORWARD_USES2]
#
# IN.csv: columns kind (gather or need), use (the row: the use's place in
# the step's order, from 0), t0, t1 in ms from the step's start (a need:
# t0 = t1). LABEL: the panel's title. FORWARD_USES: how many uses forward
# makes (a line between forward's rows and backward's). A bar that ends
# right of its dot is time the compute stream waited.
if (ARGC != 5 && ARGC != 8) {
  print "usage: gnuplot -c fsdp_timeline.gp OUT.svg TITLE IN.csv LABEL FORWARD_USES [IN2.csv LABEL2 FORWARD_USES2]"
  exit status 2
}
panels = (ARGC == 8) ? 2 : 1
set terminal svg size 1000,(panels == 2 ? 900 : 560) font "DejaVu Sans,12" noenhanced background "white"
set output ARG1
set datafile separator comma
set datafile columnheaders
set xlabel "time from the step's start (ms)"
set ylabel "weight use, in the step's order"
set yrange [-1:*] reverse
set ytics 0, 10
set grid x
set key bottom left
is(k) = (strcol("kind") eq k)
if (panels == 2) { set multiplot layout 2,1 title ARG2 }
do for [p = 1:panels] {
  in = (p == 1) ? ARG3 : ARG6
  label = (p == 1) ? ARG4 : ARG7
  fwd = real((p == 1) ? ARG5 : ARG8) - 0.5
  set title (panels == 2 ? label : ARG2 . ", " . label)
  unset arrow
  unset label
  set arrow 1 from graph 0, first fwd to graph 1, first fwd nohead dt 2 lc rgb "gray40"
  set label 1 "forward above, backward below" at graph 0.6, first fwd - 2 tc rgb "gray40"
  plot in using (is("gather") ? column("t0") : NaN):"use":(column("t1") - column("t0")):(0) \
         with vectors nohead lw 3 lc rgb "0x1b9e77" title "all-gather of the group (communicator's stream)", \
       in using (is("need") ? column("t0") : NaN):"use" \
         with points pt 7 ps 0.5 lc rgb "0xd95f02" title "compute needs the group"
}
if (panels == 2) { unset multiplot }
