/* Typed parameter values: parsing command-line text, range and choice
 * checks, and the canonical text that resume matches rows by. */
#include "config.h"
#include "harness/param.h"
#include "harness/lint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *ptype_name(ptype t) {
  switch (t) {
    case P_INT: return "an integer";
    case P_FLOAT: return "a float";
    case P_STRING: return "a string";
    case P_BOOL: return "a boolean";
  }
  return "a value of unknown type";
}

/* The shortest text among %.1g .. %.17g that reads back as exactly x:
 * "300" rather than "3e+02", "0.1" rather than "0.10000000000000001".
 * Ties go to the lower precision, so the choice is deterministic. */
static void format_float(double x, char *buf, size_t n) {
  if (!isfinite(x)) {
    snprintf(buf, n, "%g", x);
    return;
  }
  if (x == 0) x = 0;  /* -0 and 0 are equal, so they get one text */
  char best[40] = "";
  size_t best_len = (size_t)-1;
  for (int p = 1; p <= 17; p++) {
    char t[40];
    snprintf(t, sizeof t, "%.*g", p, x);
    size_t len = strlen(t);
    if (len < best_len && strtod(t, NULL) == x) {
      memcpy(best, t, len + 1);
      best_len = len;
    }
  }
  snprintf(buf, n, "%s", best);
}

void pvalue_format(const pvalue *v, char *buf, size_t n) {
  switch (v->type) {
    case P_INT: snprintf(buf, n, "%lld", v->i); return;
    case P_FLOAT: format_float(v->f, buf, n); return;
    case P_STRING: snprintf(buf, n, "%s", v->s); return;
    case P_BOOL: snprintf(buf, n, "%s", v->i ? "true" : "false"); return;
  }
  snprintf(buf, n, "?");
}

int pvalue_equal(const pvalue *a, const pvalue *b) {
  if (a->type != b->type) return 0;
  switch (a->type) {
    case P_INT:
    case P_BOOL: return a->i == b->i;
    case P_FLOAT: return a->f == b->f;
    case P_STRING: return strcmp(a->s, b->s) == 0;
  }
  return 0;
}

void param_allowed(const param_def *d, char *buf, size_t n) {
  char lo[40], hi[40];
  switch (d->type) {
    case P_INT:
      snprintf(buf, n, "allowed: %.0f .. %.0f", d->min, d->max);
      return;
    case P_FLOAT:
      format_float(d->min, lo, sizeof lo);
      format_float(d->max, hi, sizeof hi);
      snprintf(buf, n, "allowed: %s .. %s", lo, hi);
      return;
    case P_BOOL:
      snprintf(buf, n, "allowed: true, false");
      return;
    case P_STRING:
      break;
  }
  if (!d->choices) {
    snprintf(buf, n, "allowed: any non-empty string of at most %d bytes",
             PVALUE_STR_MAX - 1);
    return;
  }
  size_t o = (size_t)snprintf(buf, n, "allowed: ");
  for (int k = 0; d->choices[k] && o < n; k++)
    o += (size_t)snprintf(buf + o, n - o, "%s%s", k ? ", " : "",
                          d->choices[k]);
}

static int string_allowed(const param_def *d, const char *s) {
  if (s[0] == '\0' || strlen(s) >= PVALUE_STR_MAX) return 0;
  if (!d->choices) return 1;
  for (int k = 0; d->choices[k]; k++)
    if (strcmp(d->choices[k], s) == 0) return 1;
  return 0;
}

int pvalue_check(const param_def *d, const pvalue *v, char *err,
                 size_t errlen) {
  char allowed[512], text[PVALUE_STR_MAX * 4 + 8];
  param_allowed(d, allowed, sizeof allowed);
  if (v->type != d->type) {
    snprintf(err, errlen, "%s must be %s, got %s (%s)", d->name,
             ptype_name(d->type), ptype_name(v->type), allowed);
    return -1;
  }
  lint_value_text(v, text, sizeof text);
  int bad_range = 0, bad_choice = 0;
  switch (v->type) {
    case P_INT:
      bad_range = (double)v->i < d->min || (double)v->i > d->max;
      break;
    case P_FLOAT:  /* NaN fails both comparisons, so test finiteness too */
      bad_range = !isfinite(v->f) || v->f < d->min || v->f > d->max;
      break;
    case P_STRING:
      bad_choice = !string_allowed(d, v->s);
      break;
    case P_BOOL:
      break;
  }
  if (bad_range || bad_choice) {
    snprintf(err, errlen, "%s = %s is %s (%s)", d->name, text,
             bad_range ? "out of range" : "not allowed", allowed);
    return -1;
  }
  return 0;
}

