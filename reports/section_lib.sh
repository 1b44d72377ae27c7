# What every section script (reports/sections/*.sh) uses, sourced by each
# as `. "$REPORT_LIB"` right after `set -eu` (mkreport.sh sets REPORT_LIB;
# CSVTOOL too).

# The C locale (sorting, number formats), REPORTS: the reports folder (its
# gnuplot scripts, anchors/), and GNUPLOT, empty for a report without
# figures.
LC_ALL=C
export LC_ALL
case ${REPORT_LIB:-} in */*) REPORTS=${REPORT_LIB%/*} ;; *) REPORTS=. ;; esac
GNUPLOT=${GNUPLOT:-}

# renders NAME...: the problems this section script renders (PROBLEM,
# default the first); any other is a mistake in problems.def, an error.
renders() {
  for _r in "$@"; do [ "${PROBLEM:-$1}" = "$_r" ] && return 0; done
  echo "${0##*/}: no problem \"$PROBLEM\" here (it renders $(echo "$*" | sed 's/ /, /g'))" >&2
  exit 1
}

# csvtool on the results. Always assign its output to a variable first:
# `set -e` does not see a failure inside "$(...)" used as an argument.
tool() { "$CSVTOOL" "$@"; }

# memo VAR CSV KEYS COLS [FILTER...]: for each KEYS combination of CSV's
# rows that pass FILTER (csvtool's --where and --sort), the first such
# row's COLS, kept in shell variables; then memo_get VAR KEY_VALUE... COL
# (one value a key, in KEYS' order) sets MV to what `tool value CSV
# FILTER... --where KEY=VALUE... --agg first --default "" --col COL`
# prints (with "--where status=ok --sort -utc": the job's latest ok row),
# without a process: a section asks hundreds of such values, and each
# process costs milliseconds. One variable a value, named by the keys and
# the column (_memo_enc: letters and digits as they are, a few other
# characters as _ and a letter; one string searched with a pattern would
# be quadratic in dash); a key with another character, and a column that
# CSV lacks or COLS does not name, are asked of csvtool (which says so).
# Keys compare as written ("512" is not "512.0"); a key or value holding
# "|" or a line break fails the select (csvtool select --sep).
_memo_n=0
memo() {
  _mv=$1 _mf=$2 _mk=$3 _mc=$4
  shift 4
  _memo_n=$((_memo_n + 1))
  eval "_memo_of_$_mv=_m${_memo_n}_"
  # for the keys _memo_enc cannot name (_memo_ask): the select, quoted
  _memo_q "$_mf"; _ms="tool value $_q"
  for _ma in "$@"; do _memo_q "$_ma"; _ms="$_ms $_q"; done
  eval "_memo_src_$_mv=\$_ms _memo_keys_$_mv=\$_mk"
  # the KEYS CSV lacks: nothing kept; the COLS it lacks: left to csvtool
  _mh=,$(head -n 1 "$_mf"),
  _mok=1 _mp= _ml=$_mk,
  while [ -n "$_ml" ]; do
    case $_mh in *,"${_ml%%,*}",*) ;; *) _mok= ;; esac
    _ml=${_ml#*,}
  done
  _ml=$_mc,
  while [ -n "$_ml" ]; do
    case $_mh in *,"${_ml%%,*}",*) _mp=$_mp${_mp:+,}${_ml%%,*} ;; esac
    _ml=${_ml#*,}
  done
  [ -n "$_mok" ] || _mp=
  eval "_memo_cols_$_mv=,\$_mp,"
  [ -n "$_mp" ] || return 0
  _mt=$(tool select "$_mf" "$@" --first-of "$_mk" --cols "$_mk,$_mp" --sep '|') || exit 1
  # "NAME='VALUE'" a line; keys _memo_enc cannot write: no variable
  _mt=$(printf '%s\n' "$_mt" | awk -F'|' -v pre="_m${_memo_n}_" -v keys="$_mk" -v cols="$_mp" '
    function enc(x,   o, i, ch, j) {
      o = ""
      for (i = 1; i <= length(x); i++) {
        ch = substr(x, i, 1)
        if (ch ~ /[A-Za-z0-9]/) o = o ch
        else if ((j = index(from, ch)) > 0) o = o "_" substr(to, j, 1)
        else return "\001"
      }
      return o "_k"
    }
    BEGIN { nk = split(keys, k, ","); nc = split(cols, c, ",")
            from = "_.- +/:*=,"; to = "_dmsplcxeo"; q = sprintf("%c", 39) }
    NF {
      n = pre
      for (i = 1; i <= nk; i++) n = n enc($i)
      if (index(n, "\001")) next
      for (j = 1; j <= nc; j++) {
        v = $(nk + j); gsub(q, q "\\" q q, v)
        print n enc(c[j]) "=" q v q
      }
    }') || exit 1
  eval "$_mt"
}
# _memo_enc STRING: sets _e to STRING as memo's awk names it (enc), or fails.
_memo_enc() {
  _e= _s=$1
  while [ -n "$_s" ]; do
    _r=${_s#?}
    case $_s in
      [A-Za-z0-9]*) _e=$_e${_s%"$_r"} ;;
      _*) _e=${_e}__ ;; .*) _e=${_e}_d ;; -*) _e=${_e}_m ;; " "*) _e=${_e}_s ;;
      +*) _e=${_e}_p ;; /*) _e=${_e}_l ;; :*) _e=${_e}_c ;; "*"*) _e=${_e}_x ;;
      =*) _e=${_e}_e ;; ,*) _e=${_e}_o ;;
      *) return 1 ;;
    esac
    _s=$_r
  done
  _e=${_e}_k
}
memo_get() {
  eval "_mn=\${_memo_of_$1:?memo_get: no memo $1} _mcl=\$_memo_cols_$1 _mlast=\${$#}"
  _mm=$1
  shift
  case $_mcl in *,"$_mlast",*) ;; *) _memo_ask "$_mm" "$@"; return ;; esac
  for _ma in "$@"; do
    _memo_enc "$_ma" || { _memo_ask "$_mm" "$@"; return; }
    _mn=$_mn$_e
  done
  eval "MV=\${$_mn-}"
}
# _memo_ask VAR KEY_VALUE... COL: memo_get's answer from csvtool.
_memo_ask() {
  eval "_mc=\$_memo_src_$1 _ml=\$_memo_keys_$1,"
  shift
  while [ -n "$_ml" ]; do
    _memo_q "${_ml%%,*}=$1"
    _mc="$_mc --where $_q"
    _ml=${_ml#*,}
    shift
  done
  _memo_q "$1"
  MV=$(eval "$_mc --agg first --default '' --col $_q") || exit 1
}
# _memo_q STRING: sets _q to STRING in single quotes, for eval.
_memo_q() {
  _q= _s=$1
  while :; do
    case $_s in
      *\'*) _q="$_q${_s%%\'*}'\\''"; _s=${_s#*\'} ;;
      *) _q="'$_q$_s'"; return ;;
    esac
  done
}
# memo_fmt FMT VALUE: VALUE as csvtool's --fmt FMT prints a cell (a number
# formatted, anything else as it is).
memo_fmt() {
  case $2 in
    *[0-9]*) case $2 in *[!0-9.eE+-]*) printf '%s' "$2" ;; *) printf "$1" "$2" ;; esac ;;
    *) printf '%s' "$2" ;;
  esac
}

# A section's GPU, and the PyTorch anchors measured on that GPU. An anchor
# file (reports/anchors/NAME.csv) holds the rows of every GPU it was
# measured on, its "gpu" column as torch.cuda.get_device_name gives it,
# which is our rows' gpu_name; a section compares its rows with the
# anchors of that same GPU only, so rows measured on another GPU never
# meet another GPU's numbers.
# REPORT_ANCHORS, when set, names another folder of them (tests).
ANCHORS=${REPORT_ANCHORS:-"$REPORTS/anchors"}
# gpu_kind NAME: the kind in a device or machine name, its first word
# (words split at blanks and -) of capitals, digits, then letters
# ("NVIDIA H100 80GB HBM3" and "2 x NVIDIA H100 (NVLink)" are H100,
# "NVIDIA A100-SXM4-80GB" A100), or "". In the shell: a section asks
# dozens.
gpu_kind() {
  _gf=$- _gi=$IFS
  IFS=' 	
-'
  set -f
  _gk=
  for _gw in $1; do
    _gr=$_gw _gn=
    while :; do case $_gr in [A-Z]*) _gr=${_gr#?} _gn=1 ;; *) break ;; esac; done
    case $_gn$_gr in 1[0-9]*) ;; *) continue ;; esac
    while :; do case $_gr in [0-9]*) _gr=${_gr#?} ;; *) break ;; esac; done
    case $_gr in *[!A-Za-z]*) continue ;; esac
    _gk=$_gw
    break
  done
  IFS=$_gi
  case $_gf in *f*) ;; *) set +f ;; esac
  [ -z "$_gk" ] || printf '%s\n' "$_gk"
}
# gpu_of CSV: the gpu_name of CSV's latest measured row ("" when it has
# none or does not exist).
gpu_of() {
  [ -f "$1" ] || return 0
  tool value "$1" --col gpu_name --where status=ok --sort -utc --agg first --default ''
}
# todo TEXT: a measurement this section still lacks, for the list under
# the writeup's summary (mkreport.sh sets REPORT_TODO; the section says
# more where it stands). TEXT: what to measure and the command, briefly.
todo() {
  [ -z "${REPORT_TODO:-}" ] || printf '%s\t%s\n' "${PROBLEM:-?}" "$*" >> "$REPORT_TODO"
}
# anchor_missing WHAT VERB COMMAND...: the sentence for PyTorch numbers
# not measured on this section's GPU ("PyTorch's eager numbers are not
# yet measured on the H200 (`python3 COMMAND` on one)"), and its todo.
anchor_missing() {
  _aw=$1 _av=$2
  shift 2
  echo "PyTorch's $_aw $_av not yet measured on the $GPU_KIND (\`python3 $*\` on one)."
  todo "PyTorch's $_aw on the $GPU_KIND ($1)"
}
# from_other_gpu CSV: "NAME.csv is from the H100" when CSV's rows are from
# another GPU than $GPU (on_gpu first), for a section's note on rows it
# leaves out or labels (and a todo: measure CSV on $GPU's kind too);
# nothing when they are $GPU's or CSV is missing.
from_other_gpu() {
  [ -f "$1" ] || return 0
  _og=$(gpu_of "$1") || exit 1
  [ "$_og" = "$GPU" ] && return 0
  _ok=$(gpu_kind "$_og")
  printf '%s is from the %s' "${1##*/}" "${_ok:-another GPU}"
  todo "${1##*/} on the $GPU_KIND, as the rows beside it (now the ${_ok:-another GPU})"
}
# on_this_gpu FILE: FILE exists and its latest ok row is from $GPU (on_gpu
# first), so its numbers may stand beside the section's own and the anchor's.
on_this_gpu() { [ -f "$1" ] && [ "$(gpu_of "$1")" = "$GPU" ]; }
# on_gpu CSV: GPU, gpu_of CSV, and GPU_KIND, its kind ("the GPU" when
# none, for prose).
on_gpu() {
  GPU=$(gpu_of "$1") || exit 1
  GPU_KIND=$(gpu_kind "$GPU")
  [ -n "$GPU_KIND" ] || GPU_KIND="the GPU"
}
# anchor_rows NAME: a file of reports/anchors/NAME.csv's rows measured on $GPU
# (on_gpu first), under REPORT_TMP; just the header when there are none,
# so every query on it finds no value and the section says so.
anchor_rows() {
  _anchor_out="$REPORT_TMP/$1.$(printf '%s' "$GPU" | tr -c 'A-Za-z0-9' _).csv"
  tool select "$ANCHORS/$1.csv" --where gpu="$GPU" > "$_anchor_out" || exit 1
  printf '%s' "$_anchor_out"
}
# has_anchor FILE: FILE (from anchor_rows) holds a row.
has_anchor() { [ "$(tool count "$1")" -gt 0 ]; }
# The device of the team's own reference measurements (gpu_floors.csv's
# first row, published.csv's): an H100 SXM, as gpu_name names it.
README_GPU="NVIDIA H100 80GB HBM3"
# published NAME COL: column COL of reports/anchors/published.csv's row
# NAME, the numbers no script of ours measures (the course's leaderboard,
# a PyTorch step the team measured beside ours), each with its GPU, what it
# is and where it is from; "" if absent. published_on NAME: its value when
# it was measured on this section's GPU ($GPU), else "".
published() {
  tool value "$ANCHORS/published.csv" --where name="$1" --col "$2" --agg first --default ''
}
published_on() {
  [ "$(published "$1" gpu)" = "$GPU" ] || return 0
  published "$1" value
}
# floors NAME: the floors a step is read against, from the latest row of
# reports/anchors/gpu_floors.csv measured on GPU NAME (gpu_floors.py), else
# on README_GPU (the team's H100): BF16_TFLOPS and FP32_TFLOPS (dense matrix
# products, bf16 on tensor cores and fp32 without), COPY_TBS (device-to-
# device copy, read + write, TB/s), FLOORS_GPU (whose they are; a section
# names it when it is not NAME's) and FLOORS_KIND (its kind).
floors() {
  FLOORS_GPU=$1
  [ "$(tool count "$ANCHORS/gpu_floors.csv" --where gpu="$1" --where status=ok)" -gt 0 ] ||
    FLOORS_GPU=$README_GPU
  FLOORS_KIND=$(gpu_kind "$FLOORS_GPU")
  for _f in bf16_tflops fp32_tflops copy_tbs; do
    _v=$(tool value "$ANCHORS/gpu_floors.csv" --where gpu="$FLOORS_GPU" --where status=ok \
           --sort -utc --agg first --col "$_f") || exit 1
    num "gpu_floors.csv $_f" "$_v"
    case $_f in
      bf16_tflops) BF16_TFLOPS=$_v ;;
      fp32_tflops) FP32_TFLOPS=$_v ;;
      copy_tbs) COPY_TBS=$_v ;;
    esac
  done
}

