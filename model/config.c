/* Model sizes and the parameter table (shared/spec/model.md).
 *
 * The table is the reference's state_dict, in its order:
 *   token_embeddings.weight                 [V, D]
 *   per layer i:
 *     layers.i.ln1.weight                   [D]
 *     layers.i.attn.{q,k,v,output}_proj.weight  [D, D]
 *     layers.i.ln2.weight                   [D]
 *     layers.i.ffn.w1.weight                [F, D]
 *     layers.i.ffn.w2.weight                [D, F]
 *     layers.i.ffn.w3.weight                [F, D]
 *   ln_final.weight                         [D]
 *   lm_head.weight                          [V, D]
 * With LayerNorm (model_config.norm) each norm's weight is followed by its
 * bias: layers.i.ln1.bias, layers.i.ln2.bias, ln_final.bias, each [D], as
 * torch.nn.LayerNorm's state_dict has them.
 * Linear weights are [d_out, d_in]; every tensor is contiguous and the
 * tensors follow each other with no padding, so the flat buffer is exactly
 * the concatenation of the state_dict's tensors. */
#include "config.h"
#include "model/model.h"
#include "model/model_internal.h"

#include "common/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct named_size {
  const char *name;
  int vocab, d_model, d_ff, layers, heads;
} named_size;

/* model.md's table (vocab 10000), the 2026 edition's 10B, and two sizes for
 * tests and CI. */
static const named_size sizes[] = {
    {"small", 10000, 768, 3072, 12, 12},
    {"medium", 10000, 1024, 4096, 24, 16},
    {"large", 10000, 1280, 5120, 36, 20},
    {"xl", 10000, 1600, 6400, 48, 25},
    {"2.7B", 10000, 2560, 10240, 32, 32},
    {"10B", 10000, 4608, 12288, 50, 36},
    {"tiny", 64, 32, 48, 2, 4},
    {"nano", 16, 8, 12, 1, 2},
};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

int model_config_by_name(const char *name, model_config *c) {
  for (int i = 0; i < NSIZES; i++) {
    if (strcmp(sizes[i].name, name) != 0) continue;
    c->vocab = sizes[i].vocab;
    c->d_model = sizes[i].d_model;
    c->d_ff = sizes[i].d_ff;
    c->layers = sizes[i].layers;
    c->heads = sizes[i].heads;
    c->rope_theta = 10000.0f;
    c->norm_eps = 1e-5f;
    c->norm = NORM_RMS;
    return 0;
  }
  return -1;
}

const char *model_norm_name(model_norm n) {
  return n == NORM_LAYER ? "layernorm" : "rmsnorm";
}

int model_norm_parse(const char *name, model_norm *n) {
  if (strcmp(name, "rmsnorm") == 0) *n = NORM_RMS;
  else if (strcmp(name, "layernorm") == 0) *n = NORM_LAYER;
  else return -1;
  return 0;
}

const char *const *model_size_names(void) {
  static const char *names[NSIZES + 1];
  for (int i = 0; i < NSIZES; i++) names[i] = sizes[i].name;
  names[NSIZES] = NULL;
  return names;
}

int model_config_parse(const char *size, int vocab, model_config *c,
                       char *err, size_t n) {
  int d, f, l, h, dims = 0;
  char tail;
  if (model_config_by_name(size, c) == 0) {
    /* named sizes fix the architecture; the caller sets the vocabulary */
  } else if (sscanf(size, "%d/%d/%d/%d%c", &d, &f, &l, &h, &tail) == 4) {
    model_config_by_name("nano", c);
    c->d_model = d;
    c->d_ff = f;
    c->layers = l;
    c->heads = h;
    dims = 1;
  } else {
    char names[256] = "";
    for (const char *const *p = model_size_names(); *p; p++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
               p == model_size_names() ? "" : ", ", *p);
    snprintf(err, n,
             "size = \"%s\" is not a model size (allowed: %s, or D/F/L/H)",
             size, names);
    return -1;
  }
  c->vocab = vocab;
  char why[256];
  if (model_config_check(c, why, sizeof why) == 0) return 0;
  if (dims)
    snprintf(err, n,
             "size = \"%s\": %s (allowed: D/F/L/H = d_model/d_ff/layers/"
             "heads, all positive, d_model / heads a whole even number)",
             size, why);
  else
    snprintf(err, n, "%s", why);
  return -1;
}

