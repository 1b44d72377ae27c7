/* FlashAttention-2 on the CPU engine: the handout's tiled ("pure") version,
 * the same algorithm the CUDA kernels run, readable, in fp32 like them.
 *
 * Forward, per head and query tile Q_i [Bq, Dh], over key tiles K_j, V_j
 * [Bk, Dh] (Algorithm 1 of the handout):
 *   S = scale * Q_i K_j^T                          [Bq, Bk]
 *   m' = max(m, rowmax S);  P~ = exp(S - m')
 *   l = exp(m - m') l + rowsum P~;  O = diag(exp(m - m')) O + P~ V_j
 * then O_i = diag(1/l) O and L_i = m + log l. Causal: key tiles that start
 * after the tile's last query are skipped whole (the loop stops there);
 * only tiles that cross the diagonal compare indices (S = -inf where j > i).
 *
 * Backward, with D_i = rowsum(dO_i * O_i) and P recomputed from L:
 *   P = exp(scale Q_i K_j^T - L_i);  dV_j += P^T dO_i;  dP = dO_i V_j^T
 *   dS = P * (dP - D_i);  dK_j += scale dS^T Q_i;  dQ_i += scale dS K_j
 * in two passes, as the GPU does it without atomics: one owns a key tile
 * and loops over query tiles (dK, dV), the other owns a query tile and
 * loops over key tiles (dQ). Each (head, tile) is one OpenMP iteration that
 * writes only its own rows. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <math.h>
#include <stdlib.h>

enum { BQ = 16, BK = 16 };   /* the handout's smallest tiles */

static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* S[r][c] = scale * q_(r0+r) . k_(c0+c), -inf where causal hides it.
 * Only a tile crossing the diagonal (its last key after its first query)
 * needs the index comparison. */
static void scores(const float *q, const float *k, float *S, int r0, int nr,
                   int c0, int nc, int dh, int causal, float scale) {
  int diag = causal && c0 + nc - 1 > r0;
  for (int r = 0; r < nr; r++)
    for (int c = 0; c < nc; c++) {
      if (diag && c0 + c > r0 + r) { S[r * BK + c] = -INFINITY; continue; }
      const float *a = q + (size_t)(r0 + r) * dh, *b = k + (size_t)(c0 + c) * dh;
      float s = 0;
      for (int d = 0; d < dh; d++) s += a[d] * b[d];
      S[r * BK + c] = scale * s;
    }
}

/* Key tiles a query tile [r0, r0+nr) visits: all, or up to its last row. */
static int key_tiles(int r0, int nr, int tk, int causal) {
  int last = causal ? (r0 + nr < tk ? r0 + nr : tk) : tk;
  return ceil_div(last, BK);
}

static void fwd_tile(const float *q, const float *k, const float *v, float *o,
                     float *lse, float *S, float *acc, int r0, int tq, int tk,
                     int dh, int causal, float scale) {
  int nr = tq - r0 < BQ ? tq - r0 : BQ;
  float m[BQ], l[BQ];
  for (int r = 0; r < nr; r++) { m[r] = -INFINITY; l[r] = 0; }
  for (size_t x = 0; x < (size_t)nr * dh; x++) acc[x] = 0;
  int tiles = key_tiles(r0, nr, tk, causal);
  for (int t = 0; t < tiles; t++) {
    int c0 = t * BK, nc = tk - c0 < BK ? tk - c0 : BK;
    scores(q, k, S, r0, nr, c0, nc, dh, causal, scale);
    for (int r = 0; r < nr; r++) {
      float mx = m[r];
      for (int c = 0; c < nc; c++) mx = fmaxf(mx, S[r * BK + c]);
      /* Key 0 is visible to every row, so mx is finite from tile 0 on. */
      float alpha = expf(m[r] - mx), sum = 0;
      float *a = acc + (size_t)r * dh;
      for (int d = 0; d < dh; d++) a[d] *= alpha;
      for (int c = 0; c < nc; c++) {
        float p = expf(S[r * BK + c] - mx);   /* exp(-inf) = 0: masked */
        sum += p;
        const float *vv = v + (size_t)(c0 + c) * dh;
        for (int d = 0; d < dh; d++) a[d] += p * vv[d];
      }
      l[r] = alpha * l[r] + sum;
      m[r] = mx;
    }
  }
  for (int r = 0; r < nr; r++) {
    for (int d = 0; d < dh; d++)
      o[(size_t)(r0 + r) * dh + d] = acc[(size_t)r * dh + d] / l[r];
    lse[r0 + r] = m[r] + logf(l[r]);
  }
}

