/* Reading an experiment file: libconfig parses, we validate everything it
 * cannot (unknown keys, types, ranges, completeness), apply command-line
 * overrides, and check every expanded job before any job runs. Each mistake
 * becomes one line "file:line: what is wrong (what is allowed)". */
#include "config.h"
#include "harness/experiment.h"
#include "common/json.h"
#include "harness/lint.h"

#include <errno.h>
#include <fcntl.h>
#include <libconfig.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A sweep larger than this is a mistake (a list pasted twice, a typo in a
 * range), not an experiment anyone means to run. */
#define MAX_JOBS 1000000

static const char CMDLINE[] = "command line";

/* State of one experiment_load call. */
typedef struct loader {
  experiment *e;
  char *err;
  size_t errlen;
  const char **leaves;   /* the kind's leaf names, in table order */
  const config_setting_t *kind_setting;
  const char **set_arg;  /* per parameter: the --set that fixed it, or NULL */
  const char **only_arg; /* per parameter: the --only that narrowed it */
} loader;

/* ---- messages --------------------------------------------------------- */

static const char *setting_file(const loader *L, const config_setting_t *s) {
  const char *f = config_setting_source_file(s);
  return f ? f : L->e->path;
}

/* L->err = prefix + the message; returns -1, so callers can return it. */
static int vfail(loader *L, const char *prefix, const char *fmt, va_list ap) {
  int n = snprintf(L->err, L->errlen, "%s", prefix);
  if (n >= 0 && (size_t)n < L->errlen)
    vsnprintf(L->err + n, L->errlen - (size_t)n, fmt, ap);
  return -1;
}

static int fail_at(loader *L, const config_setting_t *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail_at(loader *L, const config_setting_t *s, const char *fmt,
                   ...) {
  char at[PATH_MAX + 32];
  snprintf(at, sizeof at, "%s:%u: ", setting_file(L, s),
           config_setting_source_line(s));
  va_list ap;
  va_start(ap, fmt);
  vfail(L, at, fmt, ap);
  va_end(ap);
  return -1;
}

/* Where parameter i's setting came from, as a message prefix: "file:line"
 * or "command line: --set name=value". */
static void where(const loader *L, int i, char *buf, size_t n) {
  const setting *s = &L->e->settings[i];
  if (s->line > 0)
    snprintf(buf, n, "%s:%d", s->file, s->line);
  else if (L->set_arg && L->set_arg[i])
    snprintf(buf, n, "%s: --set %s", s->file, L->set_arg[i]);
  else
    snprintf(buf, n, "%s", s->file);
}

static void join(const char *const *names, int n, char *buf, size_t cap) {
  size_t o = 0;
  buf[0] = '\0';
  for (int k = 0; k < n && o < cap; k++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%s", k ? ", " : "", names[k]);
}

static const char *cfg_type_name(int t) {
  switch (t) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64: return "an integer";
    case CONFIG_TYPE_FLOAT: return "a float";
    case CONFIG_TYPE_STRING: return "a string";
    case CONFIG_TYPE_BOOL: return "a boolean";
    case CONFIG_TYPE_GROUP: return "a group";
    case CONFIG_TYPE_ARRAY: return "an array";
    case CONFIG_TYPE_LIST: return "a list";
  }
  return "nothing";
}

/* "unknown setting run.warmpu (did you mean run.warmup? allowed in run:
 * ...)". prefix is "" at top level, else "run." / "sweep."; hint, if not
 * NULL, replaces the guess. */
static int unknown_setting(loader *L, const config_setting_t *s,
                           const char *prefix, const char *const *allowed,
                           int nallowed, const char *where_text,
                           const char *hint) {
  const char *name = config_setting_name(s);
  char list[2048], guess[512] = "";
  join(allowed, nallowed, list, sizeof list);
  if (hint) {
    snprintf(guess, sizeof guess, "%s; ", hint);
  } else {
    int k = lint_nearest(name, allowed, nallowed);
    if (k >= 0)
      snprintf(guess, sizeof guess, "did you mean %s%s? ", prefix, allowed[k]);
  }
  return fail_at(L, s, "unknown setting %s%s (%sallowed %s: %s)", prefix, name,
                 guess, where_text, list);
}

/* ---- the kind's names --------------------------------------------------- */

static int has_name(const char *const *names, int n, const char *name) {
  for (int k = 0; k < n; k++)
    if (strcmp(names[k], name) == 0) return 1;
  return 0;
}

static int list_leaves(loader *L) {
  const kind_def *k = L->e->kind;
  L->leaves = calloc((size_t)k->nparams + 1, sizeof *L->leaves);
  if (!L->leaves) return -1;
  for (int i = 0; i < k->nparams; i++) L->leaves[i] = k->params[i].name;
  return 0;
}

static int group_param(const kind_def *k, const char *group,
                       const char *name) {
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].group, group) == 0 &&
        strcmp(k->params[i].name, name) == 0)
      return i;
  return -1;
}

