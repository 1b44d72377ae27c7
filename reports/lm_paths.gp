# Training step time against model size, one series per precision and path.
#
#   gnuplot -c lm_paths.gp IN.csv OUT.svg TITLE
#
# IN.csv: columns series, params, step_ms, with one contiguous run of rows
# per series (sorted by series, then params); `series` is a label in words,
# "PRECISION: WHAT" (no commas), such as "bf16: ours, fused + flash
# attention" or "bf16: PyTorch eager". The colour follows WHAT, the point
# follows the precision (fp32 open, bf16 filled); series whose label
# contains "PyTorch eager" are drawn dashed, those containing
# "torch.compile" as points only (measured at a few sizes), large circles.
# gnuplot 5.4 has no `plot ... if`: rows of other series become NaN in the
# using expressions and are skipped.
#
# Each series is drawn without a title and its key entry by a plot of
# nothing (NaN) in the same style: the SVG terminal writes a key sample and
# its curve as one path, which ImageMagick's own SVG renderer (convert)
# strokes, when dashed, as one line from the sample in the key to the
# curve. The points-only series are `with circles`, which every SVG
# renderer draws; gnuplot's point symbols are <use> references that
# ImageMagick leaves out (on the lines they only decorate).
if (ARGC < 3) {
  print "usage: gnuplot -c lm_paths.gp IN.csv OUT.svg TITLE"
  exit status 2
}
set terminal svg size 900,680 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set title ARG3
set key below maxcols 2 title "\nprecision: path" font ",11"
set logscale xy
set grid
set xrange [8e7:5e9]
set yrange [4:2000]
set xlabel "model parameters (log scale)"
set ylabel "training step time (ms, log scale)"
set format x "%.0s%c"
names = system(sprintf("tail -n +2 '%s' | cut -d, -f1 | uniq | tr ' ' '_' | tr '\\n' ' '", ARG1))
# Each label in words once: `mine` runs for every row of every series,
# and a system() there was a shell and a tr per row.
array labels[words(names)]
do for [i=1:words(names)] {
  labels[i] = system(sprintf("echo '%s' | tr '_' ' '", word(names, i)))
}
label(i) = labels[i]
has(i, s) = strstrt(word(names, i), s) > 0
dashed(i) = has(i, "PyTorch_eager") ? 2 : 1
colour(i) = has(i, "op_by_op") ? 0x7570b3 : has(i, "materialised") ? 0x1b9e77 : \
            has(i, "flash") ? 0xd95f02 : has(i, "eager") ? 0x666666 : 0xe7298a
point(i) = (has(i, "torch.compile") ? 4 : 6) + (has(i, "bf16") ? 1 : 0)
line(i) = !has(i, "torch.compile")
is_line(i) = line(i) ? 1 : NaN
is_open(i) = (!line(i) && !has(i, "bf16")) ? 1 : NaN
is_filled(i) = (!line(i) && has(i, "bf16")) ? 1 : NaN
mine(i) = (strcol(1) eq label(i))
set style circle radius screen 0.009
plot for [i=1:words(names)] ARG1 \
  using (mine(i) ? is_line(i) * column(2) : NaN):(mine(i) ? column(3) : NaN) \
  with linespoints lw 2 ps 0.8 dt dashed(i) lc rgb colour(i) pt point(i) notitle, \
  for [i=1:words(names)] ARG1 \
  using (mine(i) ? is_open(i) * column(2) : NaN):(mine(i) ? column(3) : NaN) \
  with circles lw 2 lc rgb colour(i) fs empty notitle, \
  for [i=1:words(names)] ARG1 \
  using (mine(i) ? is_filled(i) * column(2) : NaN):(mine(i) ? column(3) : NaN) \
  with circles lc rgb colour(i) fs solid 1.0 noborder notitle, \
  for [i=1:words(names)] NaN \
  with linespoints lw 2 ps 0.8 dt dashed(i) lc rgb colour(i) pt point(i) \
  title (line(i) ? label(i) : ""), \
  for [i=1:words(names)] NaN with circles lw 2 lc rgb colour(i) fs empty \
  title (is_open(i) == 1 ? label(i) : ""), \
  for [i=1:words(names)] NaN with circles lc rgb colour(i) fs solid 1.0 noborder \
  title (is_filled(i) == 1 ? label(i) : "")