int cpu_flash_fwd(engine *e, const float *q, const float *k, const float *v,
                  float *o, float *lse, int bh, int tq, int tk, int dh,
                  int causal, float scale) {
  int qt = ceil_div(tq, BQ);
  long long items = (long long)bh * qt;
  size_t sq = (size_t)tq * dh, sk = (size_t)tk * dh;
  int fail = 0;
#pragma omp parallel num_threads(cpu_threads(e))
  {
    float *S = malloc(sizeof(float) * (BQ * BK + (size_t)BQ * dh));
    if (!S) {
#pragma omp atomic write
      fail = 1;
    }
#pragma omp for schedule(dynamic)
    for (long long it = 0; it < items; it++) {
      if (!S) continue;
      int b = (int)(it / qt), r0 = (int)(it % qt) * BQ;
      fwd_tile(q + b * sq, k + b * sk, v + b * sk, o + b * sq,
               lse + (size_t)b * tq, S, S + BQ * BK, r0, tq, tk, dh, causal,
               scale);
    }
    free(S);
  }
  if (fail) FAIL(ERR_OOM, "k_attention_fwd: out of host memory for tiles");
  return 0;
}

/* P (in S) = exp(S - L) and dS = P * (dP - D) for one (query tile, key
 * tile) pair; masked entries come out 0. ds [BQ, BK]. */
static void p_and_ds(const float *q, const float *k, const float *v,
                     const float *dout, const float *lse, const float *D,
                     float *S, float *ds, int r0, int nr, int c0, int nc,
                     int dh, int causal, float scale) {
  scores(q, k, S, r0, nr, c0, nc, dh, causal, scale);
  for (int r = 0; r < nr; r++)
    for (int c = 0; c < nc; c++) {
      float p = expf(S[r * BK + c] - lse[r0 + r]);
      const float *g = dout + (size_t)(r0 + r) * dh, *vv = v + (size_t)(c0 + c) * dh;
      float dp = 0;
      for (int d = 0; d < dh; d++) dp += g[d] * vv[d];
      S[r * BK + c] = p;
      ds[r * BK + c] = p * (dp - D[r0 + r]);
    }
}

/* dK, dV of key tile [c0, c0+nc): over the query tiles that can see it. */
static void dkdv_tile(const float *q, const float *k, const float *v,
                      const float *dout, const float *lse, const float *D,
                      float *dk, float *dv, float *S, float *ds, int c0,
                      int tq, int tk, int dh, int causal, float scale) {
  int nc = tk - c0 < BK ? tk - c0 : BK;
  float *gk = dk + (size_t)c0 * dh, *gv = dv + (size_t)c0 * dh;
  for (size_t x = 0; x < (size_t)nc * dh; x++) gk[x] = gv[x] = 0;
  /* Causal: query rows before c0 see none of these keys. */
  int first = causal ? c0 / BQ : 0;
  for (int t = first; t < ceil_div(tq, BQ); t++) {
    int r0 = t * BQ, nr = tq - r0 < BQ ? tq - r0 : BQ;
    p_and_ds(q, k, v, dout, lse, D, S, ds, r0, nr, c0, nc, dh, causal, scale);
    for (int c = 0; c < nc; c++)
      for (int r = 0; r < nr; r++) {
        float p = S[r * BK + c], s = scale * ds[r * BK + c];
        const float *g = dout + (size_t)(r0 + r) * dh, *qq = q + (size_t)(r0 + r) * dh;
        for (int d = 0; d < dh; d++) {
          gv[(size_t)c * dh + d] += p * g[d];
          gk[(size_t)c * dh + d] += s * qq[d];
        }
      }
  }
}