# Arithmetic on numbers already checked by num (awk: sh has integers only).
# A plain non-negative decimal formatted without a sign flag goes to the
# shell's printf instead: the same C conversion of the same double, and a
# render formats some 4,000 numbers (a process each through awk). Through
# awk, a result that rounds to zero loses its sign: "-0.0" and "+0.0%"
# would read as a change where there is none.
calc() {
  case $1$2 in
    *[diouxXcs]* | *+* | *-*) ;;
    *) case $2 in
         '' | *[!0-9.]* | .* | *. | *.*.*) ;;
         *) printf "$1" "$2"; return ;;
       esac ;;
  esac
  awk "BEGIN { r = sprintf(\"$1\", $2); if (r ~ /^[-+][0.]+%?\$/) r = substr(r, 2); printf \"%s\", r }"
}
is_true() { awk "BEGIN { exit !($1) }"; }
# Time A against time B as a speed ratio, "1.31x as fast" (B / A): one
# convention for every comparison, winning or losing ("0.92x as fast"),
# where "x% faster" would read as time saved to some and speed gained to
# others (factor's decimals: a loss never reads "1.00x").
as_fast() { printf '%sx as fast' "$(factor "$2 / $1")"; }
# X as a factor of Y's time, for a verdict: "ours 1.21x as fast" or
# "**we lose, 1.04x its time**"; a factor that two decimals would show as
# 1.00 gets three, so a verdict never reads "1.00x".
# FACTOR_AWK: the same rule as an awk function, for a script that formats
# its factors inside awk (prepend it to the program).
FACTOR_AWK='function factor(x) { return sprintf(x > 0.995 && x < 1.005 ? "%.3f" : "%.2f", x) }'
factor() { # RATIO: three decimals where two would read 1.00
  awk "$FACTOR_AWK BEGIN { printf \"%s\", factor($1) }"
}
verdict() { # OURS_MS THEIRS_MS
  if is_true "$1 <= $2"; then echo "ours $(factor "$2 / $1")x as fast"
  else echo "**we lose, $(factor "$1 / $2")x its time**"; fi
}
# A list "a, b and c" from its items, one a line on stdin.
and_list() {
  awk 'NF { w[n++] = $0 } END { for (i = 0; i < n; i++)
    printf "%s%s", w[i], (i == n - 1 ? "" : i == n - 2 ? " and " : ", ") }'
}
# span_to LO HI: "LO to HI", or "LO" where the two are one value (a range
# over a single row or equal rows).
span_to() { if [ "$1" = "$2" ]; then printf '%s' "$1"; else printf '%s to %s' "$1" "$2"; fi; }

