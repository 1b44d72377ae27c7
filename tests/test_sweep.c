/* Sweep expansion and overrides on the good experiments in
 * tests/config/good: job counts, which key varies fastest, fixed values,
 * @include, --set, --only, canonical value texts and the JSON summary;
 * every kind's settings table, filling a settings struct, blame by field,
 * and defaults (left-out settings, and how the JSON records them).
 * (Every error message is tests/bad_configs.sh's concern.)
 *
 * Reads $top_srcdir/tests/config/good (top_srcdir defaults to ".").
 * Exit: 0 all checks pass, 1 some failed, 99 test input missing. */
#include "config.h"
#include "harness/experiment.h"
#include "harness/lint.h"

#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int npassed, nfailed;
static char good_dir[4096];

static void check(int ok, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void check(int ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "ok  " : "FAIL");
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  if (ok)
    npassed++;
  else
    nfailed++;
}

static void path_of(const char *file, char *buf, size_t n) {
  snprintf(buf, n, "%s/%s", good_dir, file);
}

/* Loads a good experiment; a failure is a failed check (and NULL). */
static experiment *load(const char *file, char *const *sets, int nsets,
                        char *const *onlys, int nonlys) {
  static experiment e;
  char path[4200], err[2048];
  path_of(file, path, sizeof path);
  if (experiment_load(&e, path, sets, nsets, onlys, nonlys, err,
                      sizeof err) != 0) {
    check(0, "%s loads: %s", file, err);
    return NULL;
  }
  return &e;
}

/* Canonical text of parameter `name` in job i. */
static const char *job_text(const experiment *e, size_t i, const char *name) {
  static char buf[PVALUE_STR_MAX];
  pvalue v[64];
  job j = {.v = v};
  if (e->kind->nparams > 64) return "(too many parameters)";
  experiment_job(e, i, &j);
  int p = kind_param_index(e->kind, name);
  if (p < 0) return "(no such parameter)";
  pvalue_format(&v[p], buf, sizeof buf);
  return buf;
}

static void check_text(const experiment *e, size_t i, const char *name,
                       const char *want) {
  const char *got = job_text(e, i, name);
  check(strcmp(got, want) == 0, "%s job %zu: %s = %s (got %s)", e->name, i,
        name, want, got);
}

static void check_njobs(const experiment *e, size_t want, const char *why) {
  size_t got = experiment_njobs(e);
  check(got == want, "%s%s: %zu jobs (got %zu)", e->name, why, want, got);
}

static const setting *param(const experiment *e, const char *name) {
  int p = kind_param_index(e->kind, name);
  return p < 0 ? NULL : &e->settings[p];
}

/* Every file in good/ must load: they are the examples the checks below
 * rely on, and a broken one would hide behind a missing check. */
static int all_good_load(void) {
  char pattern[4200];
  glob_t g;
  snprintf(pattern, sizeof pattern, "%s/*.cfg", good_dir);
  if (glob(pattern, 0, NULL, &g) != 0 || g.gl_pathc < 3) {
    fprintf(stderr, "test_sweep: fewer than 3 experiments match %s\n",
            pattern);
    return -1;
  }
  for (size_t k = 0; k < g.gl_pathc; k++) {
    experiment e;
    char err[2048];
    int rc = experiment_load(&e, g.gl_pathv[k], NULL, 0, NULL, 0, err,
                             sizeof err);
    check(rc == 0, "%s loads%s%s", g.gl_pathv[k], rc ? ": " : "",
          rc ? err : "");
    if (rc == 0) experiment_free(&e);
  }
  globfree(&g);
  return 0;
}

