/* model/safetensors.c: the model saved and loaded back bit for bit (with
 * RMSNorm and with LayerNorm, whose biases are parameters too); every
 * dtype read and converted; headers the format allows (escapes, odd
 * whitespace, unknown members, scalars, empty tensors, data in another
 * order than the header); and every way a file can be wrong, each rejected
 * with a message that names the tensor or the problem. The PyTorch-written
 * fixture (tests/data/fixture_tiny.safetensors) is opened too when present.
 * Exit 0 when every check passes, 1 when one fails, 99 when the test cannot
 * run (no temporary folder, no engine). */
#include "config.h"
#include "tests/testlib.h"
#include "model/model.h"
#include "model/safetensors.h"

#include "common/check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256];
static engine *E;



static void hard_sys(int ok, const char *what) {
  if (ok) return;
  fprintf(stderr, "test_safetensors: %s: %s\n", what, strerror(errno));
  exit(99);
}

/* The error's first line: the "at file:line" trace adds nothing here. */
static const char *msg(void) {
  static char buf[1024];
  err_first_line(buf, sizeof buf);
  return buf;
}

static const char *path_of(const char *name) {
  static char buf[8][512];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 512, "%s/%s", dir, name);
  return p;
}

/* A file of 8-byte length, `header`, then `ndata` bytes of data. */
static void write_raw(const char *path, const char *header, const void *data,
                      size_t ndata) {
  FILE *f = fopen(path, "wb");
  hard_sys(f != NULL, path);
  uint64_t n = strlen(header);
  unsigned char len[8];
  for (int k = 0; k < 8; k++) len[k] = (unsigned char)(n >> (8 * k));
  hard_sys(fwrite(len, 1, 8, f) == 8, path);
  hard_sys(fwrite(header, 1, n, f) == n, path);
  if (ndata) hard_sys(fwrite(data, 1, ndata, f) == ndata, path);
  hard_sys(fclose(f) == 0, path);
}

