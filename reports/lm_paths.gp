# Training step time against model size, one line per precision and path.
#
#   gnuplot -c lm_paths.gp IN.csv OUT.svg
#
# IN.csv: columns series, params, step_ms, with one contiguous run of rows
# per series (sorted by series, then params); `series` is a label such as
# "bf16 fused+flash" or "bf16 PyTorch eager". Series whose label contains
# "PyTorch" are drawn dashed. gnuplot 5.4 has no `plot ... if`: rows of
# other series become NaN in the using expressions and are skipped.
if (ARGC < 2) {
  print "usage: gnuplot -c lm_paths.gp IN.csv OUT.svg"
  exit status 2
}
set terminal svg size 900,560 font "DejaVu Sans,12" noenhanced background "white"
set output ARG2
set datafile separator comma
set datafile columnheaders
set key outside right top
set logscale xy
set grid
set xlabel "parameters"
set ylabel "training step (ms), batch 4 x 512 tokens"
set format x "%.0s%c"
names = system(sprintf("tail -n +2 '%s' | cut -d, -f1 | uniq | tr ' ' '_' | tr '\\n' ' '", ARG1))
label(i) = system(sprintf("echo '%s' | tr '_' ' '", word(names, i)))
dashed(i) = strstrt(word(names, i), "PyTorch") > 0 ? 2 : 1
plot for [i=1:words(names)] ARG1 \
  using ((strcol(1) eq label(i)) ? column(2) : NaN):((strcol(1) eq label(i)) ? column(3) : NaN) \
  with linespoints dt dashed(i) lw 2 pt 7 title label(i)
