/* safetensors reader and writer (safetensors.h says what the format is).
 *
 * The header is parsed by a small recursive-descent JSON parser that knows
 * the shape of a safetensors header: an object whose members are tensor
 * entries (objects with "dtype", "shape", "data_offsets"; other members are
 * skipped, as the reference implementation does) and an optional
 * "__metadata__" object of strings. Strings take every JSON escape,
 * surrogate pairs included; numbers in shapes and offsets must be JSON
 * integers without sign, fraction or exponent. */
#include "config.h"
#include "model/safetensors.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The reference refuses headers over 100 MB; so do we (a bad length read
 * from a file that is not safetensors should not allocate gigabytes). */
#define ST_MAX_HEADER (100u * 1000u * 1000u)

static const struct {
  const char *name;
  size_t size;
} dtypes[ST_NDTYPES] = {
    [ST_F64] = {"F64", 8},   [ST_F32] = {"F32", 4},
    [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2},
    [ST_I64] = {"I64", 8},   [ST_I32] = {"I32", 4},
    [ST_I16] = {"I16", 2},   [ST_I8] = {"I8", 1},
    [ST_U8] = {"U8", 1},     [ST_BOOL] = {"BOOL", 1},
    [ST_U16] = {"U16", 2},   [ST_U32] = {"U32", 4},
    [ST_U64] = {"U64", 8},   [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype t) {
  return (unsigned)t < ST_NDTYPES ? dtypes[t].name : "?";
}
size_t st_dtype_size(st_dtype t) {
  return (unsigned)t < ST_NDTYPES ? dtypes[t].size : 0;
}

static int host_is_le(void) {
  const uint16_t one = 1;
  return *(const unsigned char *)&one == 1;
}

/* Reverse each `size`-byte element in place (big-endian hosts only). */
static void byteswap(void *p, size_t n, size_t size) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++, b += size)
    for (size_t j = 0; j < size / 2; j++) {
      unsigned char t = b[j];
      b[j] = b[size - 1 - j];
      b[size - 1 - j] = t;
    }
}

static void fmt_shape(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t len = 0;
  len += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, i ? ", " : "",
                            shape[i]);
  if (len < n) snprintf(buf + len, n - len, "]");
}

/* ---- JSON --------------------------------------------------------------- */

typedef struct parser {
  const char *s;
  size_t n, i;
  char err[512];
} parser;

static int perr(parser *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int perr(parser *p, const char *fmt, ...) {
  if (p->err[0]) return -1;   /* keep the first, innermost message */
  int k = snprintf(p->err, sizeof p->err, "header byte %zu: ", p->i);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(p->err + k, sizeof p->err - (size_t)k, fmt, ap);
  va_end(ap);
  return -1;
}

static void skip_ws(parser *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' ||
                         p->s[p->i] == '\n' || p->s[p->i] == '\r'))
    p->i++;
}

static int peek(parser *p) {
  skip_ws(p);
  return p->i < p->n ? (unsigned char)p->s[p->i] : -1;
}

static const char *what_is(parser *p) {
  static _Thread_local char buf[32];
  if (p->i >= p->n) return "the end of the header";
  unsigned char c = (unsigned char)p->s[p->i];
  if (c >= 0x20 && c < 0x7f) snprintf(buf, sizeof buf, "'%c'", c);
  else snprintf(buf, sizeof buf, "byte 0x%02x", c);
  return buf;
}

static int expect(parser *p, char c, const char *where) {
  if (peek(p) != (unsigned char)c)
    return perr(p, "expected '%c' %s, found %s", c, where, what_is(p));
  p->i++;
  return 0;
}

