#include "config.h"
#include "harness/resultfile.h"

#include "common/check.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void text_one_line(char *dst, size_t n, const char *s) {
  if (n == 0) return;
  size_t i = 0;
  for (; s && s[i] && i + 1 < n; i++)
    dst[i] = (s[i] == '\n' || s[i] == '\r' || s[i] == '\t') ? ' ' : s[i];
  dst[i] = '\0';
}

int resultfile_write(const char *path, const char *status,
                     const char *message, const result *r,
                     const env_info *env) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  FILE *f = fopen(tmp, "w");
  CHECK_SYS(f != NULL, "cannot write result file %s", tmp);
  char line[2048];
  text_one_line(line, sizeof line, message ? message : "");
  fprintf(f, "status=%s\nmessage=%s\n", status, line);
  if (r) {
    for (int i = 0; r->kind->metrics[i]; i++)
      if (!isnan(r->metric[i])) {
        double v = r->metric[i];
        /* Counts (bytes, ranks) stay exact integers, never 1.07e+09. */
        if (v == floor(v) && fabs(v) < 1e15)
          fprintf(f, "metric.%s=%.0f\n", r->kind->metrics[i], v);
        else
          fprintf(f, "metric.%s=%.6g\n", r->kind->metrics[i], v);
      }
  }
  if (r) {
    /* "name=v v v" lines become "sample.name=v v v". */
    const char *p = r->samples;
    while (*p) {
      size_t len = strcspn(p, "\n");
      fprintf(f, "sample.%.*s\n", (int)len, p);
      p += len + (p[len] == '\n');
    }
  }
  if (env) resultfile_put_env(f, env);
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    int e = errno;
    unlink(tmp);   /* a full disk leaves no half-written file behind */
    errno = e;
    CHECK_SYS(0, "cannot write result file %s", path);
  }
  return 0;
}

void resultfile_put_env(FILE *f, const env_info *env) {
  char line[2048], buf[64];
  for (int c = 0; c < ENV_NCOLS; c++) {
    text_one_line(line, sizeof line, env_value(env, c, buf, sizeof buf));
    fprintf(f, "env.%s=%s\n", env_columns[c], line);
  }
}

int resultfile_read(const char *path, resultfile *rf) {
  memset(rf, 0, sizeof *rf);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  resultfile_read_stream(f, rf);
  fclose(f);
  return 0;
}

void resultfile_read_stream(FILE *f, resultfile *rf) {
  memset(rf, 0, sizeof *rf);
  /* getline: sample lines (a timeline of hundreds of collectives) run to
   * tens of kilobytes and must be read whole. */
  char *line = NULL;
  size_t cap = 0;
  while (getline(&line, &cap, f) >= 0) {
    line[strcspn(line, "\r\n")] = '\0';
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq = '\0';
    char **k = realloc(rf->key, (size_t)(rf->n + 1) * sizeof *k);
    if (!k) break;
    rf->key = k;
    char **v = realloc(rf->value, (size_t)(rf->n + 1) * sizeof *v);
    if (!v) break;
    rf->value = v;
    rf->key[rf->n] = strdup(line);
    rf->value[rf->n] = strdup(eq + 1);
    if (!rf->key[rf->n] || !rf->value[rf->n]) break;
    rf->n++;
  }
  free(line);
}

const char *resultfile_get(const resultfile *rf, const char *key) {
  for (int i = 0; i < rf->n; i++)
    if (strcmp(rf->key[i], key) == 0) return rf->value[i];
  return NULL;
}

void resultfile_free(resultfile *rf) {
  for (int i = 0; i < rf->n; i++) {
    free(rf->key[i]);
    free(rf->value[i]);
  }
  free(rf->key);
  free(rf->value);
  memset(rf, 0, sizeof *rf);
}