static long file_size(const char *path) {
  FILE *f = fopen(path, "rb");
  hard_sys(f != NULL, path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fclose(f);
  return n;
}

/* st_open fails and its message holds `want`. */
static void rejects(const char *what, const char *path, const char *want) {
  st_file *f;
  err_clear();
  int rc = st_open(&f, path);
  if (rc == 0) st_close(f);
  check(rc == ERR_FAIL && strstr(msg(), want) != NULL,
        "%s rejected, \"%s\": %s", what, want, rc == 0 ? "(accepted)" : msg());
}

static void rejects_header(const char *what, const char *header,
                           size_t ndata, const char *want) {
  static const unsigned char zeros[64];
  const char *p = path_of("bad.safetensors");
  write_raw(p, header, zeros, ndata);
  rejects(what, p, want);
}

static model *make(uint64_t seed) {
  model_config c;
  model *m;
  model_config_by_name("tiny", &c);
  hard(model_create(&m, E, &c, 1, 4, DT_F32), "model_create");
  hard(model_init(m, seed), "model_init");
  return m;
}

static float *params_of(model *m) {
  size_t n = model_nparams(m);
  float *h = malloc(n * sizeof *h);
  hard(h ? 0 : ERR_OOM, "malloc");
  hard(eng_download(E, h, model_params(m), n * sizeof *h), "download");
  hard(eng_sync(E), "sync");
  return h;
}

/* ---- the model, saved and loaded ---------------------------------------- */

static void test_round_trip(void) {
  model *a = make(1), *b = make(2);
  const char *p = path_of("tiny.safetensors");
  int rc = st_save_model(a, p);
  check(rc == 0, "st_save_model writes %s%s%s", p, rc ? ": " : "",
        rc ? msg() : "");
  check(access(path_of("tiny.safetensors.tmp"), F_OK) != 0,
        "no temporary file is left behind");
  rc = st_load_model(b, p);
  check(rc == 0, "st_load_model reads it back%s%s", rc ? ": " : "",
        rc ? msg() : "");
  float *pa = params_of(a), *pb = params_of(b);
  check(memcmp(pa, pb, model_nparams(a) * sizeof *pa) == 0,
        "all %zu parameters equal bit for bit after the round trip",
        model_nparams(a));
  free(pa);
  free(pb);

  st_file *f;
  hard(st_open(&f, p), "st_open");
  int nv;
  const tensor_view *v = model_views(a, &nv);
  int same = f->ntensors == nv;
  for (int i = 0; same && i < nv; i++) {
    const st_tensor *t = &f->tensors[i];
    same = strcmp(t->name, v[i].name) == 0 && t->dtype == ST_F32 &&
           t->ndim == v[i].ndim && t->shape[0] == v[i].shape[0] &&
           (t->ndim == 1 || t->shape[1] == v[i].shape[1]) &&
           t->begin == v[i].offset * 4;
  }
  check(same, "the file holds the %d parameters in state_dict order, F32, "
        "with the reference's shapes, back to back", nv);
  check(f->data_start % 8 == 0, "the data start 8-byte aligned (at %llu)",
        (unsigned long long)f->data_start);
  const char *fmt = st_meta(f, "format");
  check(fmt && strcmp(fmt, "pt") == 0, "metadata format = \"pt\" (%s)",
        fmt ? fmt : "absent");
  float *w;
  size_t n;
  hard(st_read_f32(f, "lm_head.weight", &w, &n), "st_read_f32");
  float *pw = params_of(a);
  const tensor_view *lm = model_view(a, "lm_head.weight");
  check(n == lm->numel &&
            memcmp(w, pw + lm->offset, n * sizeof *w) == 0,
        "st_read_f32 of lm_head.weight gives the model's values");
  free(w);
  free(pw);
  st_close(f);
  model_destroy(a);
  model_destroy(b);
}

/* Write the tiny model's parameters with one change made by `edit`, then
 * check that loading fails with `want` in the message. */
typedef void (*edit_fn)(st_entry *t, int *n, float *extra);

static void load_rejects(const char *what, edit_fn edit, const char *want) {
  model *m = make(3);
  int nv;
  const tensor_view *v = model_views(m, &nv);
  float *p = params_of(m);
  st_entry *t = calloc((size_t)nv + 1, sizeof *t);
  hard(t ? 0 : ERR_OOM, "calloc");
  static double wide[64 * 32];
  for (int i = 0; i < nv; i++) {
    t[i].name = v[i].name;
    t[i].dtype = ST_F32;
    t[i].ndim = v[i].ndim;
    t[i].shape[0] = v[i].shape[0];
    t[i].shape[1] = v[i].shape[1];
    t[i].data = p + v[i].offset;
  }
  for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) wide[i] = 0.5;
  int n = nv;
  edit(t, &n, (float *)wide);
  const char *path = path_of("edited.safetensors");
  hard(st_write(path, t, n), "st_write");
  float *before = params_of(m);
  err_clear();
  int rc = st_load_model(m, path);
  float *after = params_of(m);
  check(rc == ERR_FAIL && strstr(msg(), want) != NULL &&
            memcmp(before, after, model_nparams(m) * sizeof *after) == 0,
        "%s: load fails, parameters untouched, \"%s\": %s", what, want,
        rc == 0 ? "(loaded)" : msg());
  free(before);
  free(after);
  free(p);
  free(t);
  model_destroy(m);
}

static void e_rename(st_entry *t, int *n, float *x) {
  (void)n, (void)x;
  t[2].name = "layers.0.attn.q.weight";
}
static void e_shape(st_entry *t, int *n, float *x) {
  (void)n, (void)x;
  t[2].shape[1] = 16;   /* q_proj [32, 32] -> [32, 16] */
}
static void e_dtype(st_entry *t, int *n, float *x) {
  (void)n;
  t[1].dtype = ST_F64;  /* layers.0.ln1.weight as F64 */
  t[1].data = x;
}
static void e_extra(st_entry *t, int *n, float *x) {
  t[*n] = t[*n - 2];
  t[*n].name = "lm_head.bias";
  t[*n].ndim = 1;
  t[*n].shape[0] = 64;
  t[*n].data = x;
  (*n)++;
}
static void e_missing(st_entry *t, int *n, float *x) {
  (void)t, (void)x;
  (*n)--;               /* drop lm_head.weight */
}
static void e_ndim(st_entry *t, int *n, float *x) {
  (void)n, (void)x;
  t[19].ndim = 2;       /* ln_final.weight [32] -> [32, 1] */
  t[19].shape[1] = 1;
}