static int hex4(parser *p, unsigned *out) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    if (p->i >= p->n) return perr(p, "unfinished \\u escape");
    char c = p->s[p->i];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return perr(p, "\\u escape needs 4 hex digits, found %s", what_is(p));
    v = v * 16 + d;
    p->i++;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned cp, min;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; min = 0x10000; }
  else return 0;
  if (len > n) return 0;
  for (size_t k = 1; k < len; k++) {
    if ((s[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

/* A JSON string into a malloc'd C string (out may be NULL: skip it). */
static int parse_string(parser *p, char **out) {
  if (peek(p) != '"')
    return perr(p, "expected a string, found %s", what_is(p));
  p->i++;
  /* The decoded string is never longer than its source. */
  size_t start = p->i;
  char *buf = malloc(p->n - start + 1);
  if (buf == NULL) return perr(p, "out of memory");
  size_t len = 0;
  for (;;) {
    if (p->i >= p->n) {
      free(buf);
      p->i = start - 1;
      return perr(p, "string not closed");
    }
    unsigned char c = (unsigned char)p->s[p->i];
    if (c == '"') { p->i++; break; }
    if (c < 0x20) {
      free(buf);
      return perr(p, "control character 0x%02x inside a string (write it "
                  "as an escape)", c);
    }
    if (c != '\\') {
      size_t k = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
      if (k == 0) {
        free(buf);
        return perr(p, "invalid UTF-8 inside a string");
      }
      memcpy(buf + len, p->s + p->i, k);
      len += k;
      p->i += k;
      continue;
    }
    p->i++;
    if (p->i >= p->n) {
      free(buf);
      return perr(p, "string not closed");
    }
    char e = p->s[p->i++];
    unsigned cp;
    switch (e) {
    case '"': buf[len++] = '"'; break;
    case '\\': buf[len++] = '\\'; break;
    case '/': buf[len++] = '/'; break;
    case 'b': buf[len++] = '\b'; break;
    case 'f': buf[len++] = '\f'; break;
    case 'n': buf[len++] = '\n'; break;
    case 'r': buf[len++] = '\r'; break;
    case 't': buf[len++] = '\t'; break;
    case 'u':
      if (hex4(p, &cp) != 0) { free(buf); return -1; }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned lo;
        if (p->i + 1 < p->n && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u') {
          p->i += 2;
          if (hex4(p, &lo) != 0) { free(buf); return -1; }
        } else {
          lo = 0;
        }
        if (lo < 0xDC00 || lo > 0xDFFF) {
          free(buf);
          return perr(p, "\\u%04X (a high surrogate) is not followed by a "
                      "low surrogate", cp);
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        free(buf);
        return perr(p, "\\u%04X is a lone low surrogate", cp);
      } else if (cp == 0) {
        free(buf);
        return perr(p, "\\u0000 (NUL) inside a string is not supported");
      }
      len += put_utf8(buf + len, cp);
      break;
    default:
      p->i--;
      free(buf);
      return perr(p, "unknown escape \\%s", what_is(p));
    }
  }
  buf[len] = '\0';
  if (out) *out = buf;
  else free(buf);
  return 0;
}

/* A JSON integer >= 0 that fits in 64 bits. */
static int parse_uint(parser *p, uint64_t *out, const char *what) {
  int c = peek(p);
  if (c == '-') return perr(p, "%s must not be negative", what);
  if (c < '0' || c > '9')
    return perr(p, "%s must be a non-negative integer, found %s", what,
                what_is(p));
  size_t start = p->i;
  uint64_t v = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = (unsigned)(p->s[p->i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return perr(p, "%s does not fit in 64 bits", what);
    v = v * 10 + d;
    p->i++;
  }
  if (p->i - start > 1 && p->s[start] == '0') {
    p->i = start;
    return perr(p, "%s has a leading zero (not JSON)", what);
  }
  if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' ||
                      p->s[p->i] == 'E'))
    return perr(p, "%s must be an integer, found a fraction or exponent",
                what);
  *out = v;
  return 0;
}

/* Any JSON value, discarded (unknown members of a tensor entry). */
static int skip_value(parser *p, int depth) {
  if (depth > 64) return perr(p, "values nested more than 64 deep");
  int c = peek(p);
  if (c == '"') return parse_string(p, NULL);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    p->i++;
    if (peek(p) == close) { p->i++; return 0; }
    for (;;) {
      if (c == '{') {
        if (parse_string(p, NULL) != 0) return -1;
        if (expect(p, ':', "after a key") != 0) return -1;
      }
      if (skip_value(p, depth + 1) != 0) return -1;
      int d = peek(p);
      p->i++;
      if (d == close) return 0;
      if (d != ',') {
        p->i--;
        return perr(p, "expected ',' or '%c', found %s", close, what_is(p));
      }
    }
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int k = 0; k < 3; k++) {
    size_t len = strlen(words[k]);
    if (p->n - p->i >= len && memcmp(p->s + p->i, words[k], len) == 0) {
      p->i += len;
      return 0;
    }
  }
  /* A number: -?int frac? exp? */
  size_t start = p->i;
  if (p->i < p->n && p->s[p->i] == '-') p->i++;
  size_t digits = p->i;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
  if (p->i == digits) {
    p->i = start;
    return perr(p, "expected a value, found %s", what_is(p));
  }
  if (p->i < p->n && p->s[p->i] == '.') {
    p->i++;
    size_t f = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i == f) return perr(p, "a number needs digits after '.'");
  }
  if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
    p->i++;
    if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
    size_t f = p->i;
    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    if (p->i == f) return perr(p, "a number needs digits in its exponent");
  }
  return 0;
}

/* Calls member(p, key, arg) for each member of an object; key is malloc'd
 * and owned by the callee only for the call. */
