/* csvtool: the report scripts' only way into result CSVs (through
 * harness/csv.c, so the scripts never parse CSV themselves).
 *
 *   csvtool check    FILE
 *   csvtool count    FILE [--where ...] [--latest a,b]
 *   csvtool table    FILE --cols a,b [--head "A,B"] [--where ...] [--sort ...]
 *                         [--fmt col=FMT ...]
 *   csvtool select   FILE [--cols a,b] [--where ...] [--sort ...] [--fmt ...]
 *                         [--sep S]
 *   csvtool distinct FILE --cols a,b [--where ...] [--sort ...] [--sep S]
 *   csvtool value    FILE --col c [--where ...] [--sort ...]
 *                         [--agg first|min|max] [--fmt FMT] [--default TEXT]
 *
 * --latest a,b (every subcommand but check): of the rows that agree on
 * a,b, only the file's last counts, before --where filters: the runner
 * appends, so a job measured again (a skipped or failed job rerun) leaves
 * its older rows behind, and --latest with the job's settings sees its
 * outcome now.
 * --first-of a,b (count, table, select, distinct): after --where and
 * --sort, only the first row of each a,b: with --sort -utc, each group's
 * newest, what `value --sort -utc --agg first` gives for one group, for
 * every group in one call.
 * select --sep S: no header, each row's cells joined by S, unquoted (for
 * a shell's `read`); a cell holding S or a line break is an error.
 * --where col=value or col!=value (repeatable; all must hold); value may
 * list alternatives, a|b: col=a|b holds for either, col!=a|b for neither
 * (no cell of ours holds a '|'). Values that both read as numbers compare
 * as numbers, so size_mib=1 matches "1.0".
 * --sort a,-b: stable, numbers before text, numeric when both cells are
 * numbers; a leading '-' sorts that key descending.
 * --fmt col=FMT: a printf conversion for doubles (%.3f, %.1f%%, %g) applied
 * to numeric cells; other cells are printed as they are.
 *
 * A torn last line (an interrupted append) is dropped silently except by
 * `check`, which the report runs once per file and which says so.
 * Exit status: 0, 1 for a data problem, 2 for a usage mistake. */
#include "config.h"
#include "harness/csv.h"

#include "common/check.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_DATA = 1, EXIT_USAGE = 2 };

static const char *file_path;