static void test_load_errors(void) {
  load_rejects("a tensor renamed", e_rename,
               "layers.0.attn.q_proj.weight: missing from the file (the "
               "model needs F32 [32, 32]); the file has instead "
               "layers.0.attn.q.weight");
  load_rejects("a wrong shape", e_shape,
               "layers.0.attn.q_proj.weight: shape [32, 16] in file, the "
               "model needs [32, 32]");
  load_rejects("a wrong number of dimensions", e_ndim,
               "ln_final.weight: shape [32, 1] in file, the model needs [32]");
  load_rejects("a wrong dtype", e_dtype,
               "layers.0.ln1.weight: dtype F64 in file, the model needs F32");
  load_rejects("an extra tensor", e_extra,
               "lm_head.bias: in the file but not a parameter of this model");
  load_rejects("a missing tensor", e_missing,
               "lm_head.weight: missing from the file (the model needs F32 "
               "[64, 32])");

  /* A model of another size. */
  model_config c;
  model_config_by_name("nano", &c);
  model *nano;
  hard(model_create(&nano, E, &c, 1, 4, DT_F32), "model_create");
  hard(model_init(nano, 1), "model_init");
  const char *p = path_of("nano.safetensors");
  hard(st_save_model(nano, p), "st_save_model");
  model *tiny = make(4);
  err_clear();
  int rc = st_load_model(tiny, p);
  check(rc == ERR_FAIL &&
            strstr(msg(), "token_embeddings.weight: shape [16, 8] in file, "
                          "the model needs [64, 32]") != NULL,
        "a nano checkpoint into a tiny model fails: %s", msg());
  err_clear();
  rc = st_load_model(tiny, path_of("absent.safetensors"));
  check(rc == ERR_FAIL &&
            strstr(msg(), "absent.safetensors: No such file") != NULL,
        "a missing file fails: %s", msg());
  model_destroy(tiny);
  model_destroy(nano);
}

/* ---- a LayerNorm model's checkpoint ------------------------------------ */

/* The biases are parameters like the others: saved under torch.nn.
 * LayerNorm's names, each after its weight, and loaded back bit for bit
 * (random values, never zero, so a bias left out or swapped shows); a
 * checkpoint of the other norm is refused, naming the tensor. */
static void test_layernorm(void) {
  model_config c;
  model_config_by_name("tiny", &c);
  c.norm = NORM_LAYER;
  model *a, *b, *rms = make(6);
  hard(model_create(&a, E, &c, 1, 4, DT_F32), "model_create");
  hard(model_create(&b, E, &c, 1, 4, DT_F32), "model_create");
  hard(model_init(b, 5), "model_init");
  size_t np = model_nparams(a);
  float *w = malloc(np * sizeof *w);
  hard(w ? 0 : ERR_OOM, "malloc");
  unsigned s = 2024;
  for (size_t i = 0; i < np; i++) {
    s = s * 1103515245u + 12345u;
    float u = (float)((s >> 8) & 0xffff) / 65536.0f;   /* [0, 1) */
    w[i] = (s & 1 ? 1.0f : -1.0f) * (0.1f + 0.9f * u);
  }
  hard(model_set_params(a, 0, w, np), "model_set_params");
  const char *p = path_of("tiny_layernorm.safetensors");
  hard(st_save_model(a, p), "st_save_model");
  st_file *f;
  hard(st_open(&f, p), "st_open");
  int nv;
  const tensor_view *v = model_views(a, &nv);
  int same = f->ntensors == nv && nv == 4 + 11 * c.layers;
  for (int i = 0; same && i < nv; i++)
    same = strcmp(f->tensors[i].name, v[i].name) == 0 &&
           f->tensors[i].begin == v[i].offset * 4;
  check(same && strcmp(f->tensors[2].name, "layers.0.ln1.bias") == 0 &&
            strcmp(f->tensors[nv - 2].name, "ln_final.bias") == 0,
        "a LayerNorm model's file holds its %d tensors, each bias after its "
        "weight, back to back", nv);
  st_close(f);
  int rc = st_load_model(b, p);
  check(rc == 0, "st_load_model reads the LayerNorm checkpoint%s%s",
        rc ? ": " : "", rc ? msg() : "");
  float *pb = params_of(b);
  check(memcmp(w, pb, np * sizeof *w) == 0,
        "all %zu parameters, biases included, equal bit for bit", np);
  free(pb);
  err_clear();
  rc = st_load_model(rms, p);
  check(rc == ERR_FAIL && strstr(msg(), "layers.0.ln1.bias: in the file but "
                                        "not a parameter of this model"),
        "the LayerNorm checkpoint into an RMSNorm model fails: %s", msg());
  const char *q = path_of("tiny_rmsnorm.safetensors");
  hard(st_save_model(rms, q), "st_save_model");
  err_clear();
  rc = st_load_model(b, q);
  check(rc == ERR_FAIL && strstr(msg(), "layers.0.ln1.bias: missing from "
                                        "the file"),
        "an RMSNorm checkpoint into a LayerNorm model fails: %s", msg());
  free(w);
  model_destroy(a);
  model_destroy(b);
  model_destroy(rms);
}