# MiB as GiB, and a number, to one decimal; "-" for none (a table cell).
gib() { [ -n "$1" ] && calc %.1f "$1 / 1024" || printf -- '-'; }
f1() { [ -n "$1" ] && calc %.1f "$1" || printf -- '-'; }
f0() { [ -n "$1" ] && calc %.0f "$1" || printf -- '-'; }

# Stops the report unless $2 is a number: a quoted measurement that is not
# one would otherwise turn into a wrong verdict rather than an error.
num() {
  case $2 in
    '' | *[!0-9.eE+-]*)
      echo "${0##*/}: ${csv:-}: $1 is \"$2\", not a number" >&2
      exit 1 ;;
  esac
}

# sample_line JSONL NAME=VALUE...: the latest line of an lm experiment's
# samples (NAME.samples.jsonl) whose job has every setting NAME=VALUE and
# a memory log, or "".
sample_line() {
  _sl=$1
  shift
  [ -f "$_sl" ] || return 0
  awk -v want="$*" 'BEGIN { n = split(want, w, " ") }
    index($0, "\"mem_t_ms\"") {
      ok = 1
      for (i = 1; i <= n && ok; i++) {
        k = w[i]; sub(/=.*/, "", k); v = w[i]; sub(/^[^=]*=/, "", v)
        ok = index($0, "\"" k "\": \"" v "\"") > 0
      }
      if (ok) l = $0
    }
    END { print l }' "$_sl"
}
# sample_list LINE NAME: the values of a samples line's list NAME, one a
# line.
sample_list() {
  printf '%s\n' "$1" | awk -v name="$2" '{
    key = "\"" name "\": ["; i = index($0, key); if (!i) exit
    r = substr($0, i + length(key)); r = substr(r, 1, index(r, "]") - 1)
    n = split(r, a, ", "); for (k = 1; k <= n; k++) print a[k] }'
}
# peak_items LINE: "name,MiB" of every mem_* list of an lm job's samples
# line (NAME.samples.jsonl) at the sample whose sum is largest: where the
# bytes of its peak go.
peak_items() {
  printf '%s\n' "$1" | awk '{
    n = 0
    while (match($0, /"mem_[a-z_]+_mib": \[[^]]*\]/)) {
      s = substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH)
      name = s; sub(/^"mem_/, "", name); sub(/_mib".*/, "", name)
      v = s; sub(/^[^[]*\[/, "", v); sub(/\]$/, "", v)
      k = split(v, a, ", "); n++; nm[n] = name
      for (j = 1; j <= k; j++) { x[n, j] = a[j]; tot[j] += a[j] }
      len = k }
    best = 1; for (j = 1; j <= len; j++) if (tot[j] > tot[best]) best = j
    for (i = 1; i <= n; i++) printf "%s,%.0f\n", nm[i], x[i, best] }'
}
# has_rows CSV: CSV exists and holds a measured (status ok) row.
has_rows() {
  [ -f "$1" ] || return 1
  _has_rows_n=$(tool count "$1" --where status=ok) || exit 1
  [ "$_has_rows_n" -gt 0 ]
}
# not_measured EXPERIMENT [WHERE]: a section's line for an experiment with
# no measured row, and its todo. WHERE: "on a GPU", "on 2 GPUs", ...
not_measured() {
  echo "_Not yet measured: run \`./runner experiments/$1.cfg\`${2:+ $2}._"
  todo "$1.csv (\`./runner experiments/$1.cfg\`)"
  echo
}
# require_rows CSV EXPERIMENT [WHERE]: unless CSV holds a measured row,
# not_measured's line, and the section ends there (exit 0).
require_rows() {
  has_rows "$1" && return 0
  not_measured "$2" "${3:-}"
  exit 0
}

