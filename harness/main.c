/* runner: read an experiment, expand its sweep into jobs, run each job under
 * the launcher (mpirun by default) and append one CSV row per job.
 *
 *   runner [options] EXPERIMENT.cfg
 *
 * Flow: validate everything (exit 2 on any mistake, before any job) ->
 * open the CSV and find the jobs already measured -> for each remaining job:
 * skip it with a row if this machine cannot run it, else launch, wait with
 * a timeout, turn the outcome into a row. Exit 1 if any job failed.
 *
 * main: parse_options -> plan_load (the experiment, its jobs, the output's
 * paths) -> dry_run or run, then plan_free. Both runs describe job i with
 * job_command_make, so --dry-run prints exactly the command a run starts. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/check.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/json.h"
#include "harness/csv.h"
#include "harness/experiment.h"
#include "harness/launch.h"
#include "harness/outlock.h"
#include "harness/resultfile.h"
#include "harness/rows.h"
#include "harness/slurm.h"

#define MAX_ARGS 256

typedef struct options {
  int dry_run, force, wait, gpus; /* gpus: -1 = detect */
  /* without --gpus, inside a SLURM allocation: slurm_gpus's answer (then
   * gpus is the allocation's when >= 0) and what it says of it */
  int slurm;
  char slurm_how[256];
  const char *out_dir, *launcher;
  char *sets[MAX_ARGS], *onlys[MAX_ARGS];
  int nsets, nonlys;
  const char *path;
} options;

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static void usage(FILE *f) {
  fprintf(f,
"usage: runner [options] EXPERIMENT.cfg\n"
"Run every job of an experiment's sweep and append a CSV row per job.\n"
"\n"
"  -n, --dry-run          print the job count, each job and its launch\n"
"                         command; run nothing, write nothing\n"
"  -s, --set NAME=VALUE   give a setting, in the file or not (NAME: leaf\n"
"                         or group.name); on a swept one, fixes it\n"
"  -o, --only NAME=V1,V2  run only these values of a swept setting\n"
"  -f, --force            rerun jobs that already have an ok row\n"
"  -w, --wait             if another runner is writing this experiment's\n"
"                         output, wait for it instead of stopping\n"
"  -d, --out-dir DIR      where NAME.csv, NAME.json and logs/ go\n"
"                         (default: reports/data)\n"
"  -l, --launcher CMD     launcher command, {np} = world size (default:\n"
"                         $TRAINLAB_LAUNCHER, else \"%s\");\n"
"                         \"\" runs the worker directly (world size 1)\n"
"  -g, --gpus N           GPUs available to jobs (default: inside a SLURM\n"
"                         allocation its GPUs, else those of this machine)\n"
"  -k, --kinds [KIND...]  list the job kinds (or those named) and their\n"
"                         settings\n"
"  -p, --provenance       print the provenance columns a row ends with\n"
"                         (utc, machine, versions, git commit and dirty\n"
"                         flag), a CSV header and one line, for records\n"
"                         made outside a sweep; run nothing\n"
"  -h, --help             this help\n"
"  -V, --version          the version\n"
"\n"
"Exit status: 0 every job ok or skipped, 1 some job failed, 2 bad input\n"
"or the output is in use by another runner, 3 stopped because results\n"
"cannot be written (disk full, read-only), 130 interrupted (in both, rows\n"
"written so far are kept; rerun to resume).\n",
          TL_DEFAULT_LAUNCHER);
}

/* The kinds named (every kind when none is), each with its settings; an
 * unknown name is a usage error before anything is printed. */
static void list_kinds(char *const *names, int n) {
  for (int a = 0; a < n; a++) {
    if (kind_find(names[a])) continue;
    char msg[2048];
    experiment_unknown_kind(names[a], msg, sizeof msg);
    fprintf(stderr, "runner: --kinds: %s\n", msg);
    exit(2);
  }
  for (const kind_def *const *k = kind_all(); *k; k++) {
    int shown = n == 0;
    for (int a = 0; a < n && !shown; a++) shown = kind_find(names[a]) == *k;
    if (!shown) continue;
    printf("%s: %s\n", (*k)->name, (*k)->summary);
    for (int i = 0; i < (*k)->nparams; i++) {
      const param_def *d = &(*k)->params[i];
      char allowed[512], unit[64] = "", def[PVALUE_STR_MAX + 32] = "";
      param_allowed(d, allowed, sizeof allowed);
      if (d->unit) snprintf(unit, sizeof unit, "; unit %s", d->unit);
      if (d->def) snprintf(def, sizeof def, "; default %s", d->def);
      printf("  %s.%s (%s; %s%s%s): %s\n", d->group, d->name,
             ptype_name(d->type), allowed, unit, def, d->help);
    }
    printf("  metrics:");
    for (int i = 0; (*k)->metrics[i]; i++) printf(" %s", (*k)->metrics[i]);
    printf("\n");
  }
}

static int print_provenance(void);