/* ---- values ------------------------------------------------------------- */

/* One scalar setting as a value of d. prefix ("run.", "sweep.") precedes
 * d->name in messages. */
static int read_scalar(loader *L, const config_setting_t *s,
                       const param_def *d, const char *prefix, pvalue *v) {
  char allowed[512], msg[1024];
  param_allowed(d, allowed, sizeof allowed);
  int t = config_setting_type(s);
  int is_int = t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
  memset(v, 0, sizeof *v);
  v->type = d->type;
  if (d->type == P_INT && is_int) {
    v->i = config_setting_get_int64(s);  /* get_int is 0 beyond 2^31 */
  } else if (d->type == P_FLOAT && (is_int || t == CONFIG_TYPE_FLOAT)) {
    v->f = is_int ? (double)config_setting_get_int64(s)
                  : config_setting_get_float(s);
  } else if (d->type == P_BOOL && t == CONFIG_TYPE_BOOL) {
    v->i = config_setting_get_bool(s) ? 1 : 0;
  } else if (d->type == P_STRING && t == CONFIG_TYPE_STRING) {
    const char *str = config_setting_get_string(s);
    if (!str || strlen(str) >= PVALUE_STR_MAX)
      return fail_at(L, s, "%s%s is too long (allowed: at most %d bytes)",
                     prefix, d->name, PVALUE_STR_MAX - 1);
    memcpy(v->s, str, strlen(str) + 1);
  } else {
    int aggregate = config_setting_is_aggregate(s);
    return fail_at(L, s, "%s%s must be %s, got %s (%s%s)", prefix, d->name,
                   ptype_name(d->type), cfg_type_name(t), allowed,
                   aggregate && strcmp(prefix, "sweep.") != 0
                       ? "; lists of values to sweep go in sweep"
                       : "");
  }
  if (pvalue_check(d, v, msg, sizeof msg) != 0)
    return fail_at(L, s, "%s%s", prefix, msg);
  return 0;
}

static void free_setting(setting *s) {
  free(s->values);
  free(s->file);
  memset(s, 0, sizeof *s);
}

/* Store values (taken over) as parameter i's, given at file:line. */
static int store(loader *L, int i, pvalue *values, int n, int swept,
                 const char *file, int line) {
  setting *s = &L->e->settings[i];
  char *f = strdup(file);
  if (!f) {
    free(values);
    snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
    return -1;
  }
  const param_def *def = s->def;
  free_setting(s);
  s->def = def;
  s->values = values;
  s->nvalues = n;
  s->swept = swept;
  s->file = f;
  s->line = line;
  return 0;
}

/* Reported at the sweep entry, whichever of the two was written first. */
static int both_error(loader *L, const char *sweep_file, int sweep_line,
                      const param_def *d, const char *fixed_where) {
  snprintf(L->err, L->errlen,
           "%s:%d: %s is given both in sweep and in %s at %s (allowed: a "
           "fixed value in %s or a list in sweep, not both)",
           sweep_file, sweep_line, d->name, d->group, fixed_where, d->group);
  return -1;
}

/* ---- the file's parts --------------------------------------------------- */

static int read_fixed(loader *L, const config_setting_t *s, int i) {
  setting *st = &L->e->settings[i];
  if (st->swept) {
    char here[1024];
    snprintf(here, sizeof here, "%s:%u", setting_file(L, s),
             config_setting_source_line(s));
    return both_error(L, st->file, st->line, st->def, here);
  }
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s.", st->def->group);
  pvalue *v = malloc(sizeof *v);
  if (!v) {
    snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
    return -1;
  }
  if (read_scalar(L, s, st->def, prefix, v) != 0) {
    free(v);
    return -1;
  }
  return store(L, i, v, 1, 0, setting_file(L, s),
               config_setting_source_line(s));
}

static int read_group(loader *L, const config_setting_t *g,
                      const char *group) {
  const kind_def *k = L->e->kind;
  const char *names[k->nparams];
  int n = 0;
  for (int i = 0; i < k->nparams; i++)
    if (strcmp(k->params[i].group, group) == 0) names[n++] = k->params[i].name;
  char list[2048], where_text[160];
  join(names, n, list, sizeof list);
  if (!config_setting_is_group(g))
    return fail_at(L, g, "%s must be a group like %s = { ... }, got %s "
                   "(allowed in %s: %s)", group, group,
                   cfg_type_name(config_setting_type(g)), group, list);
  snprintf(where_text, sizeof where_text, "in %s", group);
  char prefix[128];
  snprintf(prefix, sizeof prefix, "%s.", group);
  for (int m = 0; m < config_setting_length(g); m++) {
    const config_setting_t *s = config_setting_get_elem(g, (unsigned)m);
    if (!s) continue;
    const char *name = config_setting_name(s);
    int i = group_param(k, group, name);
    if (i < 0) {
      int other = kind_param_index(k, name);
      char hint[300];
      if (other >= 0)
        snprintf(hint, sizeof hint, "%s belongs in %s", name,
                 k->params[other].group);
      return unknown_setting(L, s, prefix, names, n, where_text,
                             other >= 0 ? hint : NULL);
    }
    if (read_fixed(L, s, i) != 0) return -1;
  }
  return 0;
}