static void order_and_fixed(void) {
  experiment *e = load("selftest_sweep.cfg", NULL, 0, NULL, 0);
  if (!e) return;
  check_njobs(e, 3 * 2 * 4, "");
  check(e->nsweep == 3 && e->sweep_order[0] == kind_param_index(e->kind, "action") &&
            e->sweep_order[2] == kind_param_index(e->kind, "value"),
        "selftest_sweep: sweep order is action, world_size, value");
  /* value (written last) varies fastest, action (first) slowest. */
  check_text(e, 0, "action", "ok");
  check_text(e, 0, "world_size", "1");
  check_text(e, 0, "value", "0.1");
  check_text(e, 1, "value", "1");
  check_text(e, 1, "world_size", "1");
  check_text(e, 3, "value", "0.0025");
  check_text(e, 4, "world_size", "2");
  check_text(e, 4, "value", "0.1");
  check_text(e, 8, "action", "fail");
  check_text(e, 8, "world_size", "1");
  check_text(e, 23, "action", "oom");
  check_text(e, 23, "world_size", "2");
  check_text(e, 23, "value", "0.0025");
  /* Fixed values are the same in every job. */
  check_text(e, 0, "timeout_s", "30");
  check_text(e, 17, "timeout_s", "30");
  check_text(e, 23, "sleep_s", "0");
  pvalue v[64];
  job j = {.v = v};
  experiment_job(e, 17, &j);
  check(j.index == 17 && j.kind == e->kind, "job 17 knows its index and kind");
  const setting *s = param(e, "value");
  check(s && s->swept && s->nvalues == 4 && s->line == 13 &&
            strstr(s->file, "selftest_sweep.cfg"),
        "value is swept with 4 values, given at selftest_sweep.cfg:13");
  experiment_free(e);
  check(e->settings == NULL && e->path == NULL,
        "experiment_free leaves an empty experiment");
}

static void include(void) {
  experiment *e = load("allreduce_include.cfg", NULL, 0, NULL, 0);
  if (!e) return;
  check_njobs(e, 2 * 2, "");
  check_text(e, 0, "warmup", "5");
  check_text(e, 3, "iters", "20");
  check_text(e, 1, "backend", "mpi");
  check_text(e, 1, "world_size", "4");
  check_text(e, 2, "backend", "nccl");
  check_text(e, 2, "world_size", "2");
  const setting *s = param(e, "warmup");
  check(s && strcmp(s->file, "shared/run.cfg") == 0 && s->line == 4,
        "warmup comes from the @include, shared/run.cfg:4 (got %s:%d)",
        s ? s->file : "?", s ? s->line : 0);
  experiment_free(e);
}

/* Writes text to dir/file; 0 on success. */
static int write_file(const char *dir, const char *file, const char *text) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int bad = fputs(text, f) < 0;
  bad |= fclose(f) != 0;
  return bad ? -1 : 0;
}

/* An absolute @include path is read as given, while a relative one in the
 * same file still resolves against the file's folder (a scratch folder,
 * not the one the test runs in), and loading leaves the working folder
 * where it was. */
static void include_absolute(void) {
  char shared[4200], abs_shared[4096], dir[4200];
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/test_sweep.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  path_of("shared/run.cfg", shared, sizeof shared);
  if (!realpath(shared, abs_shared) || !mkdtemp(dir)) {
    check(0, "absolute @include: set up a scratch folder");
    return;
  }
  char top[8400];
  snprintf(top, sizeof top,
           "name = \"include_absolute\";\n"
           "kind = \"allreduce\";\n"
           "@include \"%s\"\n"
           "@include \"local.cfg\"\n"
           "sweep = { backend = [\"mpi\"]; world_size = [2]; };\n",
           abs_shared);
  char cfg[4200], cwd_before[4096], cwd_after[4096] = "";
  snprintf(cfg, sizeof cfg, "%s/top.cfg", dir);
  if (write_file(dir, "top.cfg", top) != 0 ||
      write_file(dir, "local.cfg", "allreduce = { size_mib = 2; };\n") != 0 ||
      write_file(dir, "broken.cfg", "name = ;\n") != 0 ||
      !getcwd(cwd_before, sizeof cwd_before)) {
    check(0, "absolute @include: write the scratch experiment");
  } else {
    experiment e;
    char err[2048];
    int rc = experiment_load(&e, cfg, NULL, 0, NULL, 0, err, sizeof err);
    check(rc == 0, "an experiment with an absolute @include loads%s%s",
          rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
      check_text(&e, 0, "warmup", "5");
      check_text(&e, 0, "size_mib", "2");
      const setting *s = param(&e, "warmup");
      check(s && strcmp(s->file, abs_shared) == 0 && s->line == 4,
            "warmup comes from %s:4 (got %s:%d)", abs_shared,
            s ? s->file : "?", s ? s->line : 0);
      s = param(&e, "size_mib");
      check(s && strcmp(s->file, "local.cfg") == 0,
            "size_mib comes from local.cfg beside the experiment (got %s)",
            s ? s->file : "?");
      experiment_free(&e);
    }
    check(getcwd(cwd_after, sizeof cwd_after) &&
              strcmp(cwd_before, cwd_after) == 0,
          "loading keeps the working folder (%s, got %s)", cwd_before,
          cwd_after);
    snprintf(cfg, sizeof cfg, "%s/broken.cfg", dir);
    rc = experiment_load(&e, cfg, NULL, 0, NULL, 0, err, sizeof err);
    check(rc != 0 && strncmp(err, cfg, strlen(cfg)) == 0 &&
              strncmp(err + strlen(cfg), ":1: syntax error", 16) == 0,
          "a syntax error names the experiment file as given (%s)", err);
    check(getcwd(cwd_after, sizeof cwd_after) &&
              strcmp(cwd_before, cwd_after) == 0,
          "a failed load keeps the working folder too (got %s)", cwd_after);
  }
  static const char *const files[] = {"top.cfg", "local.cfg", "broken.cfg"};
  for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, files[k]);
    unlink(path);  /* some may not have been written */
  }
  if (rmdir(dir) != 0) check(0, "remove the scratch folder %s", dir);
}