# pt_compiled CSV SIZE CONTEXT PRECISION COL: COL of PyTorch's fastest
# torch.compile training step in a torch_lm.py CSV (default mode or CUDA
# graphs, whichever is faster for that shape; the optimizer-in-backward
# form apart), or "". Its "config" column says which.
pt_compiled() {
  [ -f "$1" ] || return 0
  tool value "$1" --sort step_ms_median --agg first --default "" --where status=ok \
    --where size="$2" --where context="$3" --where precision="$4" \
    --where 'config=compiled|compiled_cudagraphs' --col "$5"
}

# An lm row's message ("ms per step by kernel family: matmul 58.196;
# adamw 34.115; ..."): families MESSAGE prints "NAME MS" lines; fam
# MESSAGE NAME the ms of family NAME (nothing if absent). Read in the
# shell: a render asks for some 300 families, a process or four each
# through sed and awk.
families() { _families "$1" ''; }
fam() { _families "$1" "$2"; }
_families() { # MESSAGE NAME ('' for all)
  _fm=$1 _fn=$2
  case $_fm in "${_fm%%:*}: "*) _fm=${_fm#*: } ;; esac
  set -f; _fifs=$IFS; IFS=';'
  for _fi in $_fm; do
    IFS=' 	
'
    set -- $_fi
    [ $# -eq 2 ] || continue
    if [ -z "$_fn" ]; then printf '%s %s\n' "$1" "$2"
    elif [ "$1" = "$_fn" ]; then printf '%s\n' "$2"; break; fi
  done
  IFS=$_fifs; set +f
}
# ...and the same in awk, for a section that reads many rows in one awk:
# prepend "$AWK_FAMILIES" to the program. fams(MSG) fills fn[1..n] (names
# in order, repeats kept), fx[1..n] (their ms as written) and fv[NAME]
# (the first NAME's ms) and returns n; fsum() is fsum's "%.4f" of the ms.
AWK_FAMILIES='
function fams(m,   i, k, p, w, j) {
  delete fv; nfam = 0
  i = index(m, ":"); if (i && substr(m, i + 1, 1) == " ") m = substr(m, i + 2)
  k = split(m, p, ";")
  for (j = 1; j <= k; j++) {
    if (split(p[j], w, " ") != 2) continue
    fn[++nfam] = w[1]; fx[nfam] = w[2]
    if (!(w[1] in fv)) fv[w[1]] = w[2]
  }
  return nfam
}
function fsum(   j, t) { for (j = 1; j <= nfam; j++) t += fx[j]; return sprintf("%.4f", t) }
'

# tagged TAG LINES: each non-empty line as "TAG|line", so that one awk can
# join several csvtool selects (--sep '|') told apart by their first field.
tagged() { printf '%s\n' "$2" | sed "/^\$/d; s/^/$1|/"; }
# ...and the table cells of such an awk, as the shell's d, f1 and gib
# write them, plus a change in percent: prepend to the program,
# awk -F'|' "$AWK_CELLS"'PROGRAM'. Their names are taken in PROGRAM.
AWK_CELLS='
function fmt(f, x) { return x == "" ? "-" : sprintf(f, x) }
function d(x) { return x == "" ? "-" : x }
function f1(x) { return fmt("%.1f", x) }
function gib(x) { return x == "" ? "-" : sprintf("%.1f", x / 1024) }
function pct(new, old,  r) {
  if (new == "" || old == "") return "-"
  r = sprintf("%+.1f", (new - old) / old * 100)
  return (r ~ /^[-+]0\.0$/ ? "0.0" : r) "%"
}
'

# A value, or "-" in a table cell when there is none.
d() { [ -n "$1" ] && printf '%s' "$1" || printf -- '-'; }

# sweep_dry_run CSV: the runner's dry run of CSV's experiment file as it
# stands (mkreport.sh --runner; REPORT_EXPERIMENTS/NAME.cfg): "N jobs ...",
# then a line "[I/N] KEY=VALUE ..." a job; nothing without the runner or
# the file. Against a folder that does not exist: the jobs do not depend
# on rows, so no CSV is read (nor refused).
sweep_dry_run() {
  _sc="${REPORT_EXPERIMENTS:-}/$(basename "$1" .csv).cfg"
  [ -n "${REPORT_RUNNER:-}" ] && [ -f "$_sc" ] || return 0
  "$REPORT_RUNNER" --dry-run --out-dir "${REPORT_TMP:-${TMPDIR:-/tmp}}/no_rows.$$" "$_sc" 2> /dev/null
}

# unmeasured CSV: one sentence when the sweep has jobs with no row at all
# (a run stopped before them, or the experiment file grew since): its job
# count against CSV's rows (one a job; rows of jobs a config has since
# dropped only hide some). Nothing when each has a row.
unmeasured() {
  _uj="${1%.csv}.json"
  [ -f "$1" ] || return 0
  # the experiment file as it is now, counted by the runner's dry run
  # (mkreport.sh --runner); else the last run's count in NAME.json
  _un=$(sweep_dry_run "$1" | sed -n '1s/^\([0-9][0-9]*\) jobs .*/\1/p') || _un=''
  if [ -z "$_un" ] && [ -f "$_uj" ]; then
    _un=$(sed -n 's/^ *"jobs": \([0-9][0-9]*\),.*/\1/p' "$_uj" | head -n 1)
  fi
  [ -n "$_un" ] || return 0
  _ur=$(tool count "$1") || exit 1
  [ "$_ur" -lt "$_un" ] || return 0
  _um=$((_un - _ur))
  case $_um in 1) _uw="has" ;; *) _uw="have" ;; esac
  todo "$_um of $(basename "$1")'s $_un jobs (\`./runner experiments/$(basename "$1" .csv).cfg\` resumes)"
  echo "$_um of the sweep's $_un jobs $_uw no row yet; \`./runner"
  echo "experiments/$(basename "$1" .csv).cfg\` measures just those."
  echo
}

