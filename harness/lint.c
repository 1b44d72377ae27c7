/* Lexical checks of experiment files, mirroring libconfig 1.5's lexer
 * (lib/scanner.l): see lint.h for why they exist. */
#include "config.h"
#include "harness/lint.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct scan {
  const char *include_dir;
  char *err;
  size_t errlen;
} scan;

/* Reads a whole regular file. On failure returns NULL with *why set to a
 * reason for a message. A directory must be refused here: libconfig 1.5
 * would fopen it and then abort the process from its scanner. */
static char *read_all(const char *path, size_t *len, const char **why) {
  FILE *f = fopen(path, "r");
  if (!f) {
    *why = strerror(errno);
    return NULL;
  }
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    *why = strerror(errno);
    fclose(f);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = S_ISDIR(st.st_mode) ? strerror(EISDIR) : "not a regular file";
    fclose(f);
    return NULL;
  }
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    *why = strerror(ENOMEM);
    fclose(f);
    return NULL;
  }
  /* The size may change under us; read until EOF regardless. */
  for (;;) {
    if (n + 1 >= cap) {
      char *bigger = realloc(buf, cap * 2);
      if (!bigger) {
        *why = strerror(ENOMEM);
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = bigger;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - 1 - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    *why = strerror(errno ? errno : EIO);
    free(buf);
    fclose(f);
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  *len = n;
  return buf;
}

static int scan_text(scan *sc, const char *name, const char *text,
                     size_t len, int depth);

/* Resolved as experiment_load has libconfig open it: an absolute path as
 * given, a relative one against the experiment file's folder (include_dir).
 * Messages name the file as written, as libconfig's own do. */
static int scan_include(scan *sc, const char *from, int line,
                        const char *file, int depth) {
  char q[300];
  lint_quote(file, q, sizeof q);
  if (depth >= LINT_MAX_INCLUDE_DEPTH) {
    snprintf(sc->err, sc->errlen,
             "%s:%d: @include %s nests more than %d files deep (allowed: %d "
             "levels of @include; is there an include cycle?)",
             from, line, q, LINT_MAX_INCLUDE_DEPTH, LINT_MAX_INCLUDE_DEPTH);
    return -1;
  }
  int absolute = file[0] == '/';
  size_t plen = strlen(sc->include_dir) + 1 + strlen(file) + 1;
  char *path = malloc(plen);
  if (!path) {
    snprintf(sc->err, sc->errlen, "%s:%d: out of host memory", from, line);
    return -1;
  }
  if (absolute)
    snprintf(path, plen, "%s", file);
  else
    snprintf(path, plen, "%s/%s", sc->include_dir, file);
  const char *why = NULL;
  size_t n = 0;
  char *text = read_all(path, &n, &why);
  if (!text) {
    if (absolute)
      snprintf(sc->err, sc->errlen,
               "%s:%d: cannot read include file %s (%s; absolute @include "
               "paths are read as given, relative ones against the "
               "experiment file's folder)", from, line, q, why);
    else
      snprintf(sc->err, sc->errlen,
               "%s:%d: cannot read include file %s (%s: %s; @include paths "
               "are relative to the experiment file's folder)",
               from, line, q, path, why);
    free(path);
    return -1;
  }
  free(path);
  int rc = scan_text(sc, file, text, n, depth + 1);
  free(text);
  return rc;
}

/* Digits of a number with its leading zeros dropped ("-007.5" -> "-7.5"),
 * for the "write ..." hint. */
static void strip_zeros(const char *tok, size_t n, char *buf, size_t cap) {
  size_t i = 0, o = 0;
  if (i < n && (tok[i] == '-' || tok[i] == '+') && o + 1 < cap)
    buf[o++] = tok[i++];
  while (i + 1 < n && tok[i] == '0' && isdigit((unsigned char)tok[i + 1]))
    i++;
  while (i < n && o + 1 < cap) buf[o++] = tok[i++];
  buf[o] = '\0';
}

/* A number token: libconfig's integer, integer64, hex, hex64 and float. */
typedef struct numtok {
  size_t len;      /* 0: not a number */
  size_t digits;   /* length without the L suffix */
  int is_float, is_hex, suffix_l;
} numtok;

static numtok number_token(const char *s, size_t avail) {
  numtok t = {0, 0, 0, 0, 0};
  size_t i = 0;
  if (i < avail && (s[i] == '-' || s[i] == '+')) i++;
  size_t start = i;
  if (i + 1 < avail && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
    i += 2;
    while (i < avail && isxdigit((unsigned char)s[i])) i++;
    t.is_hex = 1;
  } else {
    while (i < avail && isdigit((unsigned char)s[i])) i++;
    size_t intdigits = i - start;
    size_t fracdigits = 0;
    if (i < avail && s[i] == '.') {
      i++, t.is_float = 1;
      while (i < avail && isdigit((unsigned char)s[i])) i++, fracdigits++;
    }
    if (intdigits == 0 && fracdigits == 0) return t;
    if (i < avail && (s[i] == 'e' || s[i] == 'E')) {
      size_t j = i + 1;
      if (j < avail && (s[j] == '-' || s[j] == '+')) j++;
      if (j < avail && isdigit((unsigned char)s[j])) {
        while (j < avail && isdigit((unsigned char)s[j])) j++;
        i = j, t.is_float = 1;
      }
    }
  }
  t.digits = i;
  while (i < avail && s[i] == 'L') i++;
  t.suffix_l = i > t.digits;
  t.len = i;
  return t;
}

/* libconfig 1.5 stores an integer without the L suffix in 32 bits, silently
 * dropping the high bits (3000000000 reads as -1294967296, 0xFFFFFFFF as
 * -1); 1.6+ widens it instead. So such integers must carry the L. Returns
 * 0 if the integer fits, 32 if it needs the L, 64 if nothing holds it. */
static int integer_overflow(const char *tok, const numtok *t) {
  char digits[64];
  if (t->digits >= sizeof digits) return 64;
  memcpy(digits, tok, t->digits);
  digits[t->digits] = '\0';
  errno = 0;
  long long v;
  if (t->is_hex) {
    unsigned long long u = strtoull(digits, NULL, 16);
    if (errno == ERANGE || u > (unsigned long long)LLONG_MAX) return 64;
    v = (long long)u;
  } else {
    v = strtoll(digits, NULL, 10);
    if (errno == ERANGE) return 64;
  }
  if (!t->suffix_l && (v > INT_MAX || v < INT_MIN)) return 32;
  return 0;
}

int lint_leading_zero(const char *tok, size_t n, char *msg, size_t len) {
  size_t i = (n > 0 && (tok[0] == '-' || tok[0] == '+')) ? 1 : 0;
  if (!(i + 1 < n && tok[i] == '0' && isdigit((unsigned char)tok[i + 1])))
    return 0;
  int w = (int)(n < 40 ? n : 40);
  char fixed[64];
  strip_zeros(tok, n, fixed, sizeof fixed);
  snprintf(msg, len, "%.*s has a leading zero (write %s; leading zeros read "
           "as octal in newer libconfig)", w, tok, fixed);
  return 1;
}

static int number_error(scan *sc, const char *name, int line,
                        const char *tok, const numtok *t) {
  int w = (int)(t->len < 40 ? t->len : 40);
  char msg[256];
  if (lint_leading_zero(tok, t->len, msg, sizeof msg)) {
    snprintf(sc->err, sc->errlen, "%s:%d: %s", name, line, msg);
    return -1;
  }
  if (t->is_float) return 0;
  int bits = integer_overflow(tok, t);
  if (bits == 32)
    snprintf(sc->err, sc->errlen,
             "%s:%d: %.*s does not fit in 32 bits (write %.*sL; libconfig "
             "1.5 silently truncates integers without the L suffix to 32 "
             "bits)", name, line, w, tok, w, tok);
  else if (bits == 64)
    snprintf(sc->err, sc->errlen,
             "%s:%d: %.*s does not fit in 64 bits (allowed: integers from "
             "%lld to %lld)", name, line, w, tok, LLONG_MIN, LLONG_MAX);
  return bits ? -1 : 0;
}


/* Reads the file name of `@include "..."` starting after the quote, with
 * libconfig's two escapes (\\ and \"). Returns the index after the closing
 * quote, or 0 if the name is unterminated (libconfig reports that). */
static size_t include_name(const char *t, size_t len, size_t i, char *out,
                           size_t cap, int *line) {
  size_t o = 0;
  while (i < len && t[i] != '"') {
    char c = t[i++];
    if (c == '\\' && i < len && (t[i] == '\\' || t[i] == '"')) c = t[i++];
    if (c == '\n') (*line)++;
    if (o + 1 < cap) out[o++] = c;
  }
  out[o] = '\0';
  return i < len ? i + 1 : 0;
}

static size_t skip_string(const char *t, size_t len, size_t i, int *line) {
  while (i < len && t[i] != '"') {
    if (t[i] == '\\' && i + 1 < len) i++;
    if (t[i] == '\n') (*line)++;
    i++;
  }
  return i < len ? i + 1 : len;
}

static size_t skip_block_comment(const char *t, size_t len, size_t i,
                                 int *line) {
  while (i + 1 < len && !(t[i] == '*' && t[i + 1] == '/')) {
    if (t[i] == '\n') (*line)++;
    i++;
  }
  return i + 1 < len ? i + 2 : len;
}

static int is_name_char(char c) {
  return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '*';
}

/* One pass over one file's text; `blank` is true while only spaces and tabs
 * follow the last newline, where flex's ^ lets `@include` match. */
static int scan_text(scan *sc, const char *name, const char *t, size_t len,
                     int depth) {
  static const char inc[] = "@include";
  int line = 1, blank = 1;
  size_t i = 0;
  while (i < len) {
    char c = t[i];
    if (c == '\n') {
      line++, blank = 1, i++;
      continue;
    }
    if (c == ' ' || c == '\t') {
      i++;
      continue;
    }
    int was_blank = blank;
    blank = 0;
    if (c == '#' || (c == '/' && i + 1 < len && t[i + 1] == '/')) {
      while (i < len && t[i] != '\n') i++;
    } else if (c == '/' && i + 1 < len && t[i + 1] == '*') {
      i = skip_block_comment(t, len, i + 2, &line);
    } else if (c == '"') {
      i = skip_string(t, len, i + 1, &line);
    } else if (c == '@' && was_blank && len - i > sizeof inc - 1 &&
               memcmp(t + i, inc, sizeof inc - 1) == 0 &&
               (t[i + sizeof inc - 1] == ' ' || t[i + sizeof inc - 1] == '\t')) {
      size_t j = i + sizeof inc - 1;
      while (j < len && (t[j] == ' ' || t[j] == '\t')) j++;
      if (j >= len || t[j] != '"') {
        i = j;  /* not an include; libconfig reports the stray '@' */
        continue;
      }
      char file[4096];
      size_t end = include_name(t, len, j + 1, file, sizeof file, &line);
      if (end == 0) return 0;
      if (scan_include(sc, name, line, file, depth) != 0) return -1;
      i = end;
    } else if (isalpha((unsigned char)c) || c == '*') {
      while (i < len && is_name_char(t[i])) i++;
    } else {
      numtok num = number_token(t + i, len - i);
      if (num.len == 0) {
        i++;
        continue;
      }
      if (number_error(sc, name, line, t + i, &num) != 0) return -1;
      i += num.len;
    }
  }
  return 0;
}

int lint_scan(const char *path, const char *include_dir, char *err,
              size_t errlen) {
  scan sc = {include_dir, err, errlen};
  const char *why = NULL;
  size_t n = 0;
  char *text = read_all(path, &n, &why);
  if (!text) {
    snprintf(err, errlen, "%s: cannot read experiment file: %s", path, why);
    return -1;
  }
  int rc = scan_text(&sc, path, text, n, 0);
  free(text);
  return rc;
}

/* Names are short; anything longer than this is not a typo of one. */
#define LINT_NAME_MAX 64

size_t lint_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > LINT_NAME_MAX || lb > LINT_NAME_MAX) return la > lb ? la : lb;
  /* Optimal string alignment: three rows of the Levenshtein table. */
  size_t rows[3][LINT_NAME_MAX + 1];
  size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= lb; j++) prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t d = prev[j] + 1;
      if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
      if (prev[j - 1] + cost < d) d = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          prev2[j - 2] + 1 < d)
        d = prev2[j - 2] + 1;
      cur[j] = d;
    }
    size_t *t = prev2;
    prev2 = prev, prev = cur, cur = t;
  }
  return prev[lb];
}

