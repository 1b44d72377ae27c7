# Activation checkpointing: peak memory and step time against the group
# size k (layers a checkpoint group), one line per precision and optimizer
# form, and each line's peak without checkpoints as a dashed level.
#
#   gnuplot -c checkpointing.gp IN.csv OUT.svg TITLE
#
# IN.csv: columns series, k, peak_gib, step_rel, none_gib, with one
# contiguous run of rows per series (sorted by k); `series` is a label in
# words without commas ("bf16, AdamW after backward"); step_rel is the
# step time over that series' step without checkpoints; none_gib its peak
# without them. As in lm_paths.gp, each series is drawn untitled and keyed
# by a plot of nothing in its style (SVG renderers that stroke a dashed
# key sample and its curve as one path).
if (ARGC < 3) {
  print "usage: gnuplot -c checkpointing.gp IN.csv OUT.svg TITLE"
  exit status 2
}
set terminal svg size 1000,460 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
names = system(sprintf("tail -n +2 '%s' | cut -d, -f1 | uniq | tr ' ' '_' | tr '\\n' ' '", ARG1))
# Each label in words once: `mine` runs for every row of every series,
# and a system() there was a shell and a tr per row.
array labels[words(names)]
do for [i=1:words(names)] {
  labels[i] = system(sprintf("echo '%s' | tr '_' ' '", word(names, i)))
}
label(i) = labels[i]
mine(i) = (strcol(1) eq label(i))
colour(i) = word("0xd95f02 0x1b9e77 0x7570b3 0xe7298a", (i - 1) % 4 + 1) + 0
set multiplot layout 1,2 title ARG3
set logscale x 2
set grid
set xlabel "k, layers a checkpoint group (log scale)"
set key bottom right font ",11"
set ylabel "peak memory (GiB)"
set yrange [0:*]
plot for [i=1:words(names)] ARG1 using (mine(i) ? column(2) : NaN):(mine(i) ? column(3) : NaN) \
       with linespoints lw 2 pt 7 ps 0.8 lc rgb colour(i) notitle, \
     for [i=1:words(names)] ARG1 using (mine(i) ? column(2) : NaN):(mine(i) ? column(5) : NaN) \
       with lines lw 1 dt 2 lc rgb colour(i) notitle, \
     for [i=1:words(names)] NaN with linespoints lw 2 pt 7 ps 0.8 lc rgb colour(i) title label(i), \
     NaN with lines lw 1 dt 2 lc rgb "black" title "without checkpoints"
set ylabel "step time against none"
set yrange [1:*]
set key bottom left font ",11"
plot for [i=1:words(names)] ARG1 using (mine(i) ? column(2) : NaN):(mine(i) ? column(4) : NaN) \
       with linespoints lw 2 pt 7 ps 0.8 lc rgb colour(i) notitle, \
     for [i=1:words(names)] NaN with linespoints lw 2 pt 7 ps 0.8 lc rgb colour(i) title label(i)
unset multiplot
