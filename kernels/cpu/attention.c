/* Attention on the CPU engine: the dispatch of k_attention_fwd/bwd and the
 * materialised path, straight loops as the reference model computes it.
 *
 * Per head b (q [Tq, Dh], k and v [Tk, Dh]), j restricted to j <= i when
 * causal:
 *   S_ij = scale * q_i . k_j;  L_i = log sum_j exp(S_ij);  P_ij = exp(S_ij - L_i)
 *   O_i = sum_j P_ij v_j
 * Backward from dO:
 *   dV_j = sum_i P_ij dO_i;   dP_ij = dO_i . v_j
 *   D_i = sum_j P_ij dP_ij;   dS_ij = P_ij (dP_ij - D_i)
 *   dQ_i = scale * sum_j dS_ij k_j;   dK_j = scale * sum_i dS_ij q_i
 * Masked entries have P = 0 (and so dS = 0). Dot products and sums run in
 * double, so this is also the accurate reference the tests lean on. P is
 * the caller's [BH, Tq, Tk] buffer; backward's dS row is per-head scratch.
 * Heads are independent: one OpenMP iteration per head, so results do not
 * depend on the thread count. Computed in fp32 (16-bit operands staged,
 * cpu_stage), as the CPU matmul. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <math.h>
#include <stdlib.h>

static void mat_fwd_head(const float *q, const float *k, const float *v,
                         float *o, float *lse, float *P, int tq, int tk,
                         int dh, int causal, float scale) {
  for (int i = 0; i < tq; i++) {
    int n = causal ? (i + 1 < tk ? i + 1 : tk) : tk;   /* keys row i sees */
    float *p = P + (size_t)i * tk;
    double m = -INFINITY;
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int d = 0; d < dh; d++)
        s += (double)q[(size_t)i * dh + d] * k[(size_t)j * dh + d];
      s *= scale;
      p[j] = (float)s;
      if (s > m) m = s;
    }
    double sum = 0;
    for (int j = 0; j < n; j++) sum += exp((double)p[j] - m);
    double l = m + log(sum);
    for (int j = 0; j < n; j++) p[j] = (float)exp((double)p[j] - l);
    for (int j = n; j < tk; j++) p[j] = 0.0f;
    lse[i] = (float)l;
    for (int d = 0; d < dh; d++) {
      double acc = 0;
      for (int j = 0; j < n; j++) acc += (double)p[j] * v[(size_t)j * dh + d];
      o[(size_t)i * dh + d] = (float)acc;
    }
  }
}

/* dS of one row at a time (row scratch ds [Tk]); dK and dV accumulate in
 * double over rows (acc [2, Tk, Dh]) and are written at the end. */
static void mat_bwd_head(const float *q, const float *k, const float *v,
                         const float *dout, const float *P, float *dq,
                         float *dk, float *dv, double *ds, double *acc,
                         int tq, int tk, int dh, int causal, float scale) {
  double *adk = acc, *adv = acc + (size_t)tk * dh;
  for (size_t x = 0; x < 2 * (size_t)tk * dh; x++) acc[x] = 0;
  for (int i = 0; i < tq; i++) {
    int n = causal ? (i + 1 < tk ? i + 1 : tk) : tk;
    const float *p = P + (size_t)i * tk;
    const float *gi = dout + (size_t)i * dh;
    double D = 0;
    for (int j = 0; j < n; j++) {
      double dp = 0;
      for (int d = 0; d < dh; d++) dp += (double)gi[d] * v[(size_t)j * dh + d];
      ds[j] = dp;
      D += p[j] * dp;
    }
    for (int j = 0; j < n; j++) ds[j] = p[j] * (ds[j] - D);
    for (int d = 0; d < dh; d++) {
      double a = 0;
      for (int j = 0; j < n; j++) a += ds[j] * k[(size_t)j * dh + d];
      dq[(size_t)i * dh + d] = (float)(scale * a);
    }
    for (int j = 0; j < n; j++)
      for (int d = 0; d < dh; d++) {
        adk[(size_t)j * dh + d] += ds[j] * q[(size_t)i * dh + d];
        adv[(size_t)j * dh + d] += (double)p[j] * gi[d];
      }
  }
  for (size_t x = 0; x < (size_t)tk * dh; x++) {
    dk[x] = (float)(scale * adk[x]);
    dv[x] = (float)adv[x];
  }
}