# has_col CSV COL: whether CSV's header names COL (files written before
# a kind had a column lack it).
has_col() {
  case ",$(head -n 1 "$1")," in *,"$2",*) return 0 ;; *) return 1 ;; esac
}

# inbwd_best GPU: the fastest variant of AdamW in backward with bf16 weight
# gradients (beside backward or on its stream; norms rebuilt or kept) at
# 2.7B, bf16, context 512 on GPU (section T: $DATA/optimizer_weight_grads
# .csv, optimizer_keep_norms.csv) that stays within the goal's 50 GiB, else
# (or with a second argument "any") the fastest: "MS MIB FORM", FORM its
# words; nothing where none was measured there.
inbwd_best() {
  { _inbwd_weight_grads "$1"; _inbwd_keep_norms "$1"; } | sort -g |
    awk -v any="${2:-}" '$2 / 1024 <= 50 && fit == "" && any == "" { fit = $0 }
         NR == 1 { fast = $0 }
         END { if (fit != "") print fit; else if (fast != "") print fast }'
}
# ...its candidates, "MS MIB FORM" each
_inbwd_keep_norms() {
  f=$DATA/optimizer_keep_norms.csv
  [ -f "$f" ] || return 0
  ms=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok --where size=2.7B \
    --where context=512 --where keep_norms=true --where weight_grads=compute --where gpu_name="$1" --col step_ms_median)
  mib=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok --where size=2.7B \
    --where context=512 --where keep_norms=true --where weight_grads=compute --where gpu_name="$1" --col engine_peak_mib)
  [ -z "$ms" ] || [ -z "$mib" ] || echo "$ms $mib bf16 weight gradients, norms kept"
}
_inbwd_weight_grads() {
  f=$DATA/optimizer_weight_grads.csv
  [ -f "$f" ] || return 0
  for ov in true false; do
    if has_col "$f" adamw_overlap; then set -- "$1" --where adamw_overlap="$ov"
    elif [ "$ov" = false ]; then continue
    else set -- "$1"; fi
    ms=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok --where size=2.7B \
      --where context=512 --where weight_grads=compute --where gpu_name="$@" --col step_ms_median)
    mib=$(tool value "$f" --sort -utc --agg first --default "" --where status=ok --where size=2.7B \
      --where context=512 --where weight_grads=compute --where gpu_name="$@" --col engine_peak_mib)
    [ -n "$ms" ] && [ -n "$mib" ] || continue
    form="bf16 weight gradients"
    [ "$ov" = true ] || form="$form, updates on backward's stream"
    echo "$ms $mib $form"
  done
}