static void parse_options(int argc, char **argv, options *o) {
  static const struct option longopts[] = {
      {"dry-run", no_argument, 0, 'n'},   {"set", required_argument, 0, 's'},
      {"only", required_argument, 0, 'o'}, {"force", no_argument, 0, 'f'},
      {"wait", no_argument, 0, 'w'},
      {"out-dir", required_argument, 0, 'd'},
      {"launcher", required_argument, 0, 'l'},
      {"gpus", required_argument, 0, 'g'}, {"kinds", no_argument, 0, 'k'},
      {"provenance", no_argument, 0, 'p'},
      {"help", no_argument, 0, 'h'},      {"version", no_argument, 0, 'V'},
      {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->gpus = -1;
  o->out_dir = "reports/data";
  o->launcher = getenv("TRAINLAB_LAUNCHER");
  if (!o->launcher) o->launcher = TL_DEFAULT_LAUNCHER;
  int c, kinds = 0, provenance = 0;
  while ((c = getopt_long(argc, argv, "ns:o:fwd:l:g:kphV", longopts, NULL)) != -1) {
    switch (c) {
      case 'n': o->dry_run = 1; break;
      case 'f': o->force = 1; break;
      case 'w': o->wait = 1; break;
      case 'd':
        if (!*optarg) {
          fprintf(stderr, "runner: --out-dir \"\": no folder given (allowed: "
                  "a folder path; \".\" for the current folder)\n");
          exit(2);
        }
        o->out_dir = optarg;
        break;
      case 'l': o->launcher = optarg; break;
      case 's':
        if (o->nsets == MAX_ARGS) { fprintf(stderr, "runner: too many --set\n"); exit(2); }
        o->sets[o->nsets++] = optarg;
        break;
      case 'o':
        if (o->nonlys == MAX_ARGS) { fprintf(stderr, "runner: too many --only\n"); exit(2); }
        o->onlys[o->nonlys++] = optarg;
        break;
      case 'g': {
        char *end;
        long g = strtol(optarg, &end, 10);
        if (*end || g < 0 || g > 1 << 20) {
          fprintf(stderr, "runner: --gpus %s: not a GPU count (allowed: 0 or more)\n", optarg);
          exit(2);
        }
        o->gpus = (int)g;
        break;
      }
      case 'k': kinds = 1; break;
      case 'p': provenance = 1; break;
      case 'h': usage(stdout); exit(0);
      case 'V': printf("runner (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); exit(0);
      default: usage(stderr); exit(2);
    }
  }
  if (kinds) {
    list_kinds(argv + optind, argc - optind);
    exit(0);
  }
  if (provenance) {
    if (optind != argc) {
      fprintf(stderr, "runner: --provenance takes no experiment file\n");
      exit(2);
    }
    exit(print_provenance());
  }
  o->slurm = -1;
  if (o->gpus < 0) {
    o->slurm = slurm_gpus(o->slurm_how, sizeof o->slurm_how);
    if (o->slurm >= 0) o->gpus = o->slurm;
  }
  if (optind != argc - 1) {
    fprintf(stderr, "runner: %s\n", optind >= argc ? "no experiment file given"
                                                     : "give exactly one experiment file");
    usage(stderr);
    exit(2);
  }
  o->path = argv[optind];
}

/* The worker sits next to the runner in a build tree, else where `make
 * install` put it. */
static void find_worker(char *buf, size_t n) {
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len > 0) {
    self[len] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      snprintf(buf, n, "%s/worker", self);
      if (access(buf, X_OK) == 0) return;
    }
  }
  snprintf(buf, n, "%s/worker", PKGLIBEXECDIR);
}

/* Commit and dirty flag of the source tree this runner was built from;
 * result files under reports/data do not make it dirty. */
static void git_info(char *commit, size_t n, char *dirty, size_t dn) {
  snprintf(commit, n, "unknown");
  snprintf(dirty, dn, "unknown");
  /* A copy of the tree without .git (a tarball, a copy sent to a GPU
   * machine) can be told where it came from. */
  const char *env_commit = getenv("TRAINLAB_GIT_COMMIT");
  if (env_commit && *env_commit) {
    const char *env_dirty = getenv("TRAINLAB_GIT_DIRTY");
    snprintf(commit, n, "%s", env_commit);
    snprintf(dirty, dn, "%s", env_dirty && *env_dirty ? env_dirty : "unknown");
    return;
  }
  char cmd[PATH_MAX + 128];
  snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse HEAD 2>/dev/null", TL_SRCDIR);
  FILE *p = popen(cmd, "r");
  if (!p) return;
  char line[128] = "";
  int ok = fgets(line, sizeof line, p) != NULL;
  if (pclose(p) != 0 || !ok) return;
  line[strcspn(line, "\n")] = '\0';
  snprintf(commit, n, "%s", line);
  snprintf(cmd, sizeof cmd,
           "git -C '%s' status --porcelain --untracked-files=no -- . "
           "':!reports/data' 2>/dev/null", TL_SRCDIR);
  p = popen(cmd, "r");
  if (!p) return;
  int changed = fgets(line, sizeof line, p) != NULL;
  if (pclose(p) == 0) snprintf(dirty, dn, "%d", changed);
}

static void utc_now(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void fmt_duration(double s, char *buf, size_t n) {
  long t = (long)(s + 0.5);
  if (t >= 3600) snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
}

/* "backend=mpi size_mib=10": the swept values, which tell jobs apart. */
static void job_label(const experiment *e, const job *j, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (int s = 0; s < e->nsweep && len < n; s++) {
    int i = e->sweep_order[s];
    char v[PVALUE_STR_MAX + 32];
    pvalue_format(&j->v[i], v, sizeof v);
    len += (size_t)snprintf(buf + len, n - len, "%s%s=%s", s ? " " : "",
                            e->kind->params[i].name, v);
  }
  if (e->nsweep == 0) snprintf(buf, n, "(no sweep)");
}

/* Why this machine cannot run j, or NULL if it can. */
static const char *cannot_run(const job *j, int gpus, const char *where,
                              char *buf, size_t n) {
  long long ws = job_world_size(j);
  int per_rank = job_gpus_per_rank(j);
#ifndef HAVE_MPI
  if (ws > 1) {
    snprintf(buf, n, "this build has no MPI, so only world_size 1 runs");
    return buf;
  }
#endif
  if (per_rank > 0) {
#ifndef HAVE_CUDA
    snprintf(buf, n, "needs GPUs but this build has no CUDA");
    return buf;
#endif
    if (per_rank * ws > gpus) {
      snprintf(buf, n, "needs %lld GPU%s, %s has %d", per_rank * ws,
               per_rank * ws == 1 ? "" : "s", where, gpus);
      return buf;
    }
  }
  return NULL;
}

/* What the GPU count counts, for a skipped job's message. */
static const char *gpus_where(const options *o) {
  return o->slurm >= 0 ? "the SLURM allocation" : "this machine";
}

static int letters(const char *s) {
  int n = 0;
  for (; *s; s++) n += (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z');
  return n;
}

/* How telling a log line is about why a job failed: 4 the worker's own
 * error ("worker: ...", "worker rank 1: ..."), 3 the launcher's reason
 * ("mpirun noticed that process rank 0 ... exited on signal 11",
 * "mpirun has detected an attempt to run as root."), 2 another line naming
 * a signal (a crash handler's report), 1 any other line with words in it,
 * 0 noise (blank, a banner of dashes). The first line of the highest score
 * wins: what follows a cause is mostly its consequences ("Exit code: 1",
 * ORTE_ERROR_LOG, the launcher's closing advice). */
static int cause_score(const char *line) {
  while (*line == ' ' || *line == '\t') line++;
  if (strncmp(line, "worker", 6) == 0 && (line[6] == ':' || line[6] == ' '))
    return 4;
  static const char *const launchers[] = {"mpirun ", "mpiexec ", "prterun ",
                                          "orterun ", "srun: ", "runner: ",
                                          NULL};
  for (int i = 0; launchers[i]; i++)
    if (strncmp(line, launchers[i], strlen(launchers[i])) == 0) return 3;
  if (strstr(line, "signal")) return 2;
  return letters(line) >= 3;
}

/* The line of the job's log (from offset on) that best names the cause of
 * a failure that left no result file. */
static void log_cause(const char *log_path, long from, char *buf, size_t n) {
  buf[0] = '\0';
  FILE *f = fopen(log_path, "r");
  if (!f) return;
  int best = 0;
  if (fseek(f, from, SEEK_SET) == 0) {
    char line[1024];
    while (fgets(line, sizeof line, f)) {
      line[strcspn(line, "\r\n")] = '\0';
      int score = cause_score(line);
      if (score > best) {
        snprintf(buf, n, "%s", line);
        best = score;
      }
    }
  }
  fclose(f);
}

typedef struct outcome {
  char status[16];
  char message[1024];
  resultfile rf;          /* rank 0's result when ok */
} outcome;

/* Turn what the launcher did and the result files into a status. */
static void judge(const launch_outcome *lo, const char *result_path,
                  int world_size, const char *log_path, long log_from,
                  double timeout_s, outcome *o) {
  memset(o, 0, sizeof *o);
  char raw[1024];
  if (resultfile_read(result_path, &o->rf) == 0 && lo->exit_code == 0 &&
      lo->signo == 0 && !lo->timed_out) {
    const char *st = resultfile_get(&o->rf, "status");
    snprintf(o->status, sizeof o->status, "%s", st ? st : "error");
    const char *msg = resultfile_get(&o->rf, "message");
    snprintf(o->message, sizeof o->message, "%s", msg ? msg : "");
    unlink(result_path);
    return;
  }
  unlink(result_path);
  /* A failing rank left its own file: prefer an oom if any rank had one. */
  for (int r = 0; r < world_size; r++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s.rank%d", result_path, r);
    resultfile rf;
    if (resultfile_read(path, &rf) != 0) continue;
    const char *st = resultfile_get(&rf, "status");
    const char *msg = resultfile_get(&rf, "message");
    if (o->status[0] == '\0' || (st && strcmp(st, "oom") == 0)) {
      snprintf(o->status, sizeof o->status, "%s", st ? st : "error");
      snprintf(o->message, sizeof o->message, "rank %d: %s", r, msg ? msg : "");
    }
    resultfile_free(&rf);
    unlink(path);
  }
  if (lo->timed_out) {
    snprintf(o->status, sizeof o->status, "timeout");
    snprintf(o->message, sizeof o->message,
             "killed after the %g s limit (run.timeout_s)", timeout_s);
    return;
  }
  if (o->status[0]) return;
  snprintf(o->status, sizeof o->status, "error");
  log_cause(log_path, log_from, raw, sizeof raw);
  if (lo->signo)
    snprintf(o->message, sizeof o->message, "launcher killed by signal %d (%s)%s%s",
             lo->signo, strsignal(lo->signo), raw[0] ? ": " : "", raw);
  else
    snprintf(o->message, sizeof o->message, "exit status %d without a result%s%s",
             lo->exit_code, raw[0] ? ": " : "", raw);
}

/* CSV cells stay plain for gnuplot 5.4, which splits on every comma. */
static void plain_cell(char *dst, size_t n, const char *s) {
  text_one_line(dst, n, s);
  for (char *p = dst; *p; p++) {
    if (*p == ',') *p = ';';
    if (*p == '"') *p = '\'';
  }
}

/* The provenance cells that end a row (rows_provenance_column's),
 * strdup'd into cells; returns their count, ROWS_NPROVENANCE. The
 * worker's own view of the machine (rf: what the job actually loaded)
 * wins over env's. */
static int provenance_cells(char **cells, const resultfile *rf,
                            const env_info *env, const char *commit,
                            const char *dirty) {
  char buf[2048];
  int c = 0;
  utc_now(buf, sizeof buf);
  cells[c++] = strdup(buf);
  for (int i = 0; i < ENV_NCOLS; i++) {
    char key[128], num[32];
    snprintf(key, sizeof key, "env.%s", env_columns[i]);
    const char *v = rf ? resultfile_get(rf, key) : NULL;
    plain_cell(buf, sizeof buf, v ? v : env_value(env, i, num, sizeof num));
    cells[c++] = strdup(buf);
  }
  cells[c++] = strdup(commit);
  cells[c++] = strdup(dirty);
  cells[c++] = strdup(PACKAGE_VERSION);
  return c;
}

static int write_row(rows *rw, const job *j, const char *status,
                     const char *message, const resultfile *rf,
                     const env_info *env, const char *commit,
                     const char *dirty) {
  char **cells = calloc((size_t)rw->ncols, sizeof *cells);
  CHECK_ALLOC(cells, (size_t)rw->ncols * sizeof *cells);
  const kind_def *k = j->kind;
  int c = 0;
  char buf[2048];
  for (int i = 0; i < k->nparams; i++) {
    pvalue_format(&j->v[i], buf, sizeof buf);
    cells[c++] = strdup(buf);
  }
  for (int i = 0; k->metrics[i]; i++) {
    char key[128];
    snprintf(key, sizeof key, "metric.%s", k->metrics[i]);
    const char *v = rf ? resultfile_get(rf, key) : NULL;
    cells[c++] = strdup(v ? v : "");
  }
  cells[c++] = strdup(status);
  plain_cell(buf, sizeof buf, message);
  cells[c++] = strdup(buf);
  c += provenance_cells(cells + c, rf, env, commit, dirty);
  int rc = 0;
  for (int i = 0; i < c; i++)
    if (!cells[i]) rc = err_set(ERR_OOM, __FILE__, __LINE__, "out of memory");
  if (rc == 0) rc = rows_append(rw, (const char *const *)cells);
  for (int i = 0; i < c; i++) free(cells[i]);
  free(cells);
  if (rc < 0) err_trace(__FILE__, __LINE__);
  return rc;
}

/* --provenance: the header of the provenance columns and this machine's
 * and build's values, as a sweep's rows would end; 0, or 1 if a value
 * could not be made. */
static int print_provenance(void) {
  char worker[PATH_MAX], commit[128], dirty[16];
  char *cells[ROWS_NPROVENANCE];
  env_info env;
  find_worker(worker, sizeof worker);
  (void)env_probe_worker(worker, &env); /* on failure: the host's, a warning */
  git_info(commit, sizeof commit, dirty, sizeof dirty);
  int n = provenance_cells(cells, NULL, &env, commit, dirty), rc = 0;
  for (int i = 0; i < n; i++) printf("%s%s", i ? "," : "", rows_provenance_column(i));
  printf("\n");
  for (int i = 0; i < n; i++) {
    if (!cells[i]) rc = 1;
    printf("%s%s", i ? "," : "", cells[i] ? cells[i] : "");
    free(cells[i]);
  }
  printf("\n");
  if (rc) fprintf(stderr, "runner: --provenance: out of memory\n");
  return rc;
}

/* NAME.samples.jsonl: one JSON object per job that recorded samples (its
 * settings, when, and each sample list). A rerun appends a newer line; the
 * latest utc is the one that matches the CSV row. */
static int write_samples(const char *path, const job *j, const resultfile *rf) {
  int any = 0;
  for (int i = 0; i < rf->n; i++) any |= strncmp(rf->key[i], "sample.", 7) == 0;
  if (!any) return 0;
  FILE *f = fopen(path, "a");
  CHECK_SYS(f != NULL, "cannot append to %s", path);
  char buf[PVALUE_STR_MAX + 32], now[64];
  utc_now(now, sizeof now);
  fprintf(f, "{\"utc\": ");
  json_string(f, now);
  fprintf(f, ", \"job\": {");
  for (int i = 0; i < j->kind->nparams; i++) {
    pvalue_format(&j->v[i], buf, sizeof buf);
    fprintf(f, "%s", i ? ", " : "");
    json_string(f, j->kind->params[i].name);
    fprintf(f, ": ");
    json_string(f, buf);
  }
  fprintf(f, "}, \"samples\": {");
  int first = 1;
  for (int i = 0; i < rf->n; i++) {
    if (strncmp(rf->key[i], "sample.", 7) != 0) continue;
    fprintf(f, "%s", first ? "" : ", ");
    first = 0;
    json_string(f, rf->key[i] + 7);
    fprintf(f, ": [");
    /* The values are numbers written by %g: copy them, comma-separated. */
    int k = 0;
    for (const char *p = rf->value[i]; *p;) {
      size_t len = strcspn(p, " ");
      if (len) fprintf(f, "%s%.*s", k++ ? ", " : "", (int)len, p);
      p += len + (p[len] == ' ');
    }
    fprintf(f, "]");
  }
  fprintf(f, "}}\n");
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  CHECK_SYS(!bad, "cannot append to %s", path);
  return 0;
}

static int mkdir_p(const char *dir) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    CHECK_SYS(mkdir(tmp, 0755) == 0 || errno == EEXIST, "cannot create %s", tmp);
    *p = '/';
  }
  CHECK_SYS(mkdir(tmp, 0755) == 0 || errno == EEXIST, "cannot create %s", tmp);
  return 0;
}

/* NAME.json beside the CSV: the resolved experiment and this run's setup. */
static int write_sidecar(const char *path, const experiment *e,
                         const options *o, const char *worker,
                         const env_info *env, const char *commit,
                         const char *dirty) {
  char tmp[PATH_MAX + 16];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  CHECK_SYS(f != NULL, "cannot write %s", tmp);
  char now[64], num[32];
  utc_now(now, sizeof now);
  fprintf(f, "{\n  \"experiment\": ");
  experiment_write_json(e, f, 2);
  fprintf(f, ",\n  \"run\": {\n    \"started_utc\": ");
  json_string(f, now);
  fprintf(f, ",\n    \"launcher\": ");
  json_string(f, o->launcher);
  fprintf(f, ",\n    \"worker\": ");
  json_string(f, worker);
  fprintf(f, ",\n    \"force\": %s,\n    \"overrides\": [", o->force ? "true" : "false");
  for (int i = 0; i < o->nsets + o->nonlys; i++) {
    char arg[1024];
    snprintf(arg, sizeof arg, "%s %s", i < o->nsets ? "--set" : "--only",
             i < o->nsets ? o->sets[i] : o->onlys[i - o->nsets]);
    fprintf(f, "%s", i ? ", " : "");
    json_string(f, arg);
  }
  fprintf(f, "],\n    \"git_commit\": ");
  json_string(f, commit);
  fprintf(f, ",\n    \"git_dirty\": ");
  json_string(f, dirty);
  fprintf(f, ",\n    \"runner_version\": ");
  json_string(f, PACKAGE_VERSION);
  fprintf(f, "\n  },\n  \"environment\": {");
  for (int i = 0; i < ENV_NCOLS; i++) {
    fprintf(f, "%s\n    ", i ? "," : "");
    json_string(f, env_columns[i]);
    fprintf(f, ": ");
    json_string(f, env_value(env, i, num, sizeof num));
  }
  fprintf(f, "\n  }\n}\n");
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);   /* no temporary file outlives a failed write */
    errno = e;
    CHECK_SYS(0, "cannot write %s", path);
  }
  return 0;
}