static int read_sweep_list(loader *L, const config_setting_t *s, int i) {
  const param_def *d = &L->e->kind->params[i];
  char allowed[512];
  param_allowed(d, allowed, sizeof allowed);
  if (!config_setting_is_array(s) && !config_setting_is_list(s))
    return fail_at(L, s, "sweep.%s must be a list like %s = [a, b], got %s "
                   "(%s)", d->name, d->name,
                   cfg_type_name(config_setting_type(s)), allowed);
  int n = config_setting_length(s);
  if (n <= 0)
    return fail_at(L, s, "sweep.%s is an empty list (give at least one "
                   "value; %s)", d->name, allowed);
  pvalue *v = calloc((size_t)n, sizeof *v);
  if (!v) {
    snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
    return -1;
  }
  for (int m = 0; m < n; m++) {
    /* Elements carry their own line, so a mistake in a list written over
     * several lines is reported where it is. */
    const config_setting_t *el = config_setting_get_elem(s, (unsigned)m);
    if (!el) {
      free(v);
      return fail_at(L, s, "sweep.%s: libconfig lost element %d", d->name, m);
    }
    if (read_scalar(L, el, d, "sweep.", &v[m]) != 0) {
      free(v);
      return -1;
    }
    for (int j = 0; j < m; j++)
      if (pvalue_equal(&v[j], &v[m])) {
        char text[PVALUE_STR_MAX * 4 + 8];
        lint_value_text(&v[m], text, sizeof text);
        free(v);
        return fail_at(L, el, "sweep.%s lists %s twice (allowed: each value "
                       "once; a repeat would run the same jobs twice)",
                       d->name, text);
      }
  }
  return store(L, i, v, n, 1, setting_file(L, s),
               config_setting_source_line(s));
}

static int read_sweep(loader *L, const config_setting_t *g) {
  const kind_def *k = L->e->kind;
  char list[2048];
  join(L->leaves, k->nparams, list, sizeof list);
  if (!config_setting_is_group(g))
    return fail_at(L, g, "sweep must be a group like sweep = { NAME = [a, "
                   "b]; }, got %s (allowed in sweep: %s)",
                   cfg_type_name(config_setting_type(g)), list);
  for (int m = 0; m < config_setting_length(g); m++) {
    const config_setting_t *s = config_setting_get_elem(g, (unsigned)m);
    if (!s) continue;
    int i = kind_param_index(k, config_setting_name(s));
    if (i < 0)
      return unknown_setting(L, s, "sweep.", L->leaves, k->nparams,
                             "in sweep", NULL);
    setting *st = &L->e->settings[i];
    if (st->nvalues > 0 && !st->swept) {
      char fixed_at[1024];
      where(L, i, fixed_at, sizeof fixed_at);
      return both_error(L, setting_file(L, s), config_setting_source_line(s),
                        st->def, fixed_at);
    }
    if (read_sweep_list(L, s, i) != 0) return -1;
    L->e->sweep_order[L->e->nsweep++] = i;
  }
  return 0;
}

/* The name becomes file names in the output folder: NAME.csv, NAME.json,
 * NAME.samples.jsonl, logs/NAME.log and logs/NAME.jobN.result, which a
 * multi-rank job writes as NAME.jobN.result.rankR.tmpPID. That longest
 * suffix stays under 55 bytes, so this limit keeps every file name within
 * Linux's 255 bytes (NAME_MAX). */
#define NAME_LEN_MAX 200

