/* Head layout on the CPU: D = H*Dh.
 *
 *   split  y[b,h,t,:] = x[b,t,h*Dh:(h+1)*Dh]      x [B,T,D] -> y [B,H,T,Dh]
 *   merge  y[b,t,h*Dh:(h+1)*Dh] = x[b,h,t,:]      x [B,H,T,Dh] -> y [B,T,D]
 *
 * Pure copies (merge is split's inverse and its backward, and vice versa);
 * parallel over the (b, t) rows of the [B,T,D] side. */
#include "config.h"
#include "kernels/cpu/cpu.h"

#include <string.h>

/* to_heads = 1: [B,T,D] -> [B,H,T,Dh]; 0: the reverse. */
static void permute(engine *e, const float *x, float *y, int batch, int seq,
                    int heads, int dh, int to_heads) {
  long long rows = (long long)batch * seq;
  size_t d = (size_t)heads * dh, bytes = (size_t)dh * sizeof(float);
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
  for (long long r = 0; r < rows; r++) {
    size_t b = (size_t)(r / seq), t = (size_t)(r % seq);
    for (int h = 0; h < heads; h++) {
      size_t flat = (size_t)r * d + (size_t)h * dh;                  /* [B,T,D] */
      size_t split = ((b * heads + h) * seq + t) * dh;             /* [B,H,T,Dh] */
      if (to_heads) memcpy(y + split, x + flat, bytes);
      else memcpy(y + flat, x + split, bytes);
    }
  }
}

int cpu_split_heads(engine *e, const float *x, float *y, int batch, int seq,
                    int heads, int dh) {
  permute(e, x, y, batch, seq, heads, dh, 1);
  return 0;
}

int cpu_merge_heads(engine *e, const float *x, float *y, int batch, int seq,
                    int heads, int dh) {
  permute(e, x, y, batch, seq, heads, dh, 0);
  return 0;
}

/* The typed forms: x widened, y rounded (cpu_stage). */
static int permute_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                      int batch, int seq, int heads, int dh, int split) {
  size_t n = (size_t)batch * seq * heads * dh;
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fx = cpu_stage_in(&s, x, xt, n);
  float *fy = cpu_stage_out(&s, y, yt, n, 0);
  if (cpu_stage_ok(&s)) permute(e, fx, fy, batch, seq, heads, dh, split);
  return cpu_stage_end(&s, 0);
}

int cpu_split_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                       int batch, int seq, int heads, int dh) {
  return permute_ex(e, x, xt, y, yt, batch, seq, heads, dh, 1);
}

int cpu_merge_heads_ex(engine *e, const void *x, dtype xt, void *y, dtype yt,
                       int batch, int seq, int heads, int dh) {
  return permute_ex(e, x, xt, y, yt, batch, seq, heads, dh, 0);
}