/* Only the characters of a decimal number: strtod alone would also take
 * "nan", "inf", hex floats and leading spaces. */
static int looks_decimal(const char *s) {
  return s[0] != '\0' && strspn(s, "0123456789.eE+-") == strlen(s);
}

/* libconfig's hex integer (0x10, 0XfF): unsigned, no fraction. The file
 * accepts it and every libconfig version reads it alike, so the command
 * line accepts the same form. */
static int looks_hex(const char *s) {
  return s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && s[2] != '\0' &&
         strspn(s + 2, "0123456789abcdefABCDEF") == strlen(s + 2);
}

static int parse_error(const param_def *d, const char *what,
                       const char *text, char *err, size_t errlen) {
  char allowed[512], q[PVALUE_STR_MAX * 4 + 8];
  param_allowed(d, allowed, sizeof allowed);
  lint_quote(text, q, sizeof q);
  snprintf(err, errlen, "%s must be %s, got %s (%s)", d->name, what, q,
           allowed);
  return -1;
}

/* The file's rule, so that a number means the same in both places: 010 is
 * 10 in libconfig 1.5 and 8 in later versions, so it is refused. */
static int leading_zero_error(const char *text, char *err, size_t errlen) {
  return lint_leading_zero(text, strlen(text), err, errlen) ? -1 : 0;
}

/* Decimal or hex integer text, as the file writes integers. */
static int parse_integer(const param_def *d, const char *text, long long *out,
                         char *err, size_t errlen) {
  int hex = looks_hex(text);
  if (!hex && !looks_decimal(text))
    return parse_error(d, "an integer", text, err, errlen);
  if (!hex && leading_zero_error(text, err, errlen) != 0) return -1;
  char *end = NULL;
  errno = 0;
  *out = strtoll(text, &end, hex ? 16 : 10);
  if (*end != '\0')
    return parse_error(d, "an integer", text, err, errlen);
  if (errno == ERANGE) {
    char allowed[512], q[PVALUE_STR_MAX * 4 + 8];
    param_allowed(d, allowed, sizeof allowed);
    lint_quote(text, q, sizeof q);
    snprintf(err, errlen, "%s = %s is out of range (%s)", d->name, q,
             allowed);
    return -1;
  }
  return 0;
}

int pvalue_parse(const param_def *d, const char *text, pvalue *v, char *err,
                 size_t errlen) {
  memset(v, 0, sizeof *v);
  v->type = d->type;
  char *end = NULL;
  switch (d->type) {
    case P_INT:
      if (parse_integer(d, text, &v->i, err, errlen) != 0) return -1;
      break;
    case P_FLOAT:
      /* The file lets a float parameter take any integer, hex included. */
      if (looks_hex(text)) {
        long long i = 0;
        if (parse_integer(d, text, &i, err, errlen) != 0) return -1;
        v->f = (double)i;
        break;
      }
      if (!looks_decimal(text)) return parse_error(d, "a number", text, err, errlen);
      if (leading_zero_error(text, err, errlen) != 0) return -1;
      v->f = strtod(text, &end);
      if (*end != '\0') return parse_error(d, "a number", text, err, errlen);
      break;
    case P_STRING:
      if (strlen(text) >= PVALUE_STR_MAX) {
        snprintf(err, errlen, "%s is too long (allowed: at most %d bytes)",
                 d->name, PVALUE_STR_MAX - 1);
        return -1;
      }
      memcpy(v->s, text, strlen(text) + 1);
      break;
    case P_BOOL:
      if (strcasecmp(text, "true") == 0)
        v->i = 1;
      else if (strcasecmp(text, "false") == 0)
        v->i = 0;
      else
        return parse_error(d, "true or false", text, err, errlen);
      break;
  }
  return pvalue_check(d, v, err, errlen);
}

int param_default(const param_def *d, pvalue *v) {
  if (!d->def) return -1;
  char err[512];
  if (pvalue_parse(d, d->def, v, err, sizeof err) != 0) {
    fprintf(stderr, "internal error: the default of %s.%s: %s\n", d->group,
            d->name, err);
    abort();
  }
  return 0;
}

void settings_fill(const param_def *d, int n, const pvalue *v, void *out) {
  char *base = out;
  for (int i = 0; i < n; i++) {
    void *at = base + d[i].field;
    switch (d[i].type) {
      case P_INT: *(int *)at = (int)v[i].i; break;
      case P_FLOAT: *(double *)at = v[i].f; break;
      case P_STRING: *(const char **)at = v[i].s; break;
      case P_BOOL: *(bool *)at = v[i].i != 0; break;
    }
  }
}