int lint_nearest(const char *word, const char *const *cands, int ncands) {
  /* Close = a typo's worth of edits, more for longer words, and never
   * all of the candidate (which would suggest "kind" for "x"). */
  size_t limit = 1 + strlen(word) / 4;
  int best = -1;
  size_t best_d = (size_t)-1;
  for (int k = 0; k < ncands; k++) {
    size_t d = lint_edit_distance(word, cands[k]);
    if (d <= limit && d < strlen(cands[k]) && d < best_d) {
      best = k;
      best_d = d;
    }
  }
  return best;
}

void lint_quote(const char *word, char *buf, size_t n) {
  if (n < 3) {
    if (n > 0) buf[0] = '\0';
    return;
  }
  size_t o = 0;
  buf[o++] = '"';
  for (const unsigned char *p = (const unsigned char *)word; *p; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\')
      snprintf(esc, sizeof esc, "\\%c", *p);
    else if (*p == '\n')
      snprintf(esc, sizeof esc, "\\n");
    else if (*p == '\t')
      snprintf(esc, sizeof esc, "\\t");
    else if (*p < 0x20 || *p == 0x7f)
      snprintf(esc, sizeof esc, "\\x%02x", *p);
    else
      esc[0] = (char)*p, esc[1] = '\0';
    size_t el = strlen(esc);
    if (o + el + 2 > n) break;  /* room for the closing quote and NUL */
    memcpy(buf + o, esc, el);
    o += el;
  }
  buf[o++] = '"';
  buf[o] = '\0';
}

void lint_value_text(const pvalue *v, char *buf, size_t n) {
  if (v->type == P_STRING)
    lint_quote(v->s, buf, n);
  else
    pvalue_format(v, buf, n);
}