# dirty_rows CSV: one sentence when some of CSV's ok rows were measured
# from a tree with uncommitted changes (git_dirty 1), so no commit holds
# the code that made them; nothing when every row names its commit.
dirty_rows() {
  [ -f "$1" ] || return 0
  has_col "$1" git_dirty || return 0
  _dn=$(tool count "$1" --where status=ok --where git_dirty=1) || exit 1
  [ "$_dn" -gt 0 ] || return 0
  _dt=$(tool count "$1" --where status=ok)
  _do=$(_dirty_only "$1") || exit 1
  todo "$_dn rows of $(basename "$1") again from a commit (\`./runner --force$_do experiments/$(basename "$1" .csv).cfg\`)"
  echo "$_dn of the $_dt rows of $(basename "$1") were measured from a tree with"
  echo "uncommitted changes, so no commit holds the code that made them: take"
  echo "them as indicative until they are measured again from a commit."
  echo
}

# _dirty_only CSV: " --only KEY=V,V ..." selecting, among the jobs of
# CSV's experiment as its file stands (the runner's dry run, mkreport.sh
# --runner), those of CSV's ok rows with git_dirty 1: for each swept
# setting whose values in those rows are fewer than the sweep's, those
# values in the sweep's order. A cartesian product, so it may select more
# than those rows, never fewer: a setting whose dirty values the sweep
# does not list as the CSV writes them gets no --only. Nothing without
# the runner or the experiment file.
_dirty_only() {
  # the jobs' lines, "[I/N] KEY=VALUE ..."
  _dj=$(sweep_dry_run "$1" | sed -n 's/^\[[0-9]*\/[0-9]*\] //p') || return 0
  for _dk in $(printf '%s\n' "$_dj" | head -n 1); do
    _dk=${_dk%%=*}
    has_col "$1" "$_dk" || continue
    _dv=$(tool distinct "$1" --cols "$_dk" --where status=ok --where git_dirty=1) || exit 1
    printf '%s\n' "$_dj" | awk -v k="$_dk" -v dirty="$_dv" '
      BEGIN { n = split(dirty, d, "\n"); for (i = 1; i <= n; i++) want[d[i]] = 1 }
      { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) {
          v = substr($i, length(k) + 2)
          if (!(v in seen)) { seen[v] = 1; all++; if (v in want) { got++; sel = sel (sel == "" ? "" : ",") v } }
        } }
      END { if (got == n && got < all) printf " --only %s=%s", k, sel }'
  done
}