int model_config_check(const model_config *c, char *err, size_t n) {
  const char *what = NULL;
  char buf[256];
  if (c->vocab <= 0) what = "vocab must be positive";
  else if (c->d_model <= 0) what = "d_model must be positive";
  else if (c->d_ff <= 0) what = "d_ff must be positive";
  else if (c->layers <= 0) what = "layers must be positive";
  else if (c->heads <= 0) what = "heads must be positive";
  else if (c->d_model % c->heads != 0) {
    snprintf(buf, sizeof buf,
             "heads (%d) must divide d_model (%d) (d_head = d_model / heads)",
             c->heads, c->d_model);
    what = buf;
  } else if ((c->d_model / c->heads) % 2 != 0) {
    snprintf(buf, sizeof buf,
             "d_head = d_model / heads = %d must be even (RoPE rotates pairs)",
             c->d_model / c->heads);
    what = buf;
  } else if (!(c->rope_theta > 0.0f)) what = "rope_theta must be positive";
  else if (!(c->norm_eps > 0.0f)) what = "norm_eps must be positive";
  else if (c->norm != NORM_RMS && c->norm != NORM_LAYER)
    what = "norm must be NORM_RMS or NORM_LAYER";
  if (what == NULL) {
    if (n > 0) err[0] = '\0';
    return 0;
  }
  if (n > 0) snprintf(err, n, "%s", what);
  return -1;
}

static void put(tensor_view *v, int *k, size_t *off, const char *name,
                int ndim, int d0, int d1) {
  tensor_view *t = &v[(*k)++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = ndim;
  t->shape[0] = d0;
  t->shape[1] = ndim == 2 ? d1 : 0;
  t->numel = (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
  t->offset = *off;
  *off += t->numel;
}

int model_layer_tensors(const model_config *c) {
  return c->norm == NORM_LAYER ? PER_LAYER_TENSORS + 2 : PER_LAYER_TENSORS;
}

int model_nparam_tensors(const model_config *c) {
  return 1 + model_layer_tensors(c) * c->layers +
         (c->norm == NORM_LAYER ? 3 : 2);
}

int model_layer_view(const model_config *c, int i, int t) {
  /* LayerNorm: where each P_* stands in a layer's run of the table */
  static const int layer_pos[] = {
      [P_LN1] = 0, [P_LN1_B] = 1, [P_WQ] = 2, [P_WK] = 3, [P_WV] = 4,
      [P_WO] = 5,  [P_LN2] = 6,   [P_LN2_B] = 7, [P_W1] = 8, [P_W2] = 9,
      [P_W3] = 10};
  int base = 1 + i * model_layer_tensors(c);
  if (i == c->layers || c->norm != NORM_LAYER) return base + t;
  return base + layer_pos[t];
}

int model_head_view(const model_config *c, int which) {
  int base = model_layer_view(c, c->layers, 0);
  if (c->norm == NORM_LAYER) return base + which;
  return which == 0 ? base : which == 2 ? base + 1 : -1;   /* no bias */
}

int model_layout(const model_config *c, tensor_view **views, int *nviews,
                 size_t *nparams) {
  char err[256];
  if (model_config_check(c, err, sizeof err) != 0)
    FAIL(ERR_FAIL, "model config: %s", err);
  int n = model_nparam_tensors(c);
  tensor_view *v = calloc((size_t)n, sizeof *v);
  CHECK_ALLOC(v, (size_t)n * sizeof *v);
  int k = 0;
  size_t off = 0;
  const int V = c->vocab, D = c->d_model, F = c->d_ff;
  char name[64];
  put(v, &k, &off, "token_embeddings.weight", 2, V, D);
  for (int i = 0; i < c->layers; i++) {
#define LAYER(suffix, ndim, d0, d1)                                          \
  do {                                                                       \
    snprintf(name, sizeof name, "layers.%d.%s", i, suffix);                  \
    put(v, &k, &off, name, ndim, d0, d1);                                    \
  } while (0)
    LAYER("ln1.weight", 1, D, 0);
    if (c->norm == NORM_LAYER) LAYER("ln1.bias", 1, D, 0);
    LAYER("attn.q_proj.weight", 2, D, D);
    LAYER("attn.k_proj.weight", 2, D, D);
    LAYER("attn.v_proj.weight", 2, D, D);
    LAYER("attn.output_proj.weight", 2, D, D);
    LAYER("ln2.weight", 1, D, 0);
    if (c->norm == NORM_LAYER) LAYER("ln2.bias", 1, D, 0);
    LAYER("ffn.w1.weight", 2, F, D);
    LAYER("ffn.w2.weight", 2, D, F);
    LAYER("ffn.w3.weight", 2, F, D);
#undef LAYER
  }
  put(v, &k, &off, "ln_final.weight", 1, D, 0);
  if (c->norm == NORM_LAYER) put(v, &k, &off, "ln_final.bias", 1, D, 0);
  put(v, &k, &off, "lm_head.weight", 2, V, D);
  ASSERT(k == n);
  *views = v;
  *nviews = n;
  *nparams = off;
  return 0;
}