/* ---- truncation --------------------------------------------------------- */

static void truncate_copy(const char *src, const char *dst, long keep) {
  FILE *f = fopen(src, "rb");
  hard_sys(f != NULL, src);
  char *buf = malloc((size_t)keep + 1);
  hard_sys(buf != NULL, "malloc");
  hard_sys(fread(buf, 1, (size_t)keep, f) == (size_t)keep, src);
  fclose(f);
  FILE *o = fopen(dst, "wb");
  hard_sys(o != NULL, dst);
  hard_sys(fwrite(buf, 1, (size_t)keep, o) == (size_t)keep, dst);
  hard_sys(fclose(o) == 0, dst);
  free(buf);
}

static void test_truncated(void) {
  model *m = make(5);
  const char *full = path_of("full.safetensors");
  hard(st_save_model(m, full), "st_save_model");
  long size = file_size(full);
  const char *cut = path_of("cut.safetensors");
  truncate_copy(full, cut, size - 10);
  rejects("a file missing its last 10 bytes", cut,
          "truncated: lm_head.weight's data end at byte 86656 of the data, "
          "but the file holds only 86646 bytes of data");
  truncate_copy(full, cut, 100);
  rejects("a file cut inside its header", cut, "truncated: the header length "
          "says");
  truncate_copy(full, cut, 5);
  rejects("a 5-byte file", cut,
          "truncated: 5 bytes, too short to hold the 8-byte header length");
  truncate_copy(full, cut, 0);
  rejects("an empty file", cut, "truncated: 0 bytes");
  err_clear();
  model *n = make(6);
  int rc = st_load_model(n, cut);
  check(rc == ERR_FAIL && strstr(msg(), "truncated") != NULL,
        "st_load_model refuses a truncated file too: %s", msg());
  model_destroy(n);
  model_destroy(m);
}

/* ---- headers ------------------------------------------------------------ */

#define T1 "\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]"