static void set_overrides(void) {
  char *fixed[] = {"warmup=7", "run.iters=9"};
  experiment *e = load("allreduce_include.cfg", fixed, 2, NULL, 0);
  if (e) {
    check_njobs(e, 4, " with --set on fixed parameters");
    check_text(e, 0, "warmup", "7");
    check_text(e, 3, "iters", "9");
    const setting *s = param(e, "warmup");
    check(s && strcmp(s->file, "command line") == 0,
          "--set records where the value came from");
    experiment_free(e);
  }
  char *swept[] = {"world_size=8"};
  e = load("allreduce_include.cfg", swept, 1, NULL, 0);
  if (e) {
    check_njobs(e, 2, " with --set world_size=8");
    check(e->nsweep == 1 && !param(e, "world_size")->swept,
          "--set turns a swept parameter into a fixed one");
    check_text(e, 0, "world_size", "8");
    check_text(e, 1, "world_size", "8");
    check_text(e, 1, "backend", "nccl");
    experiment_free(e);
  }
  /* Hex, as the file allows it, for an integer and a float parameter. */
  char *hex[] = {"world_size=0x8", "size_mib=0X1f"};
  e = load("allreduce_include.cfg", hex, 2, NULL, 0);
  if (e) {
    check_text(e, 0, "world_size", "8");
    check_text(e, 0, "size_mib", "31");
    experiment_free(e);
  }
}

static void only_filters(void) {
  /* Listed in reverse, and 1024 spelt differently: the file's order and
   * numeric equality decide. */
  char *only[] = {"value=1.024e3,0.1"};
  experiment *e = load("selftest_sweep.cfg", NULL, 0, only, 1);
  if (e) {
    check_njobs(e, 3 * 2 * 2, " with --only value=1.024e3,0.1");
    check_text(e, 0, "value", "0.1");
    check_text(e, 1, "value", "1024");
    check_text(e, 2, "world_size", "2");
    check(param(e, "value")->swept, "--only keeps the parameter swept");
    experiment_free(e);
  }
  char *two[] = {"action=oom", "world_size=2"};
  char *set[] = {"value=3"};
  e = load("selftest_sweep.cfg", set, 1, two, 2);
  if (e) {
    check_njobs(e, 1, " with --set value=3 --only action=oom,"
                " --only world_size=2");
    check_text(e, 0, "action", "oom");
    check_text(e, 0, "world_size", "2");
    check_text(e, 0, "value", "3");
    experiment_free(e);
  }
}