static int attention_fwd(engine *e, attn_impl impl, const float *q,
                         const float *k, const float *v, float *o, float *lse,
                         float *P, int bh, int tq, int tk, int dh, int causal,
                         float scale) {
  if (impl == ATTN_FLASH)
    return cpu_flash_fwd(e, q, k, v, o, lse, bh, tq, tk, dh, causal, scale);
  size_t sq = (size_t)tq * dh, sk = (size_t)tk * dh, sp = (size_t)tq * tk;
#pragma omp parallel for schedule(dynamic) num_threads(cpu_threads(e))
  for (int b = 0; b < bh; b++)
    mat_fwd_head((const float *)q + b * sq, (const float *)k + b * sk,
                 (const float *)v + b * sk, (float *)o + b * sq,
                 lse + (size_t)b * tq, (float *)P + b * sp, tq, tk, dh,
                 causal, scale);
  return 0;
}

static int attention_bwd(engine *e, attn_impl impl, const float *q,
                         const float *k, const float *v, const float *o,
                         const float *dout, const float *lse, const float *P,
                         float *dq, float *dk, float *dv, int bh, int tq,
                         int tk, int dh, int causal, float scale) {
  if (impl == ATTN_FLASH)
    return cpu_flash_bwd(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk, dh,
                         causal, scale);
  size_t sq = (size_t)tq * dh, sk = (size_t)tk * dh, sp = (size_t)tq * tk;
  int nt = cpu_threads(e) < bh ? cpu_threads(e) : bh;
  size_t per = (size_t)tk + 2 * sk;   /* doubles of scratch per thread */
  double *scratch = malloc((size_t)nt * per * sizeof *scratch);
  CHECK_ALLOC(scratch, (size_t)nt * per * sizeof *scratch);
#pragma omp parallel for schedule(static, 1) num_threads(nt)
  for (int t = 0; t < nt; t++) {
    double *ds = scratch + (size_t)t * per, *acc = ds + tk;
    for (int b = t; b < bh; b += nt)
      mat_bwd_head((const float *)q + b * sq, (const float *)k + b * sk,
                   (const float *)v + b * sk, (const float *)dout + b * sq,
                   (const float *)P + b * sp, (float *)dq + b * sq,
                   (float *)dk + b * sk, (float *)dv + b * sk, ds, acc, tq,
                   tk, dh, causal, scale);
  }
  free(scratch);
  return 0;
}

/* 16-bit q, k, v, o, dout and P (materialised) widened, o, P, dq, dk, dv
 * computed in fp32 and rounded (cpu_stage); lse stays fp32. */
int cpu_attention_fwd(engine *e, attn_impl impl, const void *q, const void *k,
                      const void *v, void *o, float *lse, void *P, int bh,
                      int tq, int tk, int dh, int causal, float scale,
                      dtype dt) {
  size_t nq = (size_t)bh * tq * dh, nk = (size_t)bh * tk * dh;
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fq = cpu_stage_in(&s, q, dt, nq), *fk = cpu_stage_in(&s, k, dt, nk),
              *fv = cpu_stage_in(&s, v, dt, nk);
  float *fo = cpu_stage_out(&s, o, dt, nq, 0);
  float *fp = impl == ATTN_FLASH ? NULL
                                 : cpu_stage_out(&s, P, dt, (size_t)bh * tq * tk, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? attention_fwd(e, impl, fq, fk, fv, fo, lse, fp, bh,
                                               tq, tk, dh, causal, scale)
                               : 0);
}

int cpu_attention_bwd(engine *e, attn_impl impl, const void *q, const void *k,
                      const void *v, const void *o, const void *dout,
                      const float *lse, const void *P, void *dq, void *dk,
                      void *dv, int bh, int tq, int tk, int dh, int causal,
                      float scale, dtype dt) {
  size_t nq = (size_t)bh * tq * dh, nk = (size_t)bh * tk * dh;
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fq = cpu_stage_in(&s, q, dt, nq), *fk = cpu_stage_in(&s, k, dt, nk),
              *fv = cpu_stage_in(&s, v, dt, nk), *fo = cpu_stage_in(&s, o, dt, nq),
              *fdo = cpu_stage_in(&s, dout, dt, nq);
  const float *fp = impl == ATTN_FLASH ? NULL
                                       : cpu_stage_in(&s, P, dt, (size_t)bh * tq * tk);
  float *fdq = cpu_stage_out(&s, dq, dt, nq, 0), *fdk = cpu_stage_out(&s, dk, dt, nk, 0),
        *fdv = cpu_stage_out(&s, dv, dt, nk, 0);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? attention_bwd(e, impl, fq, fk, fv, fo, fdo, lse, fp,
                                               fdq, fdk, fdv, bh, tq, tk, dh, causal,
                                               scale)
                               : 0);
}