# commits_note CSV: where CSV's ok rows were measured from more than one
# commit, "; rows from N commits (abc1234: 12 rows, ...; newest first):
# compare rows of one commit where a difference is small" (for a table's
# footnote: code between the commits may move a row); else nothing.
commits_note() {
  [ -f "$1" ] || return 0
  has_col "$1" git_commit || return 0
  tool select "$1" --cols utc,git_commit --where status=ok | sed 1d | sort -r |
    awk -F, '!($2 in c) { o[++n] = $2 } { c[$2]++ }
      END { if (n < 2) exit
            printf "; rows from %d commits (", n
            for (i = 1; i <= n; i++)
              printf "%s%s: %d%s", (i > 1 ? ", " : ""), substr(o[i], 1, 7), c[o[i]], (i == 1 ? " rows" : "")
            printf "; newest first): compare rows of one commit where a difference is small" }'
}

# failed_jobs CSV COLS HEAD: rows from an uncommitted tree (dirty_rows),
# jobs with no row (unmeasured), then the jobs without a measurement, each
# job by its latest row (a job is COLS less status, message and machine; a
# job skipped or failed and then measured again counts as measured). Jobs
# the runner skipped (a machine that could not run them: no GPU, too few)
# in one sentence with the command that fills them in; failed ones
# (failed, oom, timeout) as a table of COLS headed HEAD, with their
# messages. Nothing when every job measured from a commit.
failed_jobs() {
  dirty_rows "$1"
  unmeasured "$1"
  key=$(printf '%s' "$2" | tr ',' '\n' | grep -v -x -e status -e message -e machine | paste -sd, -)
  nbad=$(tool count "$1" --latest "$key" --where status!=ok)
  [ "$nbad" -gt 0 ] || return 0
  nskip=$(tool count "$1" --latest "$key" --where status=skipped)
  if [ "$nskip" -gt 0 ]; then
    why=$(tool distinct "$1" --latest "$key" --cols message --where status=skipped |
      awk 'NR > 1 { printf " / " } { printf "%s", $0 }')
    todo "$nskip skipped jobs of $(basename "$1") on a machine that can run them"
    case $nskip in 1) unit="job is" ;; *) unit="jobs are" ;; esac
    echo "$nskip more $unit not yet measured (skipped: $why);"
    echo "\`./runner experiments/$(basename "$1" .csv).cfg\` on a machine that can measures them."
    echo
  fi
  [ "$nbad" -gt "$nskip" ] || return 0
  todo "$((nbad - nskip)) failed jobs of $(basename "$1") (their messages say why)"
  echo "Jobs that failed ($((nbad - nskip))):"
  echo
  tool table "$1" --cols "$2" --head "$3" --latest "$key" --where status!=ok --where status!=skipped
  echo
}