/* A failed load reports one line and leaves nothing to free. */
static void failed_load(void) {
  experiment e;
  char path[4200], err[2048] = "";
  char *only[] = {"world_size=3"};
  path_of("allreduce_include.cfg", path, sizeof path);
  int rc = experiment_load(&e, path, NULL, 0, only, 1, err, sizeof err);
  check(rc == -1 && strncmp(err, "command line: --only world_size=3: ", 35) == 0 &&
            !strchr(err, '\n'),
        "--only with a value not in the list fails with one line (%s)", err);
  check(e.settings == NULL && e.path == NULL && e.name == NULL,
        "a failed load leaves an empty experiment");
}

static void format_one(ptype t, long long i, double f, const char *s,
                       const char *want) {
  pvalue v;
  char buf[PVALUE_STR_MAX];
  memset(&v, 0, sizeof v);
  v.type = t;
  v.i = i;
  v.f = f;
  snprintf(v.s, sizeof v.s, "%s", s);
  pvalue_format(&v, buf, sizeof buf);
  check(strcmp(buf, want) == 0, "pvalue_format %s -> %s (got %s)",
        ptype_name(t), want, buf);
}

static void formats(void) {
  format_one(P_INT, 42, 0, "", "42");
  format_one(P_INT, -3000000000LL, 0, "", "-3000000000");
  format_one(P_FLOAT, 0, 1.0, "", "1");
  format_one(P_FLOAT, 0, 0.1, "", "0.1");
  format_one(P_FLOAT, 0, 1024.0, "", "1024");
  format_one(P_FLOAT, 0, 300.0, "", "300");
  format_one(P_FLOAT, 0, 2.5e-3, "", "0.0025");
  format_one(P_FLOAT, 0, 1e-7, "", "1e-07");
  format_one(P_FLOAT, 0, 1.0 / 3.0, "", "0.3333333333333333");
  format_one(P_FLOAT, 0, -0.0, "", "0");
  format_one(P_STRING, 0, 0, "nccl", "nccl");
  format_one(P_BOOL, 1, 0, "", "true");
  format_one(P_BOOL, 0, 0, "", "false");
  /* Resume matches rows by these texts: parse(format(x)) must give x. */
  static const param_def d = {"g", "x", P_FLOAT, 0, -1e300, 1e300, NULL,
                              NULL, NULL, "x"};
  double xs[] = {0.1, 1.0 / 3.0, 6.02214076e23, 1e-300, 123456.789};
  int round_trips = 1;
  for (size_t k = 0; k < sizeof xs / sizeof xs[0]; k++) {
    pvalue v = {.type = P_FLOAT, .f = xs[k]}, back;
    char buf[PVALUE_STR_MAX], err[256];
    pvalue_format(&v, buf, sizeof buf);
    if (pvalue_parse(&d, buf, &back, err, sizeof err) != 0 ||
        !pvalue_equal(&v, &back))
      round_trips = 0;
  }
  check(round_trips, "float texts read back exactly");
}