static void die(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void die(int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("csvtool: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(status);
}

static void usage(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("csvtool: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr,
          "\nusage: csvtool check FILE\n"
          "       csvtool count FILE [--where C=V|C!=V ...] (V: one value or V1|V2..)\n"
          "       csvtool table FILE --cols A,B [--head \"H1,H2\"] [--where ...]"
          " [--sort A,-B] [--fmt C=FMT ...]\n"
          "       csvtool select FILE [--cols A,B] [--where ...] [--sort ...]"
          " [--fmt ...] [--sep S]\n"
          "       csvtool distinct FILE --cols A,B [--where ...] [--sort ...]"
          " [--sep S]\n"
          "       csvtool value FILE --col C [--where ...] [--sort ...]"
          " [--agg first|min|max] [--fmt FMT] [--default TEXT]\n"
          "       (every subcommand but check: [--latest A,B], only the last"
          " row of each A,B;\n"
          "        count, table, select, distinct: [--first-of A,B], after"
          " --where and --sort\n"
          "        only the first row of each A,B)\n");
  exit(EXIT_USAGE);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) die(EXIT_DATA, "out of memory allocating %zu bytes", n);
  return p;
}

static char *xstrdup(const char *s) {
  size_t n = strlen(s) + 1;
  return memcpy(xmalloc(n), s, n);
}

/* The error's first line without csv.c's own "source.c:N: " prefix: users
 * want the data file and line, not ours. */
static const char *csv_error(char *buf, size_t n) {
  err_first_line(buf, n);
  const char *colon = strchr(buf, ':');
  if (colon && isdigit((unsigned char)colon[1])) {
    const char *p = colon + 1;
    while (isdigit((unsigned char)*p)) p++;
    if (p[0] == ':' && p[1] == ' ') return p + 2;
  }
  return buf;
}

/* A cell that reads entirely as a number (NaN is text: it orders nowhere). */
static int as_number(const char *s, double *v) {
  if (!*s || isspace((unsigned char)*s)) return 0;
  char *end;
  errno = 0;
  double d = strtod(s, &end);
  if (*end || isnan(d)) return 0;
  *v = d;
  return 1;
}

/* Total order: numbers (by value) before text (bytewise). */
static int cmp_cells(const char *a, const char *b) {
  double x, y;
  int na = as_number(a, &x), nb = as_number(b, &y);
  if (na && nb) return (x > y) - (x < y);
  if (na != nb) return na ? -1 : 1;
  return strcmp(a, b);
}

static int cells_equal(const char *a, const char *b) {
  double x, y;
  if (strcmp(a, b) == 0) return 1;
  return as_number(a, &x) && as_number(b, &y) && x == y;
}

/* cell equals one of the '|'-separated alternatives of value */
static int cell_in(const char *cell, const char *value) {
  for (;;) {
    const char *bar = strchr(value, '|');
    size_t len = bar ? (size_t)(bar - value) : strlen(value);
    char alt[256];
    if (len >= sizeof alt) usage("--where value \"%.40s...\" is too long", value);
    memcpy(alt, value, len);
    alt[len] = 0;
    if (cells_equal(cell, alt)) return 1;
    if (!bar) return 0;
    value = bar + 1;
  }
}

/* ---- options ------------------------------------------------------------ */

typedef struct where { int col, negate; const char *value; } where;
typedef struct sortkey { int col, desc; } sortkey;

typedef struct opts {
  const char *cols, *head, *sort, *agg, *sep, *def, *col, *latest, *first;
  const char **fmt;   /* "col=FMT" (or a bare FMT for value) */
  int nfmt;
  const char **where;
  int nwhere;
} opts;

/* Splits a comma list into malloc'd pieces; names may not be empty. */
static char **split(const char *list, int *n, const char *what) {
  char **out = xmalloc((strlen(list) + 2) * sizeof *out);
  *n = 0;
  const char *p = list;
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len == 0) usage("empty name in %s \"%s\"", what, list);
    char *s = xmalloc(len + 1);
    memcpy(s, p, len);
    s[len] = '\0';
    out[(*n)++] = s;
    if (!p[len]) break;
    p += len + 1;
  }
  return out;
}