static int read_name(loader *L, const config_setting_t *s) {
  static const char ok[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";
  char rule[256];
  snprintf(rule, sizeof rule, "allowed: letters, digits, _ . -, not "
           "starting with . or -, at most %d characters; it names the "
           "results file NAME.csv", NAME_LEN_MAX);
  if (config_setting_type(s) != CONFIG_TYPE_STRING)
    return fail_at(L, s, "name must be a string, got %s (%s)",
                   cfg_type_name(config_setting_type(s)), rule);
  const char *v = config_setting_get_string(s);
  if (!v) v = "";
  size_t len = strlen(v);
  char q[512];
  lint_quote(v, q, sizeof q);
  if (len == 0 || strspn(v, ok) != len)
    return fail_at(L, s, "name = %s is not allowed (%s)", q, rule);
  /* A leading . hides the files (and . or .. would name folders); a
   * leading - makes NAME.csv read as an option to the tools given it. */
  if (v[0] == '.' || v[0] == '-')
    return fail_at(L, s, "name = %s starts with \"%c\" (%s)", q, v[0], rule);
  if (len > NAME_LEN_MAX)
    return fail_at(L, s, "name is %zu characters long (%s)", len, rule);
  L->e->name = strdup(v);
  if (!L->e->name) {
    snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
    return -1;
  }
  return 0;
}

static int count_kinds(void) {
  int n = 0;
  while (kind_all()[n]) n++;
  return n;
}

/* The kinds' names into names (count_kinds() entries) and as a list. */
static void kind_names(const char **names, char *list, size_t cap) {
  int n = 0;
  for (const kind_def *const *k = kind_all(); *k; k++) names[n++] = (*k)->name;
  join(names, n, list, cap);
}

void experiment_unknown_kind(const char *name, char *buf, size_t n) {
  int nk = count_kinds();
  const char *names[nk + 1];
  char list[1024], q[512], guess[300] = "";
  kind_names(names, list, sizeof list);
  lint_quote(name, q, sizeof q);
  int k = lint_nearest(name, names, nk);
  if (k >= 0) snprintf(guess, sizeof guess, "did you mean %s? ", names[k]);
  snprintf(buf, n, "unknown kind %s (%skinds: %s)", q, guess, list);
}

/* The kind setting decides what else is allowed, so it is read first. */
static int read_kind(loader *L, const config_setting_t *root) {
  int n = count_kinds();
  const char *names[n + 1];
  char list[1024];
  kind_names(names, list, sizeof list);
  const config_setting_t *s = config_setting_get_member(root, "kind");
  L->kind_setting = s;
  if (!s) return 0;  /* reported after unknown keys: one may be a typo */
  if (config_setting_type(s) != CONFIG_TYPE_STRING)
    return fail_at(L, s, "kind must be a string, got %s (kinds: %s)",
                   cfg_type_name(config_setting_type(s)), list);
  const char *v = config_setting_get_string(s);
  L->e->kind = v ? kind_find(v) : NULL;
  if (L->e->kind) return 0;
  char msg[2048];
  experiment_unknown_kind(v ? v : "", msg, sizeof msg);
  return fail_at(L, s, "%s", msg);
}

/* Top-level names allowed: name, kind, sweep and the kind's groups; with
 * no kind, any kind's groups (so a typo of `kind` is what gets reported). */
static int check_top_names(loader *L, const config_setting_t *root) {
  const kind_def *const *all = kind_all();
  int cap = 3;
  for (int a = 0; all[a]; a++) cap += all[a]->nparams;
  const char *allowed[cap];
  allowed[0] = "name", allowed[1] = "kind", allowed[2] = "sweep";
  int n = 3;
  for (int a = 0; all[a]; a++) {
    const kind_def *k = L->e->kind ? L->e->kind : all[a];
    for (int i = 0; i < k->nparams; i++)
      if (!has_name(allowed, n, k->params[i].group))
        allowed[n++] = k->params[i].group;
    if (L->e->kind) break;
  }
  for (int m = 0; m < config_setting_length(root); m++) {
    const config_setting_t *s = config_setting_get_elem(root, (unsigned)m);
    if (!s || has_name(allowed, n, config_setting_name(s))) continue;
    char hint[300];
    int i = L->e->kind ? kind_param_index(L->e->kind, config_setting_name(s))
                       : -1;
    if (i >= 0)
      snprintf(hint, sizeof hint, "%s belongs in %s = { ... } or in sweep",
               config_setting_name(s), L->e->kind->params[i].group);
    return unknown_setting(L, s, "", allowed, n, "at top level",
                           i >= 0 ? hint : NULL);
  }
  return 0;
}

/* Every parameter the file leaves out takes its kind's default, recorded
 * as defaulted at the kind line (the kind brings it); one without a
 * default must be given. */
static int check_complete(loader *L) {
  if (!L->e->name) {
    snprintf(L->err, L->errlen, "%s:1: name is not given (write name = "
             "\"NAME\"; it names the results file NAME.csv)", L->e->path);
    return -1;
  }
  const kind_def *k = L->e->kind;
  for (int i = 0; i < k->nparams; i++) {
    const param_def *d = &k->params[i];
    if (L->e->settings[i].nvalues > 0) continue;
    pvalue *v = malloc(sizeof *v);
    if (!v) {
      snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
      return -1;
    }
    if (param_default(d, v) != 0) {
      free(v);
      return fail_at(L, L->kind_setting, "%s.%s is not given (allowed: a "
                     "value in %s = { ... } or a list in sweep; it has no "
                     "default)", d->group, d->name, d->group);
    }
    if (store(L, i, v, 1, 0, setting_file(L, L->kind_setting),
              config_setting_source_line(L->kind_setting)) != 0)
      return -1;
    L->e->settings[i].defaulted = 1;
  }
  return 0;
}

static int read_root(loader *L, const config_setting_t *root) {
  if (read_kind(L, root) != 0 || check_top_names(L, root) != 0) return -1;
  if (!L->e->kind) {
    const char *names[count_kinds() + 1];
    char list[1024];
    kind_names(names, list, sizeof list);
    snprintf(L->err, L->errlen, "%s:1: kind is not given (write kind = "
             "\"KIND\"; kinds: %s)", L->e->path, list);
    return -1;
  }
  const kind_def *k = L->e->kind;
  L->e->settings = calloc((size_t)k->nparams, sizeof *L->e->settings);
  L->e->sweep_order = calloc((size_t)k->nparams, sizeof *L->e->sweep_order);
  if (!L->e->settings || !L->e->sweep_order || list_leaves(L) != 0) {
    snprintf(L->err, L->errlen, "%s: out of host memory", L->e->path);
    return -1;
  }
  for (int i = 0; i < k->nparams; i++) L->e->settings[i].def = &k->params[i];
  for (int m = 0; m < config_setting_length(root); m++) {
    const config_setting_t *s = config_setting_get_elem(root, (unsigned)m);
    if (!s) continue;
    const char *name = config_setting_name(s);
    int rc = 0;
    if (strcmp(name, "name") == 0)
      rc = read_name(L, s);
    else if (strcmp(name, "sweep") == 0)
      rc = read_sweep(L, s);
    else if (strcmp(name, "kind") != 0)
      rc = read_group(L, s, name);
    if (rc != 0) return -1;
  }
  return 0;
}

/* ---- libconfig ---------------------------------------------------------- */

/* libconfig's terse parse messages, with what would have been right. */
static const char *parse_hint(const char *text) {
  static const struct { const char *text, *hint; } hints[] = {
      {"syntax error",
       "allowed: name = value; with groups { }, arrays [ ], lists ( ), "
       "strings in double quotes, and no comma after the last element"},
      {"duplicate setting name",
       "allowed: each name once per group, @include'd files included"},
      {"mismatched element type in array",
       "allowed: one type per array [ ]: write 2.0 among floats, 1L among "
       "64-bit integers, or use a list ( )"},
      {"cannot open include file",
       "relative @include paths resolve against the experiment file's "
       "folder, absolute ones are read as given"},
  };
  for (size_t k = 0; k < sizeof hints / sizeof hints[0]; k++)
    if (strcmp(text, hints[k].text) == 0) return hints[k].hint;
  return NULL;
}

/* libconfig 1.5 opens include_dir + "/" + path for every @include, an
 * absolute path too, and with no include_dir opens the path as written. So
 * it reads the experiment from inside the experiment's folder with no
 * include_dir: relative paths then resolve against that folder and absolute
 * ones as given, as lint_scan resolved them. The file itself is opened
 * first (its path is relative to where the runner started), and the
 * runner's folder is restored before returning. */
static int parse(loader *L, config_t *cfg, const char *dir) {
  const char *path = L->e->path;
  int back = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (back < 0) {
    snprintf(L->err, L->errlen, "%s: cannot read experiment file: cannot "
             "open the current folder to come back to: %s", path,
             strerror(errno));
    return -1;
  }
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(L->err, L->errlen, "%s: cannot read experiment file: %s", path,
             strerror(errno));
    close(back);
    return -1;
  }
  if (chdir(dir) != 0) {
    snprintf(L->err, L->errlen, "%s: cannot read experiment file: cannot "
             "enter its folder %s: %s", path, dir, strerror(errno));
    fclose(f);
    close(back);
    return -1;
  }
  errno = 0;
  int read_ok = config_read(cfg, f) == CONFIG_TRUE;
  int saved = errno;
  int came_back = fchdir(back) == 0;
  int back_errno = errno;
  /* Both were only read from: a failed close loses nothing. */
  fclose(f);
  close(back);
  if (!came_back) {
    snprintf(L->err, L->errlen, "%s: cannot return to the runner's folder "
             "after reading the experiment: %s", path, strerror(back_errno));
    return -1;
  }
  if (read_ok) return 0;
  const char *text = config_error_text(cfg) ? config_error_text(cfg)
                                            : "unknown error";
  if (config_error_type(cfg) == CONFIG_ERR_FILE_IO) {
    snprintf(L->err, L->errlen, "%s: cannot read experiment file: %s", path,
             saved ? strerror(saved) : text);
    return -1;
  }
  /* Read from a stream, the experiment file itself has no name in
   * libconfig's errors; included files have theirs as written. */
  const char *file = config_error_file(cfg) ? config_error_file(cfg) : path;
  const char *hint = parse_hint(text);
  snprintf(L->err, L->errlen, hint ? "%s:%d: %s (%s)" : "%s:%d: %s%s", file,
           config_error_line(cfg), text, hint ? hint : "");
  return -1;
}