typedef int (*member_fn)(parser *p, const char *key, void *arg);
static int parse_object(parser *p, member_fn member, void *arg,
                        const char *what) {
  if (peek(p) != '{')
    return perr(p, "%s must be an object, found %s", what, what_is(p));
  p->i++;
  if (peek(p) == '}') { p->i++; return 0; }
  for (;;) {
    char *key = NULL;
    if (parse_string(p, &key) != 0) return -1;
    int rc = expect(p, ':', "after a key");
    if (rc == 0) rc = member(p, key, arg);
    free(key);
    if (rc != 0) return -1;
    int c = peek(p);
    if (c == '}') { p->i++; return 0; }
    if (c != ',')
      return perr(p, "expected ',' or '}' in %s, found %s", what,
                  what_is(p));
    p->i++;
  }
}

/* ---- the header --------------------------------------------------------- */

typedef struct header {
  st_tensor *t;
  int n, cap;
  char **mk, **mv;
  int nmeta, metacap;
  int seen_meta;
} header;

typedef struct entry_state {
  st_tensor *t;
  int has_dtype, has_shape, has_offsets;
} entry_state;

static int entry_member(parser *p, const char *key, void *arg) {
  entry_state *s = arg;
  st_tensor *t = s->t;
  if (strcmp(key, "dtype") == 0) {
    if (s->has_dtype) return perr(p, "%s: \"dtype\" given twice", t->name);
    char *name = NULL;
    if (peek(p) != '"')
      return perr(p, "%s: \"dtype\" must be a string, found %s", t->name,
                  what_is(p));
    size_t at = p->i;
    if (parse_string(p, &name) != 0) return -1;
    int k;
    for (k = 0; k < ST_NDTYPES; k++)
      if (strcmp(name, dtypes[k].name) == 0) break;
    if (k == ST_NDTYPES) {
      p->i = at;
      perr(p, "%s: unknown dtype \"%s\"", t->name, name);
      free(name);
      return -1;
    }
    free(name);
    t->dtype = (st_dtype)k;
    s->has_dtype = 1;
    return 0;
  }
  if (strcmp(key, "shape") == 0) {
    if (s->has_shape) return perr(p, "%s: \"shape\" given twice", t->name);
    char what[128];
    snprintf(what, sizeof what, "%s: a dimension of \"shape\"", t->name);
    if (expect(p, '[', "to start \"shape\"") != 0) return -1;
    t->ndim = 0;
    if (peek(p) == ']') {
      p->i++;
    } else {
      for (;;) {
        uint64_t d;
        if (parse_uint(p, &d, what) != 0) return -1;
        if (t->ndim == ST_MAX_DIMS)
          return perr(p, "%s: more than %d dimensions", t->name,
                      ST_MAX_DIMS);
        if (d > (uint64_t)INT64_MAX)
          return perr(p, "%s: dimension %" PRIu64 " too large", t->name, d);
        t->shape[t->ndim++] = (int64_t)d;
        int c = peek(p);
        p->i++;
        if (c == ']') break;
        if (c != ',') {
          p->i--;
          return perr(p, "%s: expected ',' or ']' in \"shape\", found %s",
                      t->name, what_is(p));
        }
      }
    }
    s->has_shape = 1;
    return 0;
  }
  if (strcmp(key, "data_offsets") == 0) {
    if (s->has_offsets)
      return perr(p, "%s: \"data_offsets\" given twice", t->name);
    char what[128];
    snprintf(what, sizeof what, "%s: a data offset", t->name);
    if (expect(p, '[', "to start \"data_offsets\"") != 0) return -1;
    if (parse_uint(p, &t->begin, what) != 0) return -1;
    if (expect(p, ',', "between the two data offsets") != 0) return -1;
    if (parse_uint(p, &t->end, what) != 0) return -1;
    if (peek(p) != ']')
      return perr(p, "%s: \"data_offsets\" must hold exactly two numbers, "
                  "[begin, end]", t->name);
    p->i++;
    s->has_offsets = 1;
    return 0;
  }
  return skip_value(p, 1);   /* the reference ignores unknown members */
}

static int meta_member(parser *p, const char *key, void *arg) {
  header *h = arg;
  char *val = NULL;
  if (peek(p) != '"')
    return perr(p, "__metadata__: the value of \"%s\" must be a string, "
                "found %s", key, what_is(p));
  if (parse_string(p, &val) != 0) return -1;
  for (int i = 0; i < h->nmeta; i++)
    if (strcmp(h->mk[i], key) == 0) {
      free(val);
      return perr(p, "__metadata__: key \"%s\" given twice", key);
    }
  if (h->nmeta == h->metacap) {
    int cap = h->metacap ? 2 * h->metacap : 8;
    char **k = realloc(h->mk, (size_t)cap * sizeof *k);
    if (k) h->mk = k;
    char **v = realloc(h->mv, (size_t)cap * sizeof *v);
    if (v) h->mv = v;
    if (!k || !v) { free(val); return perr(p, "out of memory"); }
    h->metacap = cap;
  }
  h->mk[h->nmeta] = strdup(key);
  h->mv[h->nmeta] = val;
  if (h->mk[h->nmeta] == NULL) { free(val); return perr(p, "out of memory"); }
  h->nmeta++;
  return 0;
}