static void test_malformed(void) {
  rejects_header("an unclosed object", "{\"a\":{" T1 "}", 4,
                 "header byte 53: expected ',' or '}' in the header, found "
                 "the end of the header");
  rejects_header("not JSON", "hello", 0,
                 "the header must be a JSON object, starting with '{', found "
                 "'h'");
  rejects_header("an array", "[1, 2]", 0, "must be a JSON object");
  rejects_header("a missing colon", "{\"a\" {" T1 "}}", 4,
                 "expected ':' after a key, found '{'");
  rejects_header("a trailing comma", "{\"a\":{" T1 "},}", 4,
                 "expected a string, found '}'");
  rejects_header("garbage after the object", "{\"a\":{" T1 "}} x", 4,
                 "'x' after the header's closing '}'");
  rejects_header("an unknown escape", "{\"a\\q\":{" T1 "}}", 4,
                 "unknown escape \\'q'");
  rejects_header("a short \\u escape", "{\"a\\u12\":{" T1 "}}", 4,
                 "\\u escape needs 4 hex digits, found '\"'");
  rejects_header("a lone surrogate", "{\"a\\udc00\":{" T1 "}}", 4,
                 "\\uDC00 is a lone low surrogate");
  rejects_header("an unpaired high surrogate", "{\"a\\ud83dx\":{" T1 "}}", 4,
                 "\\uD83D (a high surrogate) is not followed by a low "
                 "surrogate");
  rejects_header("a raw newline in a string", "{\"a\nb\":{" T1 "}}", 4,
                 "control character 0x0a inside a string");
  rejects_header("invalid UTF-8 in a name", "{\"a\xff\":{" T1 "}}", 4,
                 "invalid UTF-8 inside a string");
  rejects_header("an unclosed string", "{\"abc", 0, "string not closed");
  rejects_header("an unknown dtype",
                 "{\"w\":{\"dtype\":\"F128\",\"shape\":[1],"
                 "\"data_offsets\":[0,4]}}", 4,
                 "w: unknown dtype \"F128\"");
  rejects_header("a negative dimension",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],"
                 "\"data_offsets\":[0,4]}}", 4,
                 "w: a dimension of \"shape\" must not be negative");
  rejects_header("a fractional dimension",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],"
                 "\"data_offsets\":[0,4]}}", 4,
                 "w: a dimension of \"shape\" must be an integer, found a "
                 "fraction or exponent");
  rejects_header("a dimension with a leading zero",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[01],"
                 "\"data_offsets\":[0,4]}}", 4, "has a leading zero");
  rejects_header("a string as a dimension",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"1\"],"
                 "\"data_offsets\":[0,4]}}", 4,
                 "w: a dimension of \"shape\" must be a non-negative "
                 "integer, found '\"'");
  rejects_header("three data offsets",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,4,8]}}", 8,
                 "w: \"data_offsets\" must hold exactly two numbers");
  rejects_header("no data_offsets", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}",
                 4, "w: no \"data_offsets\"");
  rejects_header("no dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}",
                 4, "w: no \"dtype\"");
  rejects_header("a dtype given twice",
                 "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,4]}}", 4, "w: \"dtype\" given twice");
  rejects_header("a tensor given twice", "{\"w\":{" T1 "},\"w\":{" T1 "}}", 4,
                 "tensor \"w\" given twice");
  rejects_header("a tensor entry that is not an object", "{\"w\":[1]}", 0,
                 "tensor \"w\" must be an object, found '['");
  rejects_header("a metadata value that is not a string",
                 "{\"__metadata__\":{\"step\":3}}", 0,
                 "__metadata__: the value of \"step\" must be a string, "
                 "found '3'");
  rejects_header("a size that disagrees with the shape",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,8]}}", 8,
                 "w: data_offsets [0, 8] hold 8 bytes, but shape [1] of F32 "
                 "needs 4");
  rejects_header("offsets that end before they begin",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],"
                 "\"data_offsets\":[4,0]}}", 4,
                 "w: data_offsets [4, 0] end before they begin");
  rejects_header("overlapping tensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
                 "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\","
                 "\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                 "b: data_offsets [4, 8] overlap those of a [0, 8]");
  rejects_header("a gap between tensors",
                 "{\"a\":{" T1 "},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[8,12]}}", 12,
                 "b: data_offsets [8, 12] leave a gap: no tensor holds data "
                 "bytes [4, 8)");
  rejects_header("data after the last tensor", "{\"a\":{" T1 "}}", 6,
                 "2 bytes of data after the last tensor");
  rejects_header("an empty header", "", 0, "the header is empty");

  /* A header length far beyond the file. */
  const char *p = path_of("huge.safetensors");
  FILE *f = fopen(p, "wb");
  hard_sys(f != NULL, p);
  unsigned char len[8] = {0, 0, 0, 0, 1, 0, 0, 0};   /* 2^32 */
  hard_sys(fwrite(len, 1, 8, f) == 8 && fputs("{}", f) >= 0, p);
  hard_sys(fclose(f) == 0, p);
  rejects("a header length of 2^32", p,
          "header length 4294967296 is over the format's limit");
}

/* ---- what the format allows --------------------------------------------- */