/* ---- command line ------------------------------------------------------- */

static int cmdline_error(loader *L, const char *opt, const char *arg,
                         const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int cmdline_error(loader *L, const char *opt, const char *arg,
                         const char *fmt, ...) {
  char at[4096];
  snprintf(at, sizeof at, "%s: %s %s: ", CMDLINE, opt, arg);
  va_list ap;
  va_start(ap, fmt);
  vfail(L, at, fmt, ap);
  va_end(ap);
  return -1;
}

/* The parameter named in "name=value" (leaf or group.name); -1 with the
 * error written. *value points after the '='. */
static int cmdline_param(loader *L, const char *opt, const char *arg,
                         const char **value) {
  const kind_def *k = L->e->kind;
  const char *eq = strchr(arg, '=');
  char list[2048];
  join(L->leaves, k->nparams, list, sizeof list);
  if (!eq || eq == arg)
    return cmdline_error(L, opt, arg, "expected NAME=VALUE (allowed names: "
                         "%s)", list);
  *value = eq + 1;
  char name[256];
  snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
  const char *dot = strchr(name, '.');
  if (!dot) {
    int i = kind_param_index(k, name);
    if (i >= 0) return i;
  } else {
    char group[256];
    snprintf(group, sizeof group, "%.*s", (int)(dot - name), name);
    int i = group_param(k, group, dot + 1);
    if (i >= 0) return i;
  }
  /* Suggest in the form the user wrote: leaf, or group.leaf. */
  char qualified[k->nparams][160];
  const char *cands[k->nparams];
  int n = 0;
  for (int i = 0; i < k->nparams; i++, n++) {
    snprintf(qualified[n], sizeof qualified[n], "%s.%s", k->params[i].group,
             k->params[i].name);
    cands[n] = dot ? qualified[n] : k->params[i].name;
  }
  char guess[300] = "";
  int g = dot ? kind_param_index(k, dot + 1) : -1;  /* right leaf, wrong group */
  if (g < 0) g = lint_nearest(name, cands, n);
  if (g >= 0) snprintf(guess, sizeof guess, "did you mean %s? ", cands[g]);
  cmdline_error(L, opt, arg, "unknown parameter %s (%sallowed: %s)", name,
                guess, list);
  return -1;
}

static void drop_from_sweep(experiment *e, int i) {
  int o = 0;
  for (int s = 0; s < e->nsweep; s++)
    if (e->sweep_order[s] != i) e->sweep_order[o++] = e->sweep_order[s];
  e->nsweep = o;
}

static int apply_set(loader *L, const char *arg) {
  const char *text = NULL;
  int i = cmdline_param(L, "--set", arg, &text);
  if (i < 0) return -1;
  char msg[1024];
  pvalue *v = malloc(sizeof *v);
  if (!v) return cmdline_error(L, "--set", arg, "out of host memory");
  if (pvalue_parse(&L->e->kind->params[i], text, v, msg, sizeof msg) != 0) {
    free(v);
    return cmdline_error(L, "--set", arg, "%s", msg);
  }
  drop_from_sweep(L->e, i);
  L->set_arg[i] = arg;
  return store(L, i, v, 1, 0, CMDLINE, 0);
}

/* Keeps the listed values of a swept parameter, in the file's order. */
static int apply_only(loader *L, const char *arg) {
  const char *text = NULL;
  int i = cmdline_param(L, "--only", arg, &text);
  if (i < 0) return -1;
  setting *s = &L->e->settings[i];
  const param_def *d = s->def;
  if (!s->swept) {
    char at[1024];
    if (L->set_arg && L->set_arg[i])
      snprintf(at, sizeof at, "by --set %s", L->set_arg[i]);
    else if (s->defaulted)
      snprintf(at, sizeof at, "at its default");
    else
      snprintf(at, sizeof at, "at %s:%d", s->file, s->line);
    return cmdline_error(L, "--only", arg, "%s is not swept (it is fixed "
                         "%s; allowed: --only on swept parameters, --set "
                         "%s=%.*s to change a fixed one)", d->name, at,
                         d->name, (int)strcspn(text, ","), text);
  }
  /* A second --only for one parameter would narrow what the first kept: a
   * value given in both would pass silently, and one the first dropped
   * would be called "not in the sweep list". */
  if (L->only_arg[i])
    return cmdline_error(L, "--only", arg, "%s is already narrowed by --only "
                         "%s (allowed: one --only per parameter, listing "
                         "every value to keep)", d->name, L->only_arg[i]);
  L->only_arg[i] = arg;
  char *keep = calloc((size_t)s->nvalues, 1);
  char *copy = strdup(text);
  if (!keep || !copy) {
    free(keep);
    free(copy);
    return cmdline_error(L, "--only", arg, "out of host memory");
  }
  int rc = 0;
  /* strsep keeps empty fields ("1,,2"), which then fail to parse. */
  for (char *p = copy, *tok; rc == 0 && (tok = strsep(&p, ",")) != NULL;) {
    pvalue v;
    char msg[1024];
    if (pvalue_parse(d, tok, &v, msg, sizeof msg) != 0) {
      rc = cmdline_error(L, "--only", arg, "%s", msg);
      break;
    }
    int found = -1;
    for (int m = 0; m < s->nvalues && found < 0; m++)
      if (pvalue_equal(&s->values[m], &v)) found = m;
    if (found < 0) {
      char vt[PVALUE_STR_MAX * 4 + 8], list[2048];
      size_t o = 0;
      list[0] = '\0';
      for (int m = 0; m < s->nvalues && o < sizeof list; m++) {
        lint_value_text(&s->values[m], vt, sizeof vt);
        o += (size_t)snprintf(list + o, sizeof list - o, "%s%s",
                              m ? ", " : "", vt);
      }
      lint_value_text(&v, vt, sizeof vt);
      rc = cmdline_error(L, "--only", arg, "%s = %s is not in the sweep list "
                         "(allowed: %s)", d->name, vt, list);
      break;
    }
    if (keep[found]) {
      /* As in a sweep list, a repeat is a slip (a value meant to be
       * another), so it is reported rather than merged. */
      char vt[PVALUE_STR_MAX * 4 + 8];
      lint_value_text(&v, vt, sizeof vt);
      rc = cmdline_error(L, "--only", arg, "%s lists %s twice (allowed: "
                         "each value once)", d->name, vt);
      break;
    }
    keep[found] = 1;
  }
  int o = 0;
  for (int m = 0; rc == 0 && m < s->nvalues; m++)
    if (keep[m]) s->values[o++] = s->values[m];
  if (rc == 0) s->nvalues = o;
  free(keep);
  free(copy);
  return rc;
}

/* ---- expansion ---------------------------------------------------------- */

size_t experiment_njobs(const experiment *e) {
  size_t n = 1;
  for (int s = 0; s < e->nsweep; s++)
    n *= (size_t)e->settings[e->sweep_order[s]].nvalues;
  return n;
}

void experiment_job(const experiment *e, size_t i, job *j) {
  const kind_def *k = e->kind;
  j->kind = k;
  j->index = (int)i;
  for (int p = 0; p < k->nparams; p++) j->v[p] = e->settings[p].values[0];
  /* The last sweep key written varies fastest. */
  for (int s = e->nsweep - 1; s >= 0; s--) {
    const setting *st = &e->settings[e->sweep_order[s]];
    j->v[e->sweep_order[s]] = st->values[i % (size_t)st->nvalues];
    i /= (size_t)st->nvalues;
  }
}

static int check_size(loader *L) {
  const experiment *e = L->e;
  size_t n = 1;
  for (int s = 0; s < e->nsweep; s++) {
    size_t len = (size_t)e->settings[e->sweep_order[s]].nvalues;
    if (n > MAX_JOBS / len) {
      char at[1024];
      where(L, e->sweep_order[s], at, sizeof at);
      snprintf(L->err, L->errlen, "%s: the sweep expands to more than %d "
               "jobs (allowed: at most %d; narrow it with --only)", at, MAX_JOBS,
               MAX_JOBS);
      return -1;
    }
    n *= len;
  }
  return 0;
}

/* Every job's cross-parameter checks: kind->validate on its settings
 * struct, blaming the parameter it names, then the one-rank rule. */
static int check_jobs(loader *L) {
  const experiment *e = L->e;
  const kind_def *k = e->kind;
  if (!k->validate && !k->one_rank) return 0;
  pvalue *v = calloc((size_t)k->nparams, sizeof *v);
  void *settings = calloc(1, k->settings_size);
  if (!v || !settings) {
    free(v);
    free(settings);
    snprintf(L->err, L->errlen, "%s: out of host memory", e->path);
    return -1;
  }
  job j = {.v = v};
  size_t n = experiment_njobs(e);
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0; i++) {
    char msg[1024] = "";
    experiment_job(e, i, &j);
    job_settings(&j, settings);
    int blame = k->validate ? k->validate(settings, msg, sizeof msg) : 0;
    if (blame == 0 && k->one_rank) blame = job_need_one_rank(&j, msg, sizeof msg);
    if (blame == 0) continue;
    int p = kind_blamed_param(k, blame);
    /* A blame that names no row is the kind's bug; the job is still
     * refused, naming the file. */
    char at[1024];
    if (p >= 0)
      where(L, p, at, sizeof at);
    else
      snprintf(at, sizeof at, "%s", e->path);
    snprintf(L->err, L->errlen, "%s: %s", at, msg);
    rc = -1;
  }
  free(settings);
  free(v);
  return rc;
}