static int top_member(parser *p, const char *key, void *arg) {
  header *h = arg;
  if (strcmp(key, "__metadata__") == 0) {
    if (h->seen_meta) return perr(p, "\"__metadata__\" given twice");
    h->seen_meta = 1;
    return parse_object(p, meta_member, h, "__metadata__");
  }
  for (int i = 0; i < h->n; i++)
    if (strcmp(h->t[i].name, key) == 0)
      return perr(p, "tensor \"%s\" given twice", key);
  if (h->n == h->cap) {
    int cap = h->cap ? 2 * h->cap : 64;
    st_tensor *t = realloc(h->t, (size_t)cap * sizeof *t);
    if (t == NULL) return perr(p, "out of memory");
    h->t = t;
    h->cap = cap;
  }
  st_tensor *t = &h->t[h->n];
  memset(t, 0, sizeof *t);
  t->name = strdup(key);
  if (t->name == NULL) return perr(p, "out of memory");
  h->n++;
  entry_state s = {t, 0, 0, 0};
  size_t at = p->i;
  char what[128];
  snprintf(what, sizeof what, "tensor \"%.80s\"", key);
  if (parse_object(p, entry_member, &s, what) != 0) return -1;
  const char *missing = !s.has_dtype ? "dtype"
                        : !s.has_shape ? "shape"
                        : !s.has_offsets ? "data_offsets" : NULL;
  if (missing) {
    p->i = at;
    return perr(p, "%s: no \"%s\"", key, missing);
  }
  return 0;
}

/* Every tensor's size agrees with its shape, and the tensors tile
 * [0, data_len) exactly. */
static int check_offsets(st_file *f) {
  const char *path = f->path;
  int n = f->ntensors;
  st_tensor *t = f->tensors;
  for (int i = 0; i < n; i++) {
    size_t numel = 1;
    int overflow = 0;
    for (int d = 0; d < t[i].ndim; d++) {
      uint64_t s = (uint64_t)t[i].shape[d];
      if (s != 0 && numel > SIZE_MAX / s) overflow = 1;
      else numel *= (size_t)s;
    }
    size_t es = st_dtype_size(t[i].dtype);
    if (overflow || numel > SIZE_MAX / es) {
      char sh[256];
      fmt_shape(sh, sizeof sh, t[i].ndim, t[i].shape);
      FAIL(ERR_FAIL, "%s: %s: shape %s is too large", path, t[i].name, sh);
    }
    t[i].numel = numel;
    if (t[i].end < t[i].begin)
      FAIL(ERR_FAIL, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] end "
           "before they begin", path, t[i].name, t[i].begin, t[i].end);
    if (t[i].end - t[i].begin != (uint64_t)numel * es) {
      char sh[256];
      fmt_shape(sh, sizeof sh, t[i].ndim, t[i].shape);
      FAIL(ERR_FAIL, "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] hold "
           "%" PRIu64 " bytes, but shape %s of %s needs %zu", path,
           t[i].name, t[i].begin, t[i].end, t[i].end - t[i].begin, sh,
           st_dtype_name(t[i].dtype), numel * es);
    }
  }
  /* Sort an index by (begin, end): the tensors must then follow each other. */
  size_t nord = n > 0 ? (size_t)n : 1;
  int *ord = malloc(nord * sizeof *ord);
  CHECK_ALLOC(ord, nord * sizeof *ord);
  for (int i = 0; i < n; i++) ord[i] = i;
  for (int i = 1; i < n; i++) {   /* insertion sort: headers are small */
    int k = ord[i], j = i - 1;
    while (j >= 0 && (t[ord[j]].begin > t[k].begin ||
                      (t[ord[j]].begin == t[k].begin &&
                       t[ord[j]].end > t[k].end))) {
      ord[j + 1] = ord[j];
      j--;
    }
    ord[j + 1] = k;
  }
  uint64_t at = 0;
  int prev = -1;
  for (int i = 0; i < n; i++) {
    const st_tensor *c = &t[ord[i]];
    if (c->begin < at) {
      const st_tensor *q = &t[prev];
      char msg[512];
      snprintf(msg, sizeof msg,
               "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] overlap "
               "those of %s [%" PRIu64 ", %" PRIu64 "]", path, c->name,
               c->begin, c->end, q->name, q->begin, q->end);
      free(ord);
      FAIL(ERR_FAIL, "%s", msg);
    }
    if (c->begin > at) {
      char msg[512];
      snprintf(msg, sizeof msg,
               "%s: %s: data_offsets [%" PRIu64 ", %" PRIu64 "] leave a gap: "
               "no tensor holds data bytes [%" PRIu64 ", %" PRIu64 ")", path,
               c->name, c->begin, c->end, at, c->begin);
      free(ord);
      FAIL(ERR_FAIL, "%s", msg);
    }
    if (c->end > f->data_len) {
      char msg[512];
      snprintf(msg, sizeof msg,
               "%s: truncated: %s's data end at byte %" PRIu64 " of the "
               "data, but the file holds only %" PRIu64 " bytes of data",
               path, c->name, c->end, f->data_len);
      free(ord);
      FAIL(ERR_FAIL, "%s", msg);
    }
    at = c->end;
    prev = ord[i];
  }
  free(ord);
  if (at != f->data_len)
    FAIL(ERR_FAIL, "%s: %" PRIu64 " bytes of data after the last tensor "
         "(the tensors end at data byte %" PRIu64 ", the file has %" PRIu64
         ")", path, f->data_len - at, at, f->data_len);
  return 0;
}