static void test_accepted(void) {
  /* Escapes (quote, backslash, \u00e9, a surrogate pair), whitespace of
   * every kind, unknown members of any JSON type, metadata, tensors whose
   * data are in another order than the header, a scalar and an empty
   * tensor. */
  const char *header =
      " \t\r\n{ \"__metadata__\" : { \"note\" : \"line\\nbreak \\\"q\\\"\" } ,"
      "\n  \"b\\\"\\\\\\u00e9\\ud83d\\ude00\" : { \"data_offsets\" : [ 8 , 12 ]"
      " , \"shape\" : [ ] , \"dtype\" : \"I32\" , \"x\" : [ 1, -2.5e+3, true,"
      " null, { \"y\" : false } ] } ,"
      "\n  \"a\" : { \"dtype\" : \"F32\" , \"shape\" : [ 2 , 1 ] ,"
      " \"data_offsets\" : [ 0 , 8 ] } ,"
      "\n  \"z\" : { \"dtype\" : \"F64\" , \"shape\" : [ 0 , 3 ] ,"
      " \"data_offsets\" : [ 12 , 12 ] } }   ";
  unsigned char data[12];
  float a[2] = {1.5f, -2.25f};
  int32_t b = -7;
  memcpy(data, a, 8);
  memcpy(data + 8, &b, 4);
  const char *p = path_of("odd.safetensors");
  write_raw(p, header, data, sizeof data);
  st_file *f;
  err_clear();
  int rc = st_open(&f, p);
  check(rc == 0, "a header with escapes, odd whitespace, unknown members, "
        "a scalar and an empty tensor opens%s%s", rc ? ": " : "",
        rc ? msg() : "");
  if (rc != 0) return;
  const char *name = "b\"\\\xc3\xa9\xf0\x9f\x98\x80";
  const st_tensor *tb = st_find(f, name);
  check(f->ntensors == 3 && tb != NULL,
        "3 tensors; the escaped name decodes to b\"\\\\e-acute and U+1F600");
  check(tb && tb->ndim == 0 && tb->numel == 1 && tb->dtype == ST_I32,
        "the scalar: shape [], 1 element, I32");
  const char *note = st_meta(f, "note");
  check(note && strcmp(note, "line\nbreak \"q\"") == 0,
        "metadata with escapes: note = \"line\\nbreak \\\"q\\\"\"");
  int32_t *iv;
  size_t n;
  if (tb) {
    rc = st_read_i32(f, name, &iv, &n);
    check(rc == 0 && n == 1 && iv[0] == -7, "the scalar reads as -7");
    if (rc == 0) free(iv);
  }
  double *dv;
  rc = st_read_f64(f, "a", &dv, &n);
  check(rc == 0 && n == 2 && dv[0] == 1.5 && dv[1] == -2.25,
        "a [2, 1] F32 reads as 1.5, -2.25");
  if (rc == 0) free(dv);
  rc = st_read_f64(f, "z", &dv, &n);
  check(rc == 0 && n == 0, "the empty tensor z [0, 3] reads as 0 values");
  if (rc == 0) free(dv);
  err_clear();
  rc = st_read_i32(f, "a", &iv, &n);
  check(rc == ERR_FAIL &&
            strstr(msg(), "a: dtype F32 cannot be read as int32") != NULL,
        "F32 read as int32 fails: %s", msg());
  err_clear();
  rc = st_read_f64(f, "nothere", &dv, &n);
  check(rc == ERR_FAIL &&
            strstr(msg(), "no tensor named nothere") != NULL,
        "an absent tensor fails: %s", msg());
  st_close(f);

  write_raw(p, "{}", NULL, 0);
  rc = st_open(&f, p);
  check(rc == 0 && f->ntensors == 0, "\"{}\" with no data: no tensors");
  if (rc == 0) st_close(f);
}

/* ---- every dtype -------------------------------------------------------- */