/* ---- entry points ------------------------------------------------------- */

static int load(loader *L, const char *path, char *const *sets, int nsets,
                char *const *onlys, int nonlys) {
  char *tmp = strdup(path);
  L->e->path = strdup(path);
  if (!tmp || !L->e->path) {
    free(tmp);
    snprintf(L->err, L->errlen, "%s: out of host memory", path);
    return -1;
  }
  char *dir = dirname(tmp);  /* include_dir: the experiment's folder */
  int rc = lint_scan(path, dir, L->err, L->errlen);
  if (rc == 0) {
    config_t cfg;
    config_init(&cfg);
    rc = parse(L, &cfg, dir);
    if (rc == 0) rc = read_root(L, config_root_setting(&cfg));
    if (rc == 0) {
      L->set_arg = calloc((size_t)L->e->kind->nparams, sizeof *L->set_arg);
      L->only_arg = calloc((size_t)L->e->kind->nparams, sizeof *L->only_arg);
      if (!L->set_arg || !L->only_arg) {
        snprintf(L->err, L->errlen, "%s: out of host memory", path);
        rc = -1;
      }
    }
    /* --set before the defaults: it may give a setting the file leaves
     * out, one without a default too. check_complete still reads the
     * kind line from cfg, so cfg lives until then. */
    for (int s = 0; rc == 0 && s < nsets; s++) rc = apply_set(L, sets[s]);
    if (rc == 0) rc = check_complete(L);
    config_destroy(&cfg);  /* every string we keep has been copied */
  }
  free(tmp);
  for (int s = 0; rc == 0 && s < nonlys; s++) rc = apply_only(L, onlys[s]);
  if (rc == 0) rc = check_size(L);
  if (rc == 0) rc = check_jobs(L);
  return rc;
}