# test_file NAME: sets f to test NAME's source (tests/NAME.sh as named,
# else tests/NAME.c or .cu); fails where there is none.
test_file() {
  case $1 in
    *.sh) f="$TESTS_DIR/$1" ;;
    *) f="$TESTS_DIR/$1.c"; [ -f "$f" ] || f="$TESTS_DIR/$1.cu" ;;
  esac
  [ -f "$f" ]
}
# What a test establishes, as one paragraph: its source's first comment
# block (tests/NAME.c) or its leading # lines (tests/NAME.sh), without the
# exit-status sentence tests end with; fails where there is no such test.
# TESTS_DIR: the tests' folder.
test_says() { # NAME
  test_file "$1" || return 1
  case $1 in
    *.sh) awk 'NR == 1 && /^#!/ { next } /^#/ { sub(/^# ?/, ""); printf "%s ", $0; next } { exit }' "$f" ;;
    *) awk '!s && /^\/\*/ { s = 1 } s { line = $0; sub(/^\/\* ?/, "", line); sub(/^ \* ?/, "", line);
              e = sub(/ *\*\/.*$/, "", line); printf "%s ", line; if (e) exit }' "$f" ;;
  esac | tr -s ' ' | sed 's/ *Exit [0-9].*$//; s/ *$//'
}