/* Remove the result files (and their .rankR / .tmpPID companions) that an
 * earlier run of experiment name left in log_dir: the caller holds the
 * output's lock, so no live run owns them. Returns how many. */
static int remove_stale_results(const char *log_dir, const char *name) {
  DIR *d = opendir(log_dir);
  if (!d) return 0;
  size_t nlen = strlen(name);
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *p = de->d_name;
    if (strncmp(p, name, nlen) != 0 || strncmp(p + nlen, ".job", 4) != 0) continue;
    p += nlen + 4;
    if (!(*p >= '0' && *p <= '9')) continue;
    while (*p >= '0' && *p <= '9') p++;
    if (strncmp(p, ".result", 7) != 0 && !(*p == '.' && strstr(p, ".result")))
      continue;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", log_dir, de->d_name);
    n += unlink(path) == 0;
  }
  closedir(d);
  return n;
}

/* Room a job needs in the output's file system: its log lines, result
 * file (samples run to tens of kilobytes) and row. */
#define MIN_FREE_BYTES (1 << 20)

/* Why results cannot be written into dir (a full or read-only file
 * system), or NULL when they can. */
static const char *space_problem(const char *dir, char *buf, size_t n) {
  struct statvfs v;
  if (statvfs(dir, &v) != 0) return NULL;
  if (v.f_flag & ST_RDONLY) {
    snprintf(buf, n, "the file system of %s is read-only; make it writable "
             "or choose another --out-dir", dir);
    return buf;
  }
  double avail = (double)v.f_bavail * (double)v.f_frsize;
  if (avail < MIN_FREE_BYTES) {
    snprintf(buf, n, "the file system of %s is full (%.0f KiB free; a job "
             "needs about %d KiB for its log, result and row); free some "
             "space", dir, avail / 1024, MIN_FREE_BYTES / 1024);
    return buf;
  }
  return NULL;
}