int experiment_load(experiment *e, const char *path, char *const *sets,
                    int nsets, char *const *onlys, int nonlys, char *err,
                    size_t errlen) {
  memset(e, 0, sizeof *e);
  loader L = {.e = e, .err = err, .errlen = errlen};
  if (errlen > 0) err[0] = '\0';
  int rc = load(&L, path, sets, nsets, onlys, nonlys);
  free(L.leaves);
  free(L.set_arg);
  free(L.only_arg);
  if (rc != 0) experiment_free(e);
  return rc;
}

void experiment_free(experiment *e) {
  if (e->settings)
    for (int i = 0; i < e->kind->nparams; i++) free_setting(&e->settings[i]);
  free(e->settings);
  free(e->sweep_order);
  free(e->name);
  free(e->path);
  memset(e, 0, sizeof *e);
}

/* ---- JSON --------------------------------------------------------------- */

static void json_value(FILE *f, const pvalue *v) {
  char text[64];
  if (v->type == P_STRING) {
    json_string(f, v->s);
    return;
  }
  pvalue_format(v, text, sizeof text);
  fputs(text, f);
}

static void json_param(FILE *f, const setting *s, int indent) {
  static const char *const types[] = {"integer", "float", "string", "bool"};
  fprintf(f, "%*s", indent, "");
  json_string(f, s->def->name);
  fprintf(f, ": {\"group\": ");
  json_string(f, s->def->group);
  fprintf(f, ", \"type\": \"%s\", \"unit\": ", types[s->def->type]);
  if (s->def->unit)
    json_string(f, s->def->unit);
  else
    fputs("null", f);
  fprintf(f, ", \"file\": ");
  json_string(f, s->file);
  fprintf(f, ", \"line\": %d, \"%s\": ", s->line, s->swept ? "sweep" : "value");
  if (!s->swept) {
    json_value(f, &s->values[0]);
  } else {
    fputc('[', f);
    for (int m = 0; m < s->nvalues; m++) {
      if (m) fputs(", ", f);
      json_value(f, &s->values[m]);
    }
    fputc(']', f);
  }
  /* The declared default (also where the file gives another value), and
   * whether this value is it because the file left the setting out. */
  pvalue d;
  fputs(", \"default\": ", f);
  if (param_default(s->def, &d) == 0)
    json_value(f, &d);
  else
    fputs("null", f);
  fprintf(f, ", \"defaulted\": %s}", s->defaulted ? "true" : "false");
}