static void parses(void) {
  static const param_def di = {"run", "warmup", P_INT, 0, 0, 100,
                               NULL, NULL, NULL, "x"};
  static const param_def df = {"run", "lr", P_FLOAT, 0, 0, 1,
                               NULL, NULL, NULL, "x"};
  static const char *const ch[] = {"mpi", "nccl", NULL};
  static const param_def ds = {"run", "backend", P_STRING, 0, 0, 0,
                               ch, NULL, NULL, "x"};
  static const param_def db = {"run", "flag", P_BOOL, 0, 0, 0,
                               NULL, NULL, NULL, "x"};
  pvalue v;
  char err[512];
  check(pvalue_parse(&df, "1e-3", &v, err, sizeof err) == 0 && v.f == 1e-3,
        "pvalue_parse float 1e-3");
  check(pvalue_parse(&di, "12", &v, err, sizeof err) == 0 && v.i == 12,
        "pvalue_parse integer 12");
  check(pvalue_parse(&di, "1.5", &v, err, sizeof err) != 0 &&
            strcmp(err, "warmup must be an integer, got \"1.5\" (allowed: "
                        "0 .. 100)") == 0,
        "pvalue_parse rejects 1.5 for an integer (%s)", err);
  check(pvalue_parse(&di, "101", &v, err, sizeof err) != 0 &&
            strcmp(err, "warmup = 101 is out of range (allowed: 0 .. 100)") == 0,
        "pvalue_parse range-checks (%s)", err);
  check(pvalue_parse(&df, "nan", &v, err, sizeof err) != 0,
        "pvalue_parse rejects nan for a float");
  check(pvalue_parse(&ds, "gloo", &v, err, sizeof err) != 0 &&
            strcmp(err, "backend = \"gloo\" is not allowed (allowed: mpi, "
                        "nccl)") == 0,
        "pvalue_parse checks choices (%s)", err);
  check(pvalue_parse(&db, "true", &v, err, sizeof err) == 0 && v.i == 1,
        "pvalue_parse bool true");
  /* Numbers follow the experiment file's rules. */
  check(pvalue_parse(&di, "010", &v, err, sizeof err) != 0 &&
            strcmp(err, "010 has a leading zero (write 10; leading zeros "
                        "read as octal in newer libconfig)") == 0,
        "pvalue_parse rejects a leading zero (%s)", err);
  check(pvalue_parse(&df, "-00.5", &v, err, sizeof err) != 0 &&
            strncmp(err, "-00.5 has a leading zero (write -0.5;", 37) == 0,
        "pvalue_parse rejects a float's leading zero (%s)", err);
  check(pvalue_parse(&di, "0", &v, err, sizeof err) == 0 && v.i == 0,
        "pvalue_parse integer 0");
  check(pvalue_parse(&df, "0.05", &v, err, sizeof err) == 0 && v.f == 0.05,
        "pvalue_parse float 0.05");
  check(pvalue_parse(&df, "1e-05", &v, err, sizeof err) == 0 && v.f == 1e-5,
        "pvalue_parse float 1e-05 (a zero in the exponent)");
  check(pvalue_parse(&di, "0x1F", &v, err, sizeof err) == 0 && v.i == 31,
        "pvalue_parse hex 0x1F (%s)", err);
  check(pvalue_parse(&df, "0x1", &v, err, sizeof err) == 0 && v.f == 1.0,
        "pvalue_parse hex 0x1 for a float");
  check(pvalue_parse(&di, "0x65", &v, err, sizeof err) != 0 &&
            strcmp(err, "warmup = 101 is out of range (allowed: 0 .. 100)") == 0,
        "pvalue_parse range-checks hex (%s)", err);
  static const char *const not_hex[] = {"0x", "-0x10", "0x1p3", "0x1.8",
                                        "0xg"};
  for (size_t k = 0; k < sizeof not_hex / sizeof not_hex[0]; k++)
    check(pvalue_parse(&df, not_hex[k], &v, err, sizeof err) != 0 &&
              pvalue_parse(&di, not_hex[k], &v, err, sizeof err) != 0,
          "pvalue_parse rejects %s (libconfig has no such number)",
          not_hex[k]);
}

static void json(void) {
  experiment *e = load("selftest_sweep.cfg", NULL, 0, NULL, 0);
  if (!e) return;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) {
    check(0, "open_memstream");
    experiment_free(e);
    return;
  }
  experiment_write_json(e, f, 0);
  fclose(f);
  check(len > 0 && buf[0] == '{' && buf[len - 1] == '}',
        "experiment_write_json writes one object (%zu bytes)", len);
  check(buf && strstr(buf, "\"sweep_order\": [\"action\", \"world_size\", "
                           "\"value\"]") != NULL,
        "the JSON lists the sweep order");
  check(buf && strstr(buf, "\"value\": {\"group\": \"selftest\", \"type\": "
                           "\"float\"") != NULL &&
            strstr(buf, "\"sweep\": [0.1, 1, 1024, 0.0025]") != NULL,
        "the JSON gives each parameter's values");
  free(buf);
  experiment_free(e);
}

/* Every kind's table keeps its invariants: the common rows first, int
 * ranges that fit their fields, defaults that parse and are in range,
 * one field per row. */
static void kind_tables(void) {
  for (const kind_def *const *k = kind_all(); *k; k++) {
    char err[512] = "";
    check(kind_table_check(*k, err, sizeof err) == 0, "kind %s's table is "
          "sound%s%s", (*k)->name, err[0] ? ": " : "", err);
  }
}

/* A settings struct and its table of the four types, as a kind declares
 * them: settings_fill writes each value at its field, and BLAME(member)
 * names that member's row. */