/* A failure to write the output: says why and what to do; 3 when the file
 * system is full or read-only, else 2. */
static int io_failure(const char *msg, const char *out_dir) {
  char why[PATH_MAX + 256];
  fprintf(stderr, "runner: %s\n", msg);
  if (!space_problem(out_dir, why, sizeof why)) return 2;
  fprintf(stderr, "runner: stopping: %s, then run again to resume (the rows "
          "written so far are kept)\n", why);
  return 3;
}

/* Open MPI's mpirun refuses to run as root unless two variables say so. A
 * container's user is root, and refusing every job there helps nobody: the
 * runner sets them for its jobs, and says so once. */
static void allow_root_launcher(const char *launcher) {
  if (geteuid() != 0 || !launcher || !*launcher) return;
  if (getenv("OMPI_ALLOW_RUN_AS_ROOT") && getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"))
    return;
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  fprintf(stderr, "runner: running as root: jobs get OMPI_ALLOW_RUN_AS_ROOT=1 "
          "so that Open MPI's mpirun starts them (it refuses root otherwise)\n");
}

/* What every run starts from, dry or real: the validated experiment, its
 * jobs, which of them the CSV already holds, and where the output goes.
 * plan_load fills it; plan_free releases whatever plan_load reached (a plan
 * is zeroed first, so it can be freed at any point). */
typedef struct plan {
  experiment e;
  size_t njobs;
  job *jobs;
  pvalue *vals;         /* the jobs' values: njobs * kind->nparams */
  char *done;           /* done[i]: job i already has an ok row (survey) */
  char csv_path[PATH_MAX], json_path[PATH_MAX], samples_path[PATH_MAX],
      log_dir[PATH_MAX], log_path[PATH_MAX], worker[PATH_MAX];
} plan;

static void plan_free(plan *p) {
  experiment_free(&p->e);
  free(p->jobs);
  free(p->vals);
  free(p->done);
  memset(p, 0, sizeof *p);
}

/* Load and expand the experiment and name its files. Returns 0, or the exit
 * status after saying why on stderr. */
static int plan_load(plan *p, const options *o) {
  memset(p, 0, sizeof *p);
  char err[2048];
  if (experiment_load(&p->e, o->path, o->sets, o->nsets, o->onlys, o->nonlys,
                      err, sizeof err) != 0) {
    fprintf(stderr, "%s\n", err);
    return 2;
  }
  /* The longest path made from the output folder: a rank's temporary
   * result file, logs/NAME.jobN.PID.result.rankR.tmpPID. */
  const char *name = p->e.name;
  size_t longest = strlen(o->out_dir) + strlen(name) + 80;
  if (longest >= PATH_MAX) {
    fprintf(stderr, "runner: --out-dir is %zu characters long: the paths of "
            "experiment %s's files in it would pass the system's limit "
            "(allowed: at most %zu characters)\n", strlen(o->out_dir), name,
            (size_t)PATH_MAX - 81 - strlen(name));
    return 2;
  }
  size_t nparams = (size_t)p->e.kind->nparams;
  p->njobs = experiment_njobs(&p->e);
  p->jobs = calloc(p->njobs ? p->njobs : 1, sizeof *p->jobs);
  p->vals = calloc(p->njobs * nparams + 1, sizeof *p->vals);
  p->done = calloc(p->njobs + 1, 1);
  if (!p->jobs || !p->vals || !p->done) {
    fprintf(stderr, "runner: out of memory\n");
    return 2;
  }
  for (size_t i = 0; i < p->njobs; i++) {
    p->jobs[i].v = p->vals + i * nparams;
    experiment_job(&p->e, i, &p->jobs[i]);
  }
  snprintf(p->csv_path, sizeof p->csv_path, "%s/%s.csv", o->out_dir, name);
  snprintf(p->json_path, sizeof p->json_path, "%s/%s.json", o->out_dir, name);
  snprintf(p->samples_path, sizeof p->samples_path, "%s/%s.samples.jsonl",
           o->out_dir, name);
  snprintf(p->log_dir, sizeof p->log_dir, "%s/logs", o->out_dir);
  snprintf(p->log_path, sizeof p->log_path, "%s/%s.log", p->log_dir, name);
  find_worker(p->worker, sizeof p->worker);
  return 0;
}

/* How job i runs. The dry run prints it and the real run launches it, both
 * from this one description, so the printed command is exactly the one a
 * run starts. */
typedef struct job_command {
  char label[1024];        /* the swept values, "backend=mpi size_mib=10" */
  char result[PATH_MAX];   /* the result file rank 0 writes */
  char **argv;             /* launcher, worker, the worker's arguments;
                              NULL-terminated, NULL until made */
  char text[8192];         /* argv as one shell-quoted line */
} job_command;

static void job_command_free(job_command *c) {
  launch_command_free(c->argv);
  c->argv = NULL;
}

/* Fill c for job i. The label is set even when this fails (ERR_OOM, with
 * nothing left to free), so a caller can still name the job. */
static int job_command_make(const plan *p, const options *o, size_t i,
                            job_command *c) {
  const job *j = &p->jobs[i];
  job_label(&p->e, j, c->label, sizeof c->label);
  /* logs/NAME.job<N>.<pid>.result: the runner's pid keeps result files of
   * different runs apart, whatever state an earlier run left. */
  snprintf(c->result, sizeof c->result, "%s/%s.job%zu.%d.result", p->log_dir,
           p->e.name, i + 1, (int)getpid());
  c->argv = NULL;
  c->text[0] = '\0';
  /* The worker's arguments: --kind, --result, then name=value for every
   * setting. launch_command copies them into argv. */
  int nargs = 4 + j->kind->nparams;
  char **args = calloc((size_t)nargs, sizeof *args);
  if (args) {
    args[0] = strdup("--kind");
    args[1] = strdup(j->kind->name);
    args[2] = strdup("--result");
    args[3] = strdup(c->result);
    for (int k = 0; k < j->kind->nparams; k++) {
      char v[PVALUE_STR_MAX + 32], kv[PVALUE_STR_MAX + 96];
      pvalue_format(&j->v[k], v, sizeof v);
      snprintf(kv, sizeof kv, "%s=%s", j->kind->params[k].name, v);
      args[4 + k] = strdup(kv);
    }
    int complete = 1;
    for (int k = 0; k < nargs; k++) complete &= args[k] != NULL;
    if (complete)
      c->argv = launch_command(o->launcher, job_world_size(j),
                               p->worker, args, nargs);
    for (int k = 0; k < nargs; k++) free(args[k]);
    free(args);
  }
  if (!c->argv)
    return err_set(ERR_OOM, __FILE__, __LINE__,
                   "out of memory building job %zu's command", i + 1);
  launch_command_text(c->argv, c->text, sizeof c->text);
  return 0;
}

/* Rows of one CSV come from one kind of machine: a table that put one
 * GPU's (or CPU's) times beside another's would compare the machines, not
 * the settings. So when a job still to run needs GPUs and this machine's
 * GPU is named, and an ok row names another, or a job still to run needs
 * none and an ok row names another CPU, a real run stops before any job
 * and a dry run says it would. A rows_vet: t is the CSV as rows_open read
 * it, done the jobs measured ok; fills why and returns 1 to stop. */
typedef struct machine_vet {
  const plan *p;
  const env_info *env;
  int dry_run;
  int found;                  /* rows of another machine */
  char why[PATH_MAX + 1024];
} machine_vet;

static int other_machine_rows(const csv_table *t, const char *done, void *ctx) {
  machine_vet *v = ctx;
  const plan *p = v->p;
  const env_info *env = v->env;
  int gpu_jobs = 0, cpu_jobs = 0;
  size_t todo = 0;
  for (size_t i = 0; i < p->njobs; i++) {
    if (done[i]) continue;
    todo++;
    if (job_gpus_per_rank(&p->jobs[i]) > 0) gpu_jobs = 1;
    else cpu_jobs = 1;
  }
  if (todo == 0) return 0;   /* rows of jobs outside this plan count too */
  gpu_jobs = gpu_jobs && strcmp(env->gpu_name, "none") != 0;
  if (!gpu_jobs && !cpu_jobs) return 0;
  int st = csv_col(t, "status"), gc = csv_col(t, "gpu_name"),
      cc = csv_col(t, "cpu_model");
  size_t nother = 0;
  const char *other = NULL, *what = NULL, *mine = NULL;
  for (size_t r = 0; st >= 0 && r < t->nrows; r++) {
    if (strcmp(t->rows[r][st], "ok") != 0) continue;
    const char *g = gc >= 0 ? t->rows[r][gc] : "";
    const char *c = cc >= 0 ? t->rows[r][cc] : "";
    if (gpu_jobs && *g && strcmp(g, "none") != 0 && strcmp(g, env->gpu_name) != 0) {
      if (!other) other = g, what = "GPU", mine = env->gpu_name;
      nother++;
    } else if (!gpu_jobs && cpu_jobs && *c && strcmp(c, env->cpu_model) != 0) {
      if (!other) other = c, what = "CPU", mine = env->cpu_model;
      nother++;
    }
  }
  if (nother == 0) return 0;
  v->found = 1;
  snprintf(v->why, sizeof v->why, "%zu ok row%s of %s %s measured on the %s "
           "\"%s\", and this machine's %s is \"%s\": measuring the %zu other "
           "job%s here would put two machines in one table (allowed: --force, "
           "which measures every job again here, or --out-dir DIR for a file "
           "of this machine's own)", nother, nother == 1 ? "" : "s",
           p->csv_path, nother == 1 ? "was" : "were", what, other, what,
           mine, todo, todo == 1 ? "" : "s");
  return !v->dry_run;
}

/* What either kind of run learns before its first job, from one read of
 * the CSV: which jobs it already measured (p->done; a real run's rw is
 * then open for appending) and the provenance of this machine and build.
 * Returns 0 or the exit status; rw is left for rows_close either way. A
 * CSV whose ok rows come from another machine (other_machine_rows) stops
 * a real run with status 2 before the file is touched; a dry run says so
 * and goes on. */
static int survey(plan *p, const options *o, rows *rw, env_info *env) {
  /* A worker that cannot answer leaves the host's values and one warning
   * line: provenance never stops an experiment. */
  (void)env_probe_worker(p->worker, env);
  if (o->slurm >= 0)
    fprintf(stderr, "runner: %d GPU%s, the allocation's: %s\n", o->gpus,
            o->gpus == 1 ? "" : "s", o->slurm_how);
  else if (o->slurm == -2)
    fprintf(stderr, "runner: warning: %s; counting this machine's GPUs\n",
            o->slurm_how);
  if (o->gpus >= 0) env->gpu_count = o->gpus;
  machine_vet v = {.p = p, .env = env, .dry_run = o->dry_run};
  int rc = rows_open(rw, p->csv_path, &p->e, p->jobs, p->njobs, o->force,
                     o->dry_run, p->done, o->force ? NULL : other_machine_rows,
                     &v);
  if (rc < 0) return io_failure(err_msg(), o->out_dir);
  if (v.found)
    fprintf(stderr, "runner: %s%s\n", o->dry_run ? "note: a real run would "
            "stop: " : "", v.why);
  return rc > 0 ? 2 : 0;
}

/* --dry-run: the job count, then each job with its command and whether it
 * would run; no job runs and nothing is written (the output may be another
 * runner's, so no lock is taken either). */
static int dry_run(plan *p, const options *o) {
  rows rw = {.fd = -1};
  env_info env;
  int rc = survey(p, o, &rw, &env);
  rows_close(&rw);
  if (rc) return rc;
  size_t ndone = 0;
  for (size_t i = 0; i < p->njobs; i++) ndone += p->done[i];
  printf("%zu jobs (%zu already measured in %s)\n", p->njobs, ndone,
         p->csv_path);
  for (size_t i = 0; i < p->njobs; i++) {
    job_command c;
    if (job_command_make(p, o, i, &c) < 0) {
      fprintf(stderr, "runner: out of memory\n");
      return 2;
    }
    char why[256], note[300] = "";
    const char *skip =
        cannot_run(&p->jobs[i], env.gpu_count, gpus_where(o), why, sizeof why);
    if (p->done[i]) snprintf(note, sizeof note, "  (done)");
    else if (skip) snprintf(note, sizeof note, "  (would be skipped: %s)", skip);
    printf("[%zu/%zu] %s%s\n    %s\n", i + 1, p->njobs, c.label, note, c.text);
    job_command_free(&c);
  }
  return 0;
}

/* What a real run holds while its jobs run. run_close releases whatever
 * run_open reached (fds of -1 are not held). */
typedef struct session {
  outlock lock;
  rows rw;
  int log_fd;
  env_info env;
  char commit[128], dirty[16];
} session;

static void run_close(session *s) {
  if (s->log_fd >= 0) close(s->log_fd);
  s->log_fd = -1;
  rows_close(&s->rw);
  outlock_release(&s->lock);
}

/* Take the output (its folders and lock, clearing what a dead earlier run
 * left), then the CSV, the sidecar and the log. Returns 0 or the exit
 * status after saying why. */
static int run_open(session *s, plan *p, const options *o) {
  const char *name = p->e.name;
  char lock_path[PATH_MAX], prefix[96];
  snprintf(lock_path, sizeof lock_path, "%s/%s.lock", o->out_dir, name);
  if (mkdir_p(o->out_dir) < 0 || mkdir_p(p->log_dir) < 0)
    return io_failure(err_msg(), o->out_dir);
  char who[256];
  int busy = outlock_take(&s->lock, lock_path, o->wait, &stop_requested, who,
                          sizeof who);
  if (busy < 0) {
    if (stop_requested) {
      fprintf(stderr, "runner: %s\n", err_msg());
      return 130;
    }
    return io_failure(err_msg(), o->out_dir);
  }
  if (busy) {
    fprintf(stderr, "runner: another runner is writing %s (%s); wait for "
            "it with --wait, or choose another --out-dir\n", p->csv_path, who);
    return 2;
  }
  /* Holding the lock, whatever carries this output's tag or names its
   * result files belongs to an earlier run that died (kill -9, a crash). */
  snprintf(prefix, sizeof prefix, "%s/", s->lock.id);
  int killed = launch_kill_tagged(prefix, SIGKILL);
  if (killed)
    fprintf(stderr, "runner: killed %d process%s that an earlier run of %s "
            "left running\n", killed, killed == 1 ? "" : "es", name);
  remove_stale_results(p->log_dir, name);
  int rc = survey(p, o, &s->rw, &s->env);
  if (rc) return rc;
  git_info(s->commit, sizeof s->commit, s->dirty, sizeof s->dirty);
  /* NAME.json describes the run that wrote rows: a run with nothing to do
   * (every job measured) leaves the last one's, whose rows these are */
  size_t ntodo = 0;
  for (size_t i = 0; i < p->njobs; i++) ntodo += !p->done[i];
  if (ntodo && write_sidecar(p->json_path, &p->e, o, p->worker, &s->env,
                             s->commit, s->dirty) < 0)
    return io_failure(err_msg(), o->out_dir);
  s->log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (s->log_fd < 0) {
    char msg[PATH_MAX + 128];
    snprintf(msg, sizeof msg, "cannot open %s: %s", p->log_path, strerror(errno));
    return io_failure(msg, o->out_dir);
  }
  allow_root_launcher(o->launcher);
  return 0;
}

/* Every job without an ok row, in order: skip it with a row if this machine
 * cannot run it, else launch it, judge its outcome and write its row. Stops
 * early when asked to (a signal), when the output cannot take more, or when
 * a job cannot be launched at all. Returns the exit status. */
static int run_jobs(session *s, const plan *p, const options *o) {
  const char *name = p->e.name;
  size_t njobs = p->njobs;
  int rc = 0;
  size_t ntodo = 0, nfailed = 0, nskipped = 0, nok = 0;
  for (size_t i = 0; i < njobs; i++) ntodo += !p->done[i];
  fprintf(stderr, "%s: %zu jobs, %zu already measured, %zu to run -> %s\n",
          name, njobs, njobs - ntodo, ntodo, p->csv_path);
  double t_start = clock_now_s(), t_launched = 0;
  size_t nlaunched = 0, left = ntodo;
  for (size_t i = 0; i < njobs && !stop_requested; i++) {
    if (p->done[i]) continue;
    const job *j = &p->jobs[i];
    char why[PATH_MAX + 256];
    /* A job that cannot write its result would fail for a reason that is
     * not its own, and so would every job after it. */
    if (space_problem(o->out_dir, why, sizeof why)) {
      fprintf(stderr, "runner: stopping before job %zu/%zu: %s, then run "
              "again to resume (the rows written so far are kept)\n", i + 1,
              njobs, why);
      rc = 3;
      break;
    }
    job_command c;
    int made = job_command_make(p, o, i, &c);
    fprintf(stderr, "[%zu/%zu] %s ... ", i + 1, njobs, c.label);
    const char *skip = cannot_run(j, s->env.gpu_count, gpus_where(o), why,
                                  sizeof why);
    /* Only a job that launches needs its command. */
    if (made < 0 && !skip) {
      fprintf(stderr, "runner: out of memory\n");
      rc = 2;
      break;
    }
    outcome out;
    memset(&out, 0, sizeof out);
    double secs = 0;
    if (skip) {
      snprintf(out.status, sizeof out.status, "skipped");
      snprintf(out.message, sizeof out.message, "%s", skip);
    } else {
      char tag[64], now[64];
      snprintf(tag, sizeof tag, "%s/%d/%zu/", s->lock.id, (int)getpid(), i + 1);
      utc_now(now, sizeof now);
      /* A header lost to a full disk is not fatal here: the job then
       * fails to leave its result, and the space check below stops. */
      (void)dprintf(s->log_fd, "=== %s job %zu/%zu %s\n=== %s\n", now, i + 1,
                    njobs, c.label, c.text);
      /* Where this job's output starts; -1 (an lseek failure) only leaves
       * a failure's cause unnamed (log_cause cannot seek there). */
      long log_from = lseek(s->log_fd, 0, SEEK_END);
      launch_outcome lo;
      int lrc = launch_run(c.argv, s->log_fd, job_timeout_s(j), tag,
                           &stop_requested, &lo);
      if (lrc < 0) {
        fprintf(stderr, "\nrunner: %s\n", err_msg());
        job_command_free(&c);
        rc = 2;
        break;
      }
      if (lo.interrupted) {
        fprintf(stderr, "interrupted\n");
        job_command_free(&c);
        break;
      }
      secs = lo.seconds;
      t_launched += secs;
      nlaunched++;
      judge(&lo, c.result, job_world_size(j), p->log_path,
            log_from, job_timeout_s(j), &out);
      /* A job that failed while the disk filled up gets no row: its
       * failure may be the disk's, and a rerun retries it anyway. */
      if (strcmp(out.status, "ok") != 0 &&
          space_problem(o->out_dir, why, sizeof why)) {
        fprintf(stderr, "%s\nrunner: stopping: job %zu/%zu could not leave its "
                "result: %s, then run again to resume (the rows written so far "
                "are kept)\n", out.status, i + 1, njobs, why);
        resultfile_free(&out.rf);
        job_command_free(&c);
        rc = 3;
        break;
      }
    }
    job_command_free(&c);
    if (write_row(&s->rw, j, out.status, out.message, skip ? NULL : &out.rf,
                  &s->env, s->commit, s->dirty) < 0 ||
        (!skip && strcmp(out.status, "ok") == 0 &&
         write_samples(p->samples_path, j, &out.rf) < 0)) {
      fprintf(stderr, "\n");
      rc = io_failure(err_msg(), o->out_dir);
      resultfile_free(&out.rf);
      break;
    }
    resultfile_free(&out.rf);
    if (strcmp(out.status, "ok") == 0) nok++;
    else if (strcmp(out.status, "skipped") == 0) nskipped++;
    else nfailed++;
    /* Remaining time: the mean launched job so far times the jobs left. */
    left--;
    char el[32], rem[32];
    fmt_duration(clock_now_s() - t_start, el, sizeof el);
    fmt_duration(nlaunched ? t_launched / (double)nlaunched * (double)left : 0,
                 rem, sizeof rem);
    fprintf(stderr, "%s%s%s (%.1f s) | elapsed %s, ~%s left\n", out.status,
            out.message[0] ? ": " : "", out.message, secs, el, rem);
  }
  fprintf(stderr, "%s: %zu ok, %zu failed, %zu skipped, %zu already measured -> %s\n",
          name, nok, nfailed, nskipped, njobs - ntodo, p->csv_path);
  if (!rc && stop_requested) {
    fprintf(stderr, "interrupted: the rows written so far are kept; run again to resume\n");
    rc = 130;
  }
  if (!rc) rc = nfailed ? 1 : 0;
  return rc;
}

/* The real run: take the output, run the jobs, let go of the output. */
static int run(plan *p, const options *o) {
  session s = {.lock = {.fd = -1}, .rw = {.fd = -1}, .log_fd = -1};
  int rc = run_open(&s, p, o);
  if (rc == 0) rc = run_jobs(&s, p, o);
  run_close(&s);
  return rc;
}

/* SIGINT, SIGTERM and SIGHUP only set stop_requested: a waiting lock gives
 * up, a running job is killed, and the runner still writes its summary and
 * frees what it holds. */
static void catch_stop_signals(void) {
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  /* Fails only for a signal that cannot be caught: none of these. */
  for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++)
    ASSERT(sigaction(sigs[k], &sa, NULL) == 0);
}

int main(int argc, char **argv) {
  options o;
  parse_options(argc, argv, &o);
  /* Every way out after loading passes plan_free: a refused or failed run
   * leaks nothing (CI's sanitizer stage checks it). */
  plan p;
  int rc = plan_load(&p, &o);
  if (rc == 0) {
    catch_stop_signals();
    rc = o.dry_run ? dry_run(&p, &o) : run(&p, &o);
  }
  plan_free(&p);
  return rc;
}