/* The object starts where the caller left the cursor; its members are
 * indented by indent + 2 and its closing brace by indent (no newline after
 * it), so it can be nested in a larger document. */
void experiment_write_json(const experiment *e, FILE *f, int indent) {
  int in = indent + 2;
  fprintf(f, "{\n%*s\"name\": ", in, "");
  json_string(f, e->name);
  fprintf(f, ",\n%*s\"kind\": ", in, "");
  json_string(f, e->kind->name);
  fprintf(f, ",\n%*s\"file\": ", in, "");
  json_string(f, e->path);
  fprintf(f, ",\n%*s\"jobs\": %zu,\n%*s\"sweep_order\": [", in, "",
          experiment_njobs(e), in, "");
  for (int s = 0; s < e->nsweep; s++) {
    if (s) fputs(", ", f);
    json_string(f, e->settings[e->sweep_order[s]].def->name);
  }
  fprintf(f, "],\n%*s\"defaulted\": [", in, "");
  int nd = 0;
  for (int i = 0; i < e->kind->nparams; i++) {
    if (!e->settings[i].defaulted) continue;
    if (nd++) fputs(", ", f);
    json_string(f, e->settings[i].def->name);
  }
  fprintf(f, "],\n%*s\"parameters\": {\n", in, "");
  for (int i = 0; i < e->kind->nparams; i++) {
    json_param(f, &e->settings[i], in + 2);
    fputs(i + 1 < e->kind->nparams ? ",\n" : "\n", f);
  }
  fprintf(f, "%*s}\n%*s}", in, "", indent, "");
}