/* dQ of query tile [r0, r0+nr): over the key tiles it sees. */
static void dq_tile(const float *q, const float *k, const float *v,
                    const float *dout, const float *lse, const float *D,
                    float *dq, float *S, float *ds, int r0, int tq, int tk,
                    int dh, int causal, float scale) {
  int nr = tq - r0 < BQ ? tq - r0 : BQ;
  float *g = dq + (size_t)r0 * dh;
  for (size_t x = 0; x < (size_t)nr * dh; x++) g[x] = 0;
  int tiles = key_tiles(r0, nr, tk, causal);
  for (int t = 0; t < tiles; t++) {
    int c0 = t * BK, nc = tk - c0 < BK ? tk - c0 : BK;
    p_and_ds(q, k, v, dout, lse, D, S, ds, r0, nr, c0, nc, dh, causal, scale);
    for (int r = 0; r < nr; r++)
      for (int c = 0; c < nc; c++) {
        float s = scale * ds[r * BK + c];
        const float *kk = k + (size_t)(c0 + c) * dh;
        for (int d = 0; d < dh; d++) g[(size_t)r * dh + d] += s * kk[d];
      }
  }
}

int cpu_flash_bwd(engine *e, const float *q, const float *k, const float *v,
                  const float *o, const float *dout, const float *lse,
                  float *dq, float *dk, float *dv, int bh, int tq, int tk,
                  int dh, int causal, float scale) {
  size_t sq = (size_t)tq * dh, sk = (size_t)tk * dh, rows = (size_t)bh * tq;
  float *D = malloc(rows * sizeof *D);
  CHECK_ALLOC(D, rows * sizeof *D);
  int nt = cpu_threads(e);
#pragma omp parallel for num_threads(nt)
  for (long long r = 0; r < (long long)rows; r++) {
    float s = 0;
    for (int d = 0; d < dh; d++)
      s += dout[(size_t)r * dh + d] * o[(size_t)r * dh + d];
    D[r] = s;
  }
  int qt = ceil_div(tq, BQ), kt = ceil_div(tk, BK), fail = 0;
  long long kitems = (long long)bh * kt, items = kitems + (long long)bh * qt;
#pragma omp parallel num_threads(nt)
  {
    float *S = malloc(sizeof(float) * 2 * BQ * BK);
    if (!S) {
#pragma omp atomic write
      fail = 1;
    }
    /* Both passes in one loop: they write disjoint buffers. */
#pragma omp for schedule(dynamic)
    for (long long it = 0; it < items; it++) {
      if (!S) continue;
      if (it < kitems) {
        int b = (int)(it / kt), c0 = (int)(it % kt) * BK;
        dkdv_tile(q + b * sq, k + b * sk, v + b * sk, dout + b * sq,
                  lse + (size_t)b * tq, D + (size_t)b * tq, dk + b * sk,
                  dv + b * sk, S, S + BQ * BK, c0, tq, tk, dh, causal, scale);
      } else {
        long long jt = it - kitems;
        int b = (int)(jt / qt), r0 = (int)(jt % qt) * BQ;
        dq_tile(q + b * sq, k + b * sk, v + b * sk, dout + b * sq,
                lse + (size_t)b * tq, D + (size_t)b * tq, dq + b * sq, S,
                S + BQ * BK, r0, tq, tk, dh, causal, scale);
      }
    }
    free(S);
  }
  free(D);
  if (fail) FAIL(ERR_OOM, "k_attention_bwd: out of host memory for tiles");
  return 0;
}