static int open_inner(st_file *f) {
  const char *path = f->path;
  f->f = fopen(path, "rb");
  CHECK_SYS(f->f != NULL, "%s", path);
  struct stat st;
  CHECK_SYS(fstat(fileno(f->f), &st) == 0, "%s", path);
  uint64_t size = (uint64_t)st.st_size;
  unsigned char len8[8];
  if (size < 8)
    FAIL(ERR_FAIL, "%s: truncated: %" PRIu64 " bytes, too short to hold "
         "the 8-byte header length", path, size);
  if (fread(len8, 1, 8, f->f) != 8)
    FAIL(ERR_FAIL, "%s: cannot read the header length: %s", path,
         ferror(f->f) ? strerror(errno) : "end of file");
  uint64_t hlen = 0;
  for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | len8[k];
  if (hlen > ST_MAX_HEADER)
    FAIL(ERR_FAIL, "%s: header length %" PRIu64 " is over the format's "
         "limit of %u bytes (not a safetensors file?)", path, hlen,
         ST_MAX_HEADER);
  if (hlen > size - 8)
    FAIL(ERR_FAIL, "%s: truncated: the header length says %" PRIu64
         " bytes, but only %" PRIu64 " follow", path, hlen, size - 8);
  if (hlen == 0) FAIL(ERR_FAIL, "%s: the header is empty", path);
  char *text = malloc((size_t)hlen);
  CHECK_ALLOC(text, (size_t)hlen);
  if (fread(text, 1, (size_t)hlen, f->f) != (size_t)hlen) {
    free(text);
    FAIL(ERR_FAIL, "%s: cannot read the header: %s", path,
         ferror(f->f) ? strerror(errno) : "end of file");
  }
  f->data_start = 8 + hlen;
  f->data_len = size - 8 - hlen;

  parser p = {text, (size_t)hlen, 0, ""};
  header h = {0};
  int rc = 0;
  if (peek(&p) != '{') {
    perr(&p, "the header must be a JSON object, starting with '{', found %s",
         what_is(&p));
    rc = -1;
  }
  if (rc == 0) rc = parse_object(&p, top_member, &h, "the header");
  if (rc == 0 && peek(&p) != -1) {
    perr(&p, "%s after the header's closing '}'", what_is(&p));
    rc = -1;
  }
  free(text);
  f->tensors = h.t;
  f->ntensors = h.n;
  f->meta_keys = h.mk;
  f->meta_values = h.mv;
  f->nmeta = h.nmeta;
  if (rc != 0) FAIL(ERR_FAIL, "%s: malformed header: %s", path, p.err);
  TRY(check_offsets(f));
  return 0;
}

