/* Token embedding on the CUDA engine; table [V, D], out / dout [n, D].
 *
 *   forward   out[i,:] = table[ids[i],:]          (a gather: one block per
 *                                                  row, float4 when D % 4 = 0)
 *   backward  dtable[ids[i],:] += dout[i,:]       (accumulated; repeated ids
 *                                                  add up)
 *
 * The backward is deterministic, and gives the CPU engine's bits: the
 * positions are sorted by id (cub's stable radix sort of (id, i) pairs, so
 * equal ids keep ascending i), then one block per distinct id adds that
 * id's rows to its dtable row in ascending i, starting from dtable's value:
 * the same fp32 additions in the same order as the CPU loop. No atomics on
 * floats. Cost: the sort of n small keys (a few microseconds) on top of
 * reading dout once and dtable's touched rows once.
 *
 * An id outside [0, V) is reported at the next sync (cuda_ops.h); forward
 * fills that row of out with NaN, backward skips it. */
#include "kernels/cuda/common.cuh"

#include <cub/device/device_radix_sort.cuh>

/* ---- forward ------------------------------------------------------------- */

template <bool VEC>
__global__ void embedding_fwd_k(const int32_t *ids, const float *table,
                                float *out, int d, int vocab,
                                cuda_status *st, int *flag) {
  long long i = blockIdx.x;
  int id = ids[i];
  bool ok = id >= 0 && id < vocab;
  if (!ok && threadIdx.x == 0)
    report_bad(st, flag, CUDA_CHK_EMBEDDING_FWD, i, id, vocab);
  const float *src = table + (long long)(ok ? id : 0) * d;
  float *dst = out + i * d;
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x)
      ((float4 *)dst)[j] = ok ? ((const float4 *)src)[j]
                              : make_float4(NAN, NAN, NAN, NAN);
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x)
      dst[j] = ok ? src[j] : NAN;
  }
}

int cuda_embedding_fwd(engine *e, const int32_t *ids, const float *table,
                       float *out, int n, int d, int vocab) {
  cuda_engine *c = cuda_impl(e);
  bool vec = d % 4 == 0 && aligned16(table) && aligned16(out);
  int threads = row_threads(vec ? d / 4 : d);
  if (vec)
    embedding_fwd_k<true><<<n, threads, 0, cuda_stream(e)>>>(ids, table, out, d, vocab, c->status, c->bad_flag_dev);
  else
    embedding_fwd_k<false><<<n, threads, 0, cuda_stream(e)>>>(ids, table, out, d, vocab, c->status, c->bad_flag_dev);
  CHECK_LAUNCH();
  return 0;
}

/* ---- backward ------------------------------------------------------------ */

/* keys[i] = ids[i] (vocab for a bad id: sorts last, skipped), vals[i] = i. */
__global__ void embedding_keys_k(const int32_t *ids, int n, int vocab,
                                 unsigned *keys, int *vals, cuda_status *st,
                                 int *flag) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  int id = ids[i];
  bool ok = id >= 0 && id < vocab;
  if (!ok) report_bad(st, flag, CUDA_CHK_EMBEDDING_BWD, i, id, vocab);
  keys[i] = ok ? (unsigned)id : (unsigned)vocab;
  vals[i] = i;
}

/* Block k of the sorted order: if k starts a run of equal ids, add the
 * run's dout rows (ascending i) into that id's dtable row. */
template <bool VEC>
__global__ void embedding_acc_k(const unsigned *keys, const int *vals, int n,
                                const float *dout, float *dtable, int d,
                                int vocab) {
  int k = blockIdx.x;
  unsigned id = keys[k];
  if (id >= (unsigned)vocab || (k > 0 && keys[k - 1] == id)) return;
  int end = k + 1;
  while (end < n && keys[end] == id) end++;
  float *dst = dtable + (long long)id * d;
  if (VEC) {
    for (int j = threadIdx.x; j < d / 4; j += blockDim.x) {
      float4 acc = ((float4 *)dst)[j];
#pragma unroll 4
      for (int r = k; r < end; r++) {
        float4 v = ((const float4 *)(dout + (long long)vals[r] * d))[j];
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
      }
      ((float4 *)dst)[j] = acc;
    }
  } else {
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      float acc = dst[j];
#pragma unroll 4
      for (int r = k; r < end; r++) acc += dout[(long long)vals[r] * d + j];
      dst[j] = acc;
    }
  }
}

static size_t align256(size_t x) { return (x + 255) / 256 * 256; }

int cuda_embedding_bwd(engine *e, const int32_t *ids, const float *dout,
                       float *dtable, int n, int d, int vocab) {
  cuda_engine *c = cuda_impl(e);
  /* Keys up to vocab inclusive (the bad-id marker): that many bits. */
  int bits = 0;
  while (bits < 32 && ((unsigned long long)vocab >> bits) != 0) bits++;
  size_t temp_bytes = 0;
  CHECK_CUDA(cub::DeviceRadixSort::SortPairs(
      (void *)NULL, temp_bytes, (const unsigned *)NULL, (unsigned *)NULL,
      (const int *)NULL, (int *)NULL, n, 0, bits, cuda_stream(e)));
  size_t arr = align256((size_t)n * 4);
  void *ws;
  TRY(cuda_workspace(e, 4 * arr + temp_bytes, &ws));
  char *w = (char *)ws;
  unsigned *keys = (unsigned *)w, *keys_sorted = (unsigned *)(w + arr);
  int *vals = (int *)(w + 2 * arr), *vals_sorted = (int *)(w + 3 * arr);
  void *temp = w + 4 * arr;

  embedding_keys_k<<<(n + 255) / 256, 256, 0, cuda_stream(e)>>>(
      ids, n, vocab, keys, vals, c->status, c->bad_flag_dev);
  CHECK_LAUNCH();
  CHECK_CUDA(cub::DeviceRadixSort::SortPairs(temp, temp_bytes,
                                             (const unsigned *)keys,
                                             keys_sorted, (const int *)vals,
                                             vals_sorted, n, 0, bits,
                                             cuda_stream(e)));
  bool vec = d % 4 == 0 && aligned16(dout) && aligned16(dtable);
  int threads = row_threads(vec ? d / 4 : d);
  if (vec)
    embedding_acc_k<true><<<n, threads, 0, cuda_stream(e)>>>(keys_sorted, vals_sorted, n, dout, dtable, d, vocab);
  else
    embedding_acc_k<false><<<n, threads, 0, cuda_stream(e)>>>(keys_sorted, vals_sorted, n, dout, dtable, d, vocab);
  CHECK_LAUNCH();
  return 0;
}