typedef struct probe_settings {
  run_settings run;
  const char *name;
  bool flag;
  double ratio;
  int count;
} probe_settings;

static void fill_and_blame(void) {
  static const param_def rows[] = {
      COMMON_PARAMS(probe_settings),
      {"probe", "count", INT_FIELD(probe_settings, count), 0, 10, NULL, NULL,
       "3", "a count"},
      {"probe", "name", STRING_FIELD(probe_settings, name), 0, 0, NULL, NULL,
       NULL, "a name"},
      {"probe", "ratio", FLOAT_FIELD(probe_settings, ratio), 0, 1, NULL, NULL,
       "0.25", "a ratio"},
      {"probe", "flag", BOOL_FIELD(probe_settings, flag), 0, 0, NULL, NULL,
       "true", "a flag"},
  };
  static const char *const none[] = {NULL};
  const kind_def k = {.name = "probe", .params = rows, .nparams = 6,
                      .settings_size = sizeof(probe_settings),
                      .metrics = none};
  char err[512] = "";
  check(kind_table_check(&k, err, sizeof err) == 0, "the probe table is "
        "sound%s%s", err[0] ? ": " : "", err);
  pvalue v[6];
  int defaults = 0;
  for (int i = 0; i < 6; i++)
    if (i != 3) defaults += param_default(&rows[i], &v[i]) == 0;
  check(defaults == 5 && param_default(&rows[3], &v[3]) == -1,
        "every row but name has a default");
  snprintf(v[3].s, sizeof v[3].s, "abc");
  v[3].type = P_STRING;
  probe_settings s;
  memset(&s, 0xff, sizeof s);
  job j = {.kind = &k, .v = v};
  job_settings(&j, &s);
  check(s.run.world_size == 1 && s.run.timeout_s == 600 && s.count == 3 &&
            s.name == v[3].s && s.ratio == 0.25 && s.flag == true,
        "settings_fill writes every field (world_size %d, timeout_s %g, "
        "count %d, ratio %g, flag %d)", s.run.world_size, s.run.timeout_s,
        s.count, s.ratio, (int)s.flag);
  check(job_world_size(&j) == 1 && job_timeout_s(&j) == 600,
        "the runner reads the common settings");
  check(kind_blamed_param(&k, BLAME(probe_settings, ratio)) == 4 &&
            kind_blamed_param(&k, BLAME(probe_settings, run.world_size)) == 0 &&
            kind_blamed_param(&k, BLAME(probe_settings, flag)) == 5 &&
            kind_blamed_param(&k, 0) == -1,
        "BLAME(member) names the member's row");
  /* A table whose row fills another row's field is refused. */
  param_def twice[6];
  memcpy(twice, rows, sizeof rows);
  twice[5].field = twice[4].field;
  const kind_def bad = {.name = "probe", .params = twice, .nparams = 6,
                        .settings_size = sizeof(probe_settings),
                        .metrics = none};
  check(kind_table_check(&bad, err, sizeof err) != 0 &&
            strstr(err, "ratio and flag fill the same field"),
        "a table with two rows on one field is refused (%s)", err);
}

/* Settings left out take their kind's defaults, recorded as defaulted in
 * the JSON; a --set on one makes it given, as it gives one without a
 * default. */
