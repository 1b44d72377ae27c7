/* Causal softmax over materialised attention scores on the CPU.
 * `mats` = B*H matrices S, P, dP, dS, each [T, T], row i = query i.
 *
 *   forward   P[i,j] = exp(scale*S[i,j] - m_i) / sum_{k<=i} exp(scale*S[i,k] - m_i)
 *                                                     for j <= i,
 *             P[i,j] = 0                              for j > i,
 *             m_i = max_{k<=i} scale*S[i,k] (subtracted for stability)
 *   backward  dS[i,j] = scale * P[i,j] * (dP[i,j] - sum_k dP[i,k] P[i,k])
 *                                                     (written)
 *
 * Exponentials and row sums are in double. S and P may be the same buffer,
 * and so may dP and dS: each element is read before it is written. Rows are
 * independent and run in parallel. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <math.h>

int cpu_softmax_causal_fwd(engine *e, const float *S, float *P, int mats,
                           int seq, float scale) {
  long long rows = (long long)mats * seq;
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (long long r = 0; r < rows; r++) {
    int i = (int)(r % seq);                  /* query position: keys 0..i */
    const float *s = S + (size_t)r * seq;
    float *p = P + (size_t)r * seq;
    double mx = -INFINITY;
    for (int j = 0; j <= i; j++) {
      double v = (double)scale * s[j];
      if (v > mx) mx = v;
    }
    double sum = 0.0;
    for (int j = 0; j <= i; j++) {
      double ex = exp((double)scale * s[j] - mx);
      sum += ex;
      p[j] = (float)ex;
    }
    double inv = 1.0 / sum;
    for (int j = 0; j <= i; j++) p[j] = (float)(p[j] * inv);
    for (int j = i + 1; j < seq; j++) p[j] = 0.0f;
  }
  return 0;
}

int cpu_softmax_causal_bwd(engine *e, const float *P, const float *dP,
                           float *dS, int mats, int seq, float scale) {
  long long rows = (long long)mats * seq;
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (long long r = 0; r < rows; r++) {
    int i = (int)(r % seq);
    const float *p = P + (size_t)r * seq, *dp = dP + (size_t)r * seq;
    float *ds = dS + (size_t)r * seq;
    double dot = 0.0;
    for (int j = 0; j <= i; j++) dot += (double)dp[j] * p[j];
    for (int j = 0; j <= i; j++)
      ds[j] = (float)((double)scale * p[j] * (dp[j] - dot));
    for (int j = i + 1; j < seq; j++) ds[j] = 0.0f;
  }
  return 0;
}