static void test_dtypes(void) {
  const double d64[3] = {1.0 / 3.0, -1e300, 0x1p-1074};
  const float d32[3] = {0.1f, -3.5f, 0x1p-149f};
  /* F16: 1, -2, the smallest subnormal 2^-24, 65504, -inf. */
  const uint16_t f16[5] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0xFC00};
  /* BF16: 1, -3.140625, 2^-133 (subnormal). */
  const uint16_t bf16[3] = {0x3F80, 0xC049, 0x0001};
  const int64_t i64[3] = {-5, 2147483647, -2147483648LL};
  const int32_t i32[2] = {42, -42};
  const int64_t big[1] = {2147483648LL};
  st_entry t[] = {
      {"f64", ST_F64, 1, {3}, d64},   {"f32", ST_F32, 2, {1, 3}, d32},
      {"f16", ST_F16, 1, {5}, f16},   {"bf16", ST_BF16, 1, {3}, bf16},
      {"i64", ST_I64, 1, {3}, i64},   {"i32", ST_I32, 1, {2}, i32},
      {"big", ST_I64, 1, {1}, big},
  };
  const char *p = path_of("dtypes.safetensors");
  hard(st_write(p, t, 7), "st_write");
  st_file *f;
  hard(st_open(&f, p), "st_open");
  double *d;
  float *x;
  int32_t *q;
  size_t n;
  hard(st_read_f64(f, "f64", &d, &n), "read");
  check(n == 3 && d[0] == d64[0] && d[1] == d64[1] && d[2] == d64[2],
        "F64 reads exactly, subnormals included");
  free(d);
  hard(st_read_f32(f, "f64", &x, &n), "read");
  check(n == 3 && x[0] == (float)d64[0] && isinf(x[1]) && x[1] < 0 &&
            x[2] == 0.0f,
        "F64 read as float rounds (1/3), overflows (-1e300 -> -inf) and "
        "underflows");
  free(x);
  hard(st_read_f32(f, "f32", &x, &n), "read");
  check(n == 3 && memcmp(x, d32, sizeof d32) == 0, "F32 reads bit for bit");
  free(x);
  hard(st_read_f64(f, "f16", &d, &n), "read");
  check(n == 5 && d[0] == 1.0 && d[1] == -2.0 && d[2] == 0x1p-24 &&
            d[3] == 65504.0 && isinf(d[4]) && d[4] < 0,
        "F16 converts: 1, -2, 2^-24, 65504, -inf (have %g %g %g %g %g)",
        d[0], d[1], d[2], d[3], d[4]);
  free(d);
  hard(st_read_f32(f, "bf16", &x, &n), "read");
  check(n == 3 && x[0] == 1.0f && x[1] == -3.140625f && x[2] == 0x1p-133f,
        "BF16 converts: 1, -3.140625, 2^-133");
  free(x);
  hard(st_read_i32(f, "i64", &q, &n), "read");
  check(n == 3 && q[0] == -5 && q[1] == 2147483647 && q[2] == INT32_MIN,
        "I64 within int32's range reads as int32");
  free(q);
  hard(st_read_i32(f, "i32", &q, &n), "read");
  check(n == 2 && q[0] == 42 && q[1] == -42, "I32 reads as int32");
  free(q);
  err_clear();
  int rc = st_read_i32(f, "big", &q, &n);
  check(rc == ERR_FAIL &&
            strstr(msg(), "big: element 0 = 2147483648 does not fit in "
                          "int32") != NULL,
        "an I64 beyond int32 fails: %s", msg());
  err_clear();
  rc = st_read_f32(f, "i32", &x, &n);
  check(rc == ERR_FAIL &&
            strstr(msg(), "i32: dtype I32 cannot be read as floating point")
                != NULL,
        "I32 read as float fails: %s", msg());
  st_close(f);

  st_entry dup[2] = {{"x", ST_F32, 1, {1}, d32}, {"x", ST_F32, 1, {1}, d32}};
  err_clear();
  rc = st_write(p, dup, 2);
  check(rc == ERR_FAIL &&
            strstr(msg(), "tensor x given twice") != NULL,
        "st_write refuses a name given twice: %s", msg());
}

/* ---- the PyTorch-written fixture ---------------------------------------- */

static void test_pytorch_file(void) {
  const char *top = getenv("top_srcdir");
  char p[4096];
  snprintf(p, sizeof p, "%s/tests/data/fixture_tiny.safetensors",
           top && top[0] ? top : ".");
  if (access(p, R_OK) != 0) {
    printf("note: %s absent; test_fixture reports it\n", p);
    return;
  }
  st_file *f;
  err_clear();
  int rc = st_open(&f, p);
  check(rc == 0, "the file safetensors.torch.save_file wrote opens%s%s",
        rc ? ": " : "", rc ? msg() : "");
  if (rc != 0) return;
  const st_tensor *t = st_find(f, "layers.1.ffn.w2.weight");
  check(t && t->dtype == ST_F64 && t->ndim == 2 && t->shape[0] == 32 &&
            t->shape[1] == 48,
        "it holds layers.1.ffn.w2.weight, F64 [32, 48]");
  st_close(f);
  /* Our model refuses it as a checkpoint: its parameters are F64. */
  model *m = make(7);
  err_clear();
  rc = st_load_model(m, p);
  check(rc == ERR_FAIL &&
            strstr(msg(), "token_embeddings.weight: dtype F64 in file, the "
                          "model needs F32") != NULL,
        "loading it as a checkpoint fails on the dtype: %s", msg());
  model_destroy(m);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/test_safetensors.XXXXXX",
           tmp && tmp[0] ? tmp : "/tmp");
  hard_sys(mkdtemp(dir) != NULL, "mkdtemp");
  hard(engine_cpu_create(&E, 1), "engine_cpu_create");
  test_round_trip();
  test_load_errors();
  test_layernorm();
  test_truncated();
  test_malformed();
  test_accepted();
  test_dtypes();
  test_pytorch_file();
  engine_destroy(E);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", dir);
  return tl_finish();
}