static void split_free(char **names, int n) {
  if (!names) return;
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

static int column(const csv_table *t, const char *name) {
  int c = csv_col(t, name);
  if (c >= 0) return c;
  size_t len = 1;
  for (int j = 0; j < t->ncols; j++) len += strlen(t->header[j]) + 2;
  char *list = xmalloc(len);
  list[0] = '\0';
  for (int j = 0; j < t->ncols; j++) {
    if (j) strcat(list, ", ");
    strcat(list, t->header[j]);
  }
  die(EXIT_DATA, "%s has no column \"%s\" (columns: %s)", file_path, name,
      list);
}

static int *columns(const csv_table *t, const char *list, int *n) {
  char **names = split(list, n, "--cols");
  int *c = xmalloc((size_t)*n * sizeof *c);
  for (int i = 0; i < *n; i++) c[i] = column(t, names[i]);
  split_free(names, *n);
  return c;
}

static where *parse_where(const csv_table *t, const opts *o) {
  where *w = xmalloc((size_t)o->nwhere * sizeof *w);
  for (int i = 0; i < o->nwhere; i++) {
    const char *eq = strchr(o->where[i], '=');
    if (!eq || eq == o->where[i])
      usage("--where \"%s\" is not COL=VALUE or COL!=VALUE",
                       o->where[i]);
    w[i].negate = eq[-1] == '!';
    size_t len = (size_t)(eq - o->where[i]) - (size_t)w[i].negate;
    if (len == 0)
      usage("--where \"%s\" names no column", o->where[i]);
    char *name = xmalloc(len + 1);
    memcpy(name, o->where[i], len);
    name[len] = '\0';
    w[i].col = column(t, name);
    w[i].value = eq + 1;
    free(name);
  }
  return w;
}

static sortkey *parse_sort(const csv_table *t, const char *list, int *n) {
  *n = 0;
  if (!list) return NULL;
  char **names = split(list, n, "--sort");
  sortkey *k = xmalloc((size_t)*n * sizeof *k);
  for (int i = 0; i < *n; i++) {
    k[i].desc = names[i][0] == '-';
    k[i].col = column(t, names[i] + k[i].desc);
  }
  split_free(names, *n);
  return k;
}

/* Accepts text with exactly one double conversion (%[flags][width][.prec]
 * one of eEfFgGaA) and %% escapes: anything else would let a report script
 * feed printf the wrong argument. */
static int valid_fmt(const char *f) {
  int conv = 0;
  for (const char *p = f; *p; p++) {
    if (*p != '%') continue;
    if (p[1] == '%') { p++; continue; }
    p++;
    while (*p && strchr("-+ #0", *p)) p++;
    while (isdigit((unsigned char)*p)) p++;
    if (*p == '.') {
      p++;
      while (isdigit((unsigned char)*p)) p++;
    }
    if (!*p || !strchr("eEfFgGaA", *p)) return 0;
    conv++;
  }
  return conv == 1;
}

/* Per column of the table, the format to apply (NULL: as is). */
static const char **parse_fmt(const csv_table *t, const opts *o,
                              const char *bare_for) {
  const char **f = xmalloc((size_t)t->ncols * sizeof *f);
  for (int j = 0; j < t->ncols; j++) f[j] = NULL;
  for (int i = 0; i < o->nfmt; i++) {
    const char *s = o->fmt[i], *eq = strchr(s, '='), *pct = strchr(s, '%');
    const char *fmt;
    int col;
    if (bare_for && (!eq || (pct && pct < eq))) {
      col = column(t, bare_for);
      fmt = s;
    } else {
      if (!eq || eq == s)
        usage("--fmt \"%s\" is not COL=FORMAT", s);
      char *name = xmalloc((size_t)(eq - s) + 1);
      memcpy(name, s, (size_t)(eq - s));
      name[eq - s] = '\0';
      col = column(t, name);
      free(name);
      fmt = eq + 1;
    }
    if (!valid_fmt(fmt))
      usage("--fmt \"%s\": the format must hold exactly one "
                       "conversion for a number (like %%.3f or %%.1f%%%%)",
                       s);
    f[col] = fmt;
  }
  return f;
}

/* The cell as printed: formatted when it is a number and a format is set. */
static const char *shown(const char *cell, const char *fmt) {
  static char buf[512];
  double v;
  if (!fmt || !as_number(cell, &v)) return cell;
  /* The format was checked by valid_fmt: one double conversion. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
  snprintf(buf, sizeof buf, fmt, v);
#pragma GCC diagnostic pop
  return buf;
}

/* ---- row selection ----------------------------------------------------- */

static const csv_table *sort_table;
static const sortkey *sort_keys;
static int sort_nkeys;

static int cmp_rows(const void *a, const void *b) {
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  for (int k = 0; k < sort_nkeys; k++) {
    int c = cmp_cells(sort_table->rows[i][sort_keys[k].col],
                      sort_table->rows[j][sort_keys[k].col]);
    if (c) return sort_keys[k].desc ? -c : c;
  }
  return (i > j) - (i < j);   /* stable: file order breaks ties */
}

/* Whether a later row than i agrees with it on the --latest columns. */
static int superseded(const csv_table *t, size_t i, const int *lc, int nl) {
  for (size_t j = i + 1; j < t->nrows; j++) {
    int same = 1;
    for (int k = 0; k < nl && same; k++)
      same = cells_equal(t->rows[i][lc[k]], t->rows[j][lc[k]]);
    if (same) return 1;
  }
  return 0;
}

/* Indices of the rows that pass --latest and every --where, in --sort
 * order, only the first of each --first-of group. */
static size_t *pick_rows(const csv_table *t, const opts *o, size_t *n) {
  where *w = parse_where(t, o);
  int nkeys, nl = 0;
  sortkey *keys = parse_sort(t, o->sort, &nkeys);
  int *lc = o->latest ? columns(t, o->latest, &nl) : NULL;
  size_t *idx = xmalloc(t->nrows * sizeof *idx);
  *n = 0;
  for (size_t i = 0; i < t->nrows; i++) {
    int ok = !lc || !superseded(t, i, lc, nl);
    for (int k = 0; k < o->nwhere && ok; k++)
      ok = cell_in(t->rows[i][w[k].col], w[k].value) != w[k].negate;
    if (ok) idx[(*n)++] = i;
  }
  sort_table = t;
  sort_keys = keys;
  sort_nkeys = nkeys;
  if (nkeys) qsort(idx, *n, sizeof *idx, cmp_rows);
  if (o->first) {
    int nf;
    int *fc = columns(t, o->first, &nf);
    size_t kept = 0;
    for (size_t i = 0; i < *n; i++) {
      int seen = 0;
      for (size_t u = 0; u < kept && !seen; u++) {
        seen = 1;
        for (int k = 0; k < nf && seen; k++)
          seen = cells_equal(t->rows[idx[i]][fc[k]], t->rows[idx[u]][fc[k]]);
      }
      if (!seen) idx[kept++] = idx[i];
    }
    *n = kept;
    free(fc);
  }
  free(w);
  free(keys);
  free(lc);
  return idx;
}

/* A description of the --where filters, for "no row matches" messages. */
static const char *describe_where(const opts *o) {
  static char buf[2048];
  buf[0] = '\0';
  for (int i = 0; i < o->nwhere; i++) {
    size_t len = strlen(buf);
    snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", o->where[i]);
  }
  return o->nwhere ? buf : "(no filter)";
}

/* ---- subcommands -------------------------------------------------------- */

static void md_cell(const char *s) {
  putchar(' ');
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", stdout);
    else if (*s == '\n') fputs("<br>", stdout);
    else if (*s != '\r') putchar(*s);
  }
  fputs(" |", stdout);
}

static void cmd_table(const csv_table *t, const opts *o) {
  if (!o->cols) usage("table needs --cols");
  int n, nh = 0;
  int *c = columns(t, o->cols, &n);
  char **head = o->head ? split(o->head, &nh, "--head") : NULL;
  if (head && nh != n)
    usage("--head has %d names but --cols has %d", nh, n);
  const char **fmt = parse_fmt(t, o, NULL);
  size_t nr;
  size_t *rows = pick_rows(t, o, &nr);

  putchar('|');
  for (int k = 0; k < n; k++) md_cell(head ? head[k] : t->header[c[k]]);
  putchar('\n');
  putchar('|');
  for (int k = 0; k < n; k++) {
    /* Right-align columns of numbers, as tables of measurements read best. */
    int numeric = 0, text = 0;
    for (size_t i = 0; i < nr; i++) {
      const char *s = t->rows[rows[i]][c[k]];
      double v;
      if (!*s) continue;
      if (as_number(s, &v)) numeric = 1;
      else text = 1;
    }
    fputs(numeric && !text ? "--:|" : "---|", stdout);
  }
  putchar('\n');
  for (size_t i = 0; i < nr; i++) {
    putchar('|');
    for (int k = 0; k < n; k++)
      md_cell(shown(t->rows[rows[i]][c[k]], fmt[c[k]]));
    putchar('\n');
  }
  free(rows);
  free(fmt);
  split_free(head, nh);
  free(c);
}

static void put_row(const char *const *f, int n) {
  char *line = csv_format_row(f, n);
  if (!line) die(EXIT_DATA, "out of memory");
  fputs(line, stdout);
  free(line);
}

/* Without --cols, every column: the rows that match, as a CSV of the
 * same header (how a section keeps only the anchors of its GPU). */
static void cmd_select(const csv_table *t, const opts *o) {
  int n = t->ncols;
  int *c;
  if (o->cols) {
    c = columns(t, o->cols, &n);
  } else {
    c = xmalloc((size_t)n * sizeof *c);
    for (int k = 0; k < n; k++) c[k] = k;
  }
  const char **fmt = parse_fmt(t, o, NULL);
  size_t nr;
  size_t *rows = pick_rows(t, o, &nr);
  if (o->sep && !*o->sep) usage("--sep needs a separator");
  const char **f = xmalloc((size_t)n * sizeof *f);
  if (o->sep) {
    for (size_t i = 0; i < nr; i++)
      for (int k = 0; k < n; k++) {
        const char *cell = shown(t->rows[rows[i]][c[k]], fmt[c[k]]);
        if (strstr(cell, o->sep) || strpbrk(cell, "\r\n"))
          die(EXIT_DATA, "%s: a %s cell holds the separator \"%s\" or a line "
              "break (\"%s\"): choose another --sep", file_path,
              t->header[c[k]], o->sep, cell);
        printf("%s%s", cell, k + 1 < n ? o->sep : "\n");
      }
    free(f);
    free(rows);
    free(fmt);
    free(c);
    return;
  }
  for (int k = 0; k < n; k++) f[k] = t->header[c[k]];
  put_row(f, n);
  for (size_t i = 0; i < nr; i++) {
    for (int k = 0; k < n; k++)
      f[k] = xstrdup(shown(t->rows[rows[i]][c[k]], fmt[c[k]]));
    put_row(f, n);
    for (int k = 0; k < n; k++) free((char *)f[k]);
  }
  free(f);
  free(rows);
  free(fmt);
  free(c);
}

static void cmd_distinct(const csv_table *t, const opts *o) {
  if (!o->cols) usage("distinct needs --cols");
  const char *sep = o->sep ? o->sep : ":";
  int n;
  int *c = columns(t, o->cols, &n);
  size_t nr, nout = 0;
  size_t *rows = pick_rows(t, o, &nr);
  size_t *out = xmalloc(nr * sizeof *out);
  for (size_t i = 0; i < nr; i++) {
    int seen = 0;
    for (size_t u = 0; u < nout && !seen; u++) {
      seen = 1;
      for (int k = 0; k < n && seen; k++)
        seen = strcmp(t->rows[rows[i]][c[k]], t->rows[out[u]][c[k]]) == 0;
    }
    if (seen) continue;
    out[nout++] = rows[i];
    for (int k = 0; k < n; k++)
      printf("%s%s", k ? sep : "", t->rows[rows[i]][c[k]]);
    putchar('\n');
  }
  free(out);
  free(rows);
  free(c);
}

static void cmd_value(const csv_table *t, const opts *o) {
  if (!o->col) usage("value needs --col");
  int c = column(t, o->col);
  const char *agg = o->agg ? o->agg : "only";
  if (strcmp(agg, "first") && strcmp(agg, "min") && strcmp(agg, "max") &&
      strcmp(agg, "only"))
    usage("--agg %s: expected first, min or max", agg);
  const char **fmt = parse_fmt(t, o, o->col);
  size_t nr;
  size_t *rows = pick_rows(t, o, &nr);
  if (nr == 0) {
    free(rows);
    free(fmt);
    if (o->def) {
      printf("%s\n", o->def);
      return;
    }
    die(EXIT_DATA, "no row of %s matches %s", file_path, describe_where(o));
  }
  const char *best = t->rows[rows[0]][c];
  if (!strcmp(agg, "only")) {
    /* Without --agg, several matching rows must agree: a silent pick
     * would quote one machine's number as if it were the only one. */
    for (size_t i = 1; i < nr; i++)
      if (!cells_equal(t->rows[rows[i]][c], best))
        die(EXIT_DATA,
            "%zu rows of %s match %s, with different %s (\"%s\", \"%s\", ...): "
            "add a --where or an --agg", nr, file_path, describe_where(o),
            o->col, best, t->rows[rows[i]][c]);
  } else if (strcmp(agg, "first")) {
    int sign = strcmp(agg, "max") == 0 ? 1 : -1;
    best = NULL;
    /* Empty cells are values not measured, not the smallest values. */
    for (size_t i = 0; i < nr; i++) {
      const char *s = t->rows[rows[i]][c];
      if (*s && (!best || sign * cmp_cells(s, best) > 0)) best = s;
    }
    if (!best) best = "";
  }
  printf("%s\n", shown(best, fmt[c]));
  free(rows);
  free(fmt);
}

static void cmd_count(const csv_table *t, const opts *o) {
  size_t nr;
  size_t *rows = pick_rows(t, o, &nr);
  free(rows);
  printf("%zu\n", nr);
}

static void cmd_check(const csv_table *t) {
  printf("%s: %zu rows, %d columns%s\n", file_path, t->nrows, t->ncols,
         t->torn ? "; its last line was torn (an interrupted write) and is "
                   "left out"
                 : "");
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
  if (argc < 3) usage(argc < 2 ? "no subcommand" : "no FILE");
  const char *cmd = argv[1];
  file_path = argv[2];
  static const char *const cmds[] = {"check", "count", "table", "select",
                                     "distinct", "value", NULL};
  /* Which options each subcommand takes (by the letter after "--"). */
  static const char *const allowed[] = {"", "wkg", "chwsfkg", "cwsfpkg",
                                        "cwspkg", "lwsafdk"};
  int which = -1;
  for (int i = 0; cmds[i]; i++)
    if (strcmp(cmd, cmds[i]) == 0) which = i;
  if (which < 0) usage("unknown subcommand \"%s\"", cmd);

  opts o = {0};
  o.fmt = xmalloc((size_t)argc * sizeof *o.fmt);
  o.where = xmalloc((size_t)argc * sizeof *o.where);
  for (int i = 3; i < argc; i++) {
    static const struct { const char *name; char key; } names[] = {
        {"--cols", 'c'}, {"--head", 'h'}, {"--where", 'w'}, {"--sort", 's'},
        {"--fmt", 'f'},  {"--sep", 'p'},  {"--col", 'l'},   {"--agg", 'a'},
        {"--default", 'd'}, {"--latest", 'k'}, {"--first-of", 'g'}};
    char key = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
      if (strcmp(argv[i], names[k].name) == 0) key = names[k].key;
    if (!key || !strchr(allowed[which], key))
      usage("%s does not take option \"%s\"", cmd, argv[i]);
    if (i + 1 >= argc) usage("%s needs a value", argv[i]);
    const char *v = argv[++i];
    switch (key) {
      case 'c': o.cols = v; break;
      case 'h': o.head = v; break;
      case 'w': o.where[o.nwhere++] = v; break;
      case 's': o.sort = v; break;
      case 'f': o.fmt[o.nfmt++] = v; break;
      case 'p': o.sep = v; break;
      case 'l': o.col = v; break;
      case 'a': o.agg = v; break;
      case 'd': o.def = v; break;
      case 'k': o.latest = v; break;
      case 'g': o.first = v; break;
    }
  }

  csv_table t;
  if (csv_read(file_path, &t) < 0) {
    char buf[4096];
    free(o.fmt);
    free(o.where);
    die(EXIT_DATA, "%s", csv_error(buf, sizeof buf));
  }
  switch (which) {
    case 0: cmd_check(&t); break;
    case 1: cmd_count(&t, &o); break;
    case 2: cmd_table(&t, &o); break;
    case 3: cmd_select(&t, &o); break;
    case 4: cmd_distinct(&t, &o); break;
    case 5: cmd_value(&t, &o); break;
  }
  /* A report built from a truncated table would be wrong without a word. */
  if (fflush(stdout) != 0 || ferror(stdout))
    die(EXIT_DATA, "cannot write the output: %s", strerror(errno));
  csv_free(&t);
  free(o.fmt);
  free(o.where);
  return 0;
}