int st_open(st_file **out, const char *path) {
  *out = NULL;
  st_file *f = calloc(1, sizeof *f);
  CHECK_ALLOC(f, sizeof *f);
  f->path = strdup(path);
  if (f->path == NULL) {
    free(f);
    CHECK_ALLOC(NULL, strlen(path) + 1);
  }
  int rc = open_inner(f);
  if (rc < 0) {
    err_trace(__FILE__, __LINE__);
    st_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

void st_close(st_file *f) {
  if (f == NULL) return;
  if (f->f) fclose(f->f);
  for (int i = 0; i < f->ntensors; i++) free(f->tensors[i].name);
  free(f->tensors);
  for (int i = 0; i < f->nmeta; i++) {
    free(f->meta_keys[i]);
    free(f->meta_values[i]);
  }
  free(f->meta_keys);
  free(f->meta_values);
  free(f->path);
  free(f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
  for (int i = 0; i < f->ntensors; i++)
    if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
  return NULL;
}

const char *st_meta(const st_file *f, const char *key) {
  for (int i = 0; i < f->nmeta; i++)
    if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
  return NULL;
}

/* ---- reading data ------------------------------------------------------- */

/* The tensor's bytes, in this machine's byte order, into dst. */
static int read_raw(st_file *f, const st_tensor *t, void *dst) {
  size_t bytes = t->end - t->begin;
  if (bytes == 0) return 0;
  if (fseeko(f->f, (off_t)(f->data_start + t->begin), SEEK_SET) != 0)
    FAIL(ERR_FAIL, "%s: %s: seek: %s", f->path, t->name, strerror(errno));
  if (fread(dst, 1, bytes, f->f) != bytes)
    FAIL(ERR_FAIL, "%s: %s: cannot read its %zu bytes: %s", f->path, t->name,
         bytes, ferror(f->f) ? strerror(errno) : "the file ended early");
  if (!host_is_le()) byteswap(dst, t->numel, st_dtype_size(t->dtype));
  return 0;
}

static double half_to_double(uint16_t h) {
  int sign = h >> 15, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 0) v = ldexp((double)m, -24);                 /* subnormal */
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp((double)(m | 0x400), e - 25);
  return sign ? -v : v;
}

static double bf16_to_double(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* Tensor `name` as `n` doubles (floating dtypes) or int64s (integer
 * dtypes), malloc'd. */
static int read_conv(st_file *f, const char *name, int want_int, void **out,
                     const st_tensor **tp) {
  const st_tensor *t = st_find(f, name);
  *out = NULL;
  if (t == NULL) FAIL(ERR_FAIL, "%s: no tensor named %s", f->path, name);
  int is_float = t->dtype == ST_F64 || t->dtype == ST_F32 ||
                 t->dtype == ST_F16 || t->dtype == ST_BF16;
  int is_int = t->dtype == ST_I64 || t->dtype == ST_I32;
  if (want_int ? !is_int : !is_float)
    FAIL(ERR_FAIL, "%s: %s: dtype %s cannot be read as %s (%s)", f->path,
         name, st_dtype_name(t->dtype), want_int ? "int32" : "floating point",
         want_int ? "I64 or I32 can" : "F64, F32, F16 or BF16 can");
  size_t n = t->numel ? t->numel : 1;
  void *raw = malloc(n * st_dtype_size(t->dtype));
  CHECK_ALLOC(raw, n * st_dtype_size(t->dtype));
  void *conv = malloc(n * 8);
  if (conv == NULL) {
    free(raw);
    CHECK_ALLOC(NULL, n * 8);
  }
  int rc = read_raw(f, t, raw);
  if (rc < 0) {
    free(raw);
    free(conv);
    TRY(rc);
  }
  double *d = conv;
  int64_t *q = conv;
  for (size_t i = 0; i < t->numel; i++) {
    switch (t->dtype) {
    case ST_F64: d[i] = ((const double *)raw)[i]; break;
    case ST_F32: d[i] = ((const float *)raw)[i]; break;
    case ST_F16: d[i] = half_to_double(((const uint16_t *)raw)[i]); break;
    case ST_BF16: d[i] = bf16_to_double(((const uint16_t *)raw)[i]); break;
    case ST_I64: q[i] = ((const int64_t *)raw)[i]; break;
    case ST_I32: q[i] = ((const int32_t *)raw)[i]; break;
    default: break;
    }
  }
  free(raw);
  *out = conv;
  *tp = t;
  return 0;
}

int st_read_f64(st_file *f, const char *name, double **out, size_t *numel) {
  void *c;
  const st_tensor *t;
  TRY(read_conv(f, name, 0, &c, &t));
  *out = c;
  *numel = t->numel;
  return 0;
}

int st_read_f32(st_file *f, const char *name, float **out, size_t *numel) {
  void *c;
  const st_tensor *t;
  TRY(read_conv(f, name, 0, &c, &t));
  const double *d = c;
  float *x = (float *)c;   /* narrowing in place, front to back */
  for (size_t i = 0; i < t->numel; i++) x[i] = (float)d[i];
  *out = x;
  *numel = t->numel;
  return 0;
}

int st_read_i32(st_file *f, const char *name, int32_t **out, size_t *numel) {
  void *c;
  const st_tensor *t;
  TRY(read_conv(f, name, 1, &c, &t));
  const int64_t *q = c;
  int32_t *x = (int32_t *)c;
  for (size_t i = 0; i < t->numel; i++) {
    if (q[i] < INT32_MIN || q[i] > INT32_MAX) {
      int64_t bad = q[i];
      free(c);
      FAIL(ERR_FAIL, "%s: %s: element %zu = %" PRId64 " does not fit in "
           "int32", f->path, name, i, bad);
    }
    x[i] = (int32_t)q[i];
  }
  *out = x;
  *numel = t->numel;
  return 0;
}

/* ---- writing ------------------------------------------------------------ */

static void json_str(FILE *o, const char *s) {
  fputc('"', o);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') fprintf(o, "\\%c", *c);
    else if (*c < 0x20) fprintf(o, "\\u%04x", *c);
    else fputc(*c, o);
  }
  fputc('"', o);
}

/* The JSON header for n tensors stored back to back in the given order,
 * padded with spaces to a multiple of 8 bytes as the reference writes it
 * (so the data start aligned). *text is malloc'd. */
static int make_header(const char *path, const st_entry *t, int n,
                       char **text, size_t *len) {
  char *buf = NULL;
  size_t size = 0;
  FILE *o = open_memstream(&buf, &size);
  CHECK_SYS(o != NULL, "open_memstream");
  fputs("{\"__metadata__\":{\"format\":\"pt\"}", o);
  uint64_t at = 0;
  for (int i = 0; i < n; i++) {
    size_t numel = 1;
    for (int d = 0; d < t[i].ndim; d++) numel *= (size_t)t[i].shape[d];
    uint64_t bytes = (uint64_t)numel * st_dtype_size(t[i].dtype);
    fputc(',', o);
    json_str(o, t[i].name);
    fprintf(o, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(t[i].dtype));
    for (int d = 0; d < t[i].ndim; d++)
      fprintf(o, "%s%" PRId64, d ? "," : "", t[i].shape[d]);
    fprintf(o, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", at,
            at + bytes);
    at += bytes;
  }
  fputc('}', o);
  while ((ftello(o) + 8) % 8 != 0) fputc(' ', o);
  if (fclose(o) != 0) {
    free(buf);
    FAIL(ERR_FAIL, "%s: building the header failed", path);
  }
  *text = buf;
  *len = size;
  return 0;
}

typedef int (*data_fn)(int i, FILE *o, void *arg);

static int write_file(const char *path, const st_entry *t, int n, data_fn data,
                      void *arg) {
  for (int i = 0; i < n; i++) {
    if (t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS)
      FAIL(ERR_FAIL, "%s: %s: %d dimensions (0..%d allowed)", path,
           t[i].name, t[i].ndim, ST_MAX_DIMS);
    for (int d = 0; d < t[i].ndim; d++)
      if (t[i].shape[d] < 0)
        FAIL(ERR_FAIL, "%s: %s: negative dimension %" PRId64, path,
             t[i].name, t[i].shape[d]);
    for (int j = 0; j < i; j++)
      if (strcmp(t[i].name, t[j].name) == 0)
        FAIL(ERR_FAIL, "%s: tensor %s given twice", path, t[i].name);
  }
  char *text = NULL;
  size_t len = 0;
  TRY(make_header(path, t, n, &text, &len));
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *o = fopen(tmp, "wb");
  if (o == NULL) {
    free(text);
    CHECK_SYS(0, "%s", tmp);
  }
  unsigned char len8[8];
  for (int k = 0; k < 8; k++)
    len8[k] = (unsigned char)((uint64_t)len >> (8 * k));
  int ok = fwrite(len8, 1, 8, o) == 8 && fwrite(text, 1, len, o) == len;
  free(text);
  int rc = 0;
  for (int i = 0; i < n && ok && rc == 0; i++) rc = data(i, o, arg);
  if (fclose(o) != 0) ok = 0;
  if (rc == 0 && !ok) {
    int e = errno;
    remove(tmp);
    FAIL(ERR_FAIL, "%s: write failed: %s", tmp, strerror(e));
  }
  if (rc < 0) {
    remove(tmp);
    TRY(rc);
  }
  if (rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    FAIL(ERR_FAIL, "%s: cannot rename %s to it: %s", path, tmp, strerror(e));
  }
  return 0;
}

/* Write n elements of `size` bytes little-endian. */
static int write_le(FILE *o, const void *p, size_t n, size_t size) {
  if (host_is_le() || size == 1) return fwrite(p, size, n, o) == n ? 0 : -1;
  unsigned char e[8];
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++, b += size) {
    for (size_t k = 0; k < size; k++) e[k] = b[size - 1 - k];
    if (fwrite(e, 1, size, o) != size) return -1;
  }
  return 0;
}

static int entry_data(int i, FILE *o, void *arg) {
  const st_entry *t = (const st_entry *)arg + i;
  size_t numel = 1;
  for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
  if (numel == 0) return 0;
  if (write_le(o, t->data, numel, st_dtype_size(t->dtype)) != 0)
    FAIL(ERR_FAIL, "%s: write failed: %s", t->name, strerror(errno));
  return 0;
}

int st_write(const char *path, const st_entry *t, int n) {
  TRY(write_file(path, t, n, entry_data, (void *)t));
  return 0;
}

/* ---- the model ---------------------------------------------------------- */

typedef struct save_state {
  model *m;
  float *host;   /* room for the largest tensor */
} save_state;

static int param_data(int i, FILE *o, void *arg) {
  save_state *s = arg;
  const tensor_view *v = &s->m->views[i];
  TRY(eng_download(s->m->e, s->host, s->m->params + v->offset,
                   v->numel * sizeof(float)));
  TRY(eng_sync(s->m->e));
  if (write_le(o, s->host, v->numel, sizeof(float)) != 0)
    FAIL(ERR_FAIL, "%s: write failed: %s", v->name, strerror(errno));
  return 0;
}

static size_t largest(const model *m) {
  size_t most = 1;
  for (int i = 0; i < m->nviews; i++)
    if (m->views[i].numel > most) most = m->views[i].numel;
  return most;
}

int st_save_model(model *m, const char *path) {
  if (m->opt.bound_weights)
    FAIL(ERR_FAIL, "%s: the model's weight matrices are bound from outside "
         "(model_options.bound_weights): whoever shards them saves them",
         path);
  st_entry *t = calloc((size_t)m->nviews, sizeof *t);
  CHECK_ALLOC(t, (size_t)m->nviews * sizeof *t);
  for (int i = 0; i < m->nviews; i++) {
    const tensor_view *v = &m->views[i];
    t[i].name = v->name;
    t[i].dtype = ST_F32;
    t[i].ndim = v->ndim;
    for (int d = 0; d < v->ndim; d++) t[i].shape[d] = v->shape[d];
  }
  save_state s = {m, malloc(largest(m) * sizeof(float))};
  int rc;
  if (s.host == NULL) {
    rc = err_set(ERR_OOM, __FILE__, __LINE__,
                 "out of host memory allocating %zu bytes",
                 largest(m) * sizeof(float));
  } else {
    rc = write_file(path, t, m->nviews, param_data, &s);
  }
  free(s.host);
  free(t);
  TRY(rc);
  return 0;
}

/* The file agrees with the model: every parameter there, F32, with its
 * shape; no other tensor. */
static int check_against(const st_file *f, const model *m) {
  char want[64], have[256];
  for (int i = 0; i < m->nviews; i++) {
    const tensor_view *v = &m->views[i];
    int64_t vs[2] = {v->shape[0], v->shape[1]};
    fmt_shape(want, sizeof want, v->ndim, vs);
    const st_tensor *t = st_find(f, v->name);
    if (t == NULL) {
      const char *extra = NULL;   /* a renamed tensor shows up as both */
      for (int k = 0; k < f->ntensors && !extra; k++)
        if (model_view(m, f->tensors[k].name) == NULL)
          extra = f->tensors[k].name;
      FAIL(ERR_FAIL, "%s: %s: missing from the file (the model needs F32 "
           "%s)%s%s", f->path, v->name, want,
           extra ? "; the file has instead " : "", extra ? extra : "");
    }
    fmt_shape(have, sizeof have, t->ndim, t->shape);
    int same = t->ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++)
      same = t->shape[d] == v->shape[d];
    if (!same)
      FAIL(ERR_FAIL, "%s: %s: shape %s in file, the model needs %s", f->path,
           v->name, have, want);
    if (t->dtype != ST_F32)
      FAIL(ERR_FAIL, "%s: %s: dtype %s in file, the model needs F32",
           f->path, v->name, st_dtype_name(t->dtype));
  }
  for (int i = 0; i < f->ntensors; i++)
    if (model_view(m, f->tensors[i].name) == NULL)
      FAIL(ERR_FAIL, "%s: %s: in the file but not a parameter of this model",
           f->path, f->tensors[i].name);
  return 0;
}

static int load_inner(st_file *f, model *m, float *host) {
  TRY(check_against(f, m));
  for (int i = 0; i < m->nviews; i++) {
    const tensor_view *v = &m->views[i];
    TRY(read_raw(f, st_find(f, v->name), host));
    TRY(model_set_params(m, v->offset, host, v->numel));
    TRY(eng_sync(m->e));   /* before `host` is read into again */
  }
  return 0;
}

int st_load_model(model *m, const char *path) {
  st_file *f;
  TRY(st_open(&f, path));
  float *host = malloc(largest(m) * sizeof(float));
  if (host == NULL) {
    st_close(f);
    CHECK_ALLOC(NULL, largest(m) * sizeof(float));
  }
  int rc = load_inner(f, m, host);
  free(host);
  st_close(f);
  TRY(rc);
  return 0;
}