static void defaults(void) {
  experiment *e = load("selftest_defaults.cfg", NULL, 0, NULL, 0);
  if (!e) return;
  check_njobs(e, 2, "");
  check_text(e, 0, "world_size", "1");
  check_text(e, 1, "timeout_s", "600");
  check_text(e, 1, "sleep_s", "0");
  check_text(e, 0, "value", "0");
  check_text(e, 1, "action", "fail");
  const setting *s = param(e, "sleep_s");
  check(s && s->defaulted && !s->swept && s->line == 4 &&
            strstr(s->file, "selftest_defaults.cfg"),
        "sleep_s is defaulted, at the kind line selftest_defaults.cfg:4");
  check(!param(e, "action")->defaulted && param(e, "timeout_s")->defaulted,
        "given settings are not defaulted, left-out ones are");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f) {
    experiment_write_json(e, f, 0);
    fclose(f);
  }
  check(buf && strstr(buf, "\"defaulted\": [\"world_size\", \"timeout_s\", "
                           "\"sleep_s\", \"value\"]"),
        "the JSON lists the defaulted settings");
  check(buf && strstr(buf, "\"sleep_s\": {\"group\": \"selftest\", \"type\": "
                           "\"float\", \"unit\": \"s\"") &&
            strstr(buf, "\"value\": 0, \"default\": 0, \"defaulted\": true}"),
        "the JSON gives a defaulted setting's unit, value and default");
  check(buf && strstr(buf, "\"sweep\": [\"ok\", \"fail\"], \"default\": null, "
                           "\"defaulted\": false}"),
        "the JSON marks a given setting without a default");
  free(buf);
  experiment_free(e);

  char *set[] = {"sleep_s=2"};
  e = load("selftest_defaults.cfg", set, 1, NULL, 0);
  if (e) {
    check_text(e, 0, "sleep_s", "2");
    check(!param(e, "sleep_s")->defaulted, "--set on a defaulted setting "
          "makes it given");
    experiment_free(e);
  }

  /* --set gives a setting the file leaves out, one without a default
   * too: the bad golden 08's experiment lacks only size_mib. */
  char *size[] = {"allreduce.size_mib=4"};
  e = load("../bad/08-missing-param.cfg", size, 1, NULL, 0);
  if (e) {
    check_njobs(e, 1, " with --set size_mib on 08-missing-param.cfg");
    check_text(e, 0, "size_mib", "4");
    const setting *m = param(e, "size_mib");
    check(m && !m->defaulted && strcmp(m->file, "command line") == 0,
          "a setting only --set gives comes from the command line (got %s)",
          m ? m->file : "?");
    experiment_free(e);
  }

  /* A real kind with every defaulted setting left out: it loads, and its
   * validate passes on the defaults. */
  e = load("lm_defaults.cfg", NULL, 0, NULL, 0);
  if (!e) return;
  check_text(e, 0, "precision", "fp32");
  check_text(e, 0, "fusion", "opbyop");
  check_text(e, 0, "attention", "materialized");
  check_text(e, 0, "cuda_graphs", "false");
  check_text(e, 0, "warmup", "5");
  check_text(e, 0, "steps", "10");
  check_text(e, 0, "seed", "336");
  check_text(e, 0, "vocab", "10000");
  check_text(e, 0, "norm", "rmsnorm");
  check_text(e, 0, "optimizer", "after_backward");
  check_text(e, 0, "weight_grads", "fp32");
  check_text(e, 0, "adamw_overlap", "true");
  check_text(e, 0, "keep_norms", "false");
  experiment_free(e);
}

static void names(void) {
  static const char *const run[] = {"world_size", "timeout_s", "warmup",
                                    "iters"};
  check(lint_edit_distance("warmpu", "warmup") == 1,
        "a transposition is one edit");
  check(lint_nearest("warmpu", run, 4) == 2, "warmpu suggests warmup");
  check(lint_nearest("x", run, 4) == -1, "x suggests nothing");
}

int main(void) {
  const char *top = getenv("top_srcdir");
  snprintf(good_dir, sizeof good_dir, "%s/tests/config/good",
           top && *top ? top : ".");
  static const char *const needed[] = {"selftest_sweep.cfg",
                                       "allreduce_include.cfg",
                                       "shared/run.cfg",
                                       "selftest_defaults.cfg",
                                       "lm_defaults.cfg"};
  for (size_t k = 0; k < sizeof needed / sizeof needed[0]; k++) {
    char path[4200];
    path_of(needed[k], path, sizeof path);
    if (access(path, R_OK) != 0) {
      fprintf(stderr, "test_sweep: cannot read %s\n", path);
      return 99;
    }
  }
  if (all_good_load() != 0) return 99;
  order_and_fixed();
  include();
  include_absolute();
  set_overrides();
  only_filters();
  failed_load();
  formats();
  parses();
  json();
  kind_tables();
  fill_and_blame();
  defaults();
  names();
  printf("%d passed, %d failed\n", npassed, nfailed);
  return nfailed ? 1 : 0;
}
