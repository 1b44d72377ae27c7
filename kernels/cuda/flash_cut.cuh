/* Cut walks: how the flash kernels (flash_fwd_wgmma.cu, flash_bwd_wgmma.cu,
 * and the tensor-core ones of flash_fwd.cu and flash_bwd.cu) spread few,
 * long walks over the SMs.
 *
 * A block of those kernels walks a run of tiles: the forward a query
 * tile's key tiles, the backward a key block's query tiles. Causal walks
 * differ in length (1 to n tiles), so with few walks a head (one head at a
 * long sequence) the longest run on while the other SMs idle: one head at
 * seq 65536, Dh 64, keeps the SMs 89% busy by the replay below, at 16384
 * about a third. A cut splits every walk into chunks of C tiles; a block
 * walks one chunk (a unit), and the chunks of a walk longer than C write
 * partial results that a merge kernel combines.
 *
 * Walks are numbered x = 0 .. n - 1 in launch order, longest first (walk
 * lengths never grow with x). Units are numbered chunk by chunk, each
 * chunk's walks in that order: chunk c holds the walks longer than c C,
 * which are walks 0 .. count(c) - 1. So a unit's walk and chunk follow
 * from count alone, on the host and in the kernels, without a table.
 *
 * A walk family W provides, __host__ __device__:
 *   int walk(int x) const           tiles of walk x
 *   int count(int c, int C) const   walks longer than c * C tiles
 * (the two kernels' families are below; tests/test_flash_cut.cu checks
 * them and the cut's numbering against brute force). */
#ifndef TRAINLAB_FLASH_CUT_CUH
#define TRAINLAB_FLASH_CUT_CUH

#include "kernels/cuda/cut_memo.h"
#ifdef __CUDACC__
#include "kernels/cuda/flash_common.cuh"
#endif

#include <algorithm>
#include <functional>
#include <queue>
#include <type_traits>
#include <vector>

/* The forward's walks (flash_fwd_wgmma.cu): walk x is query tile
 * nq - 1 - x (the last tile, the longest causal walk, first) over the key
 * tiles of BK keys it sees. */
template <int BK> struct fwd_walks_t {
  int nq, BQ, tk, causal;
  /* the first row of walk x's query tile */
  __host__ __device__ int row0(int x) const { return (nq - 1 - x) * BQ; }
  __host__ __device__ int walk(int x) const {
    int end = (nq - x) * BQ;   /* past the tile's last row */
    int kend = causal && end < tk ? end : tk;
    return (kend + BK - 1) / BK;
  }
  /* walks longer than c * C key tiles: tiles from key c C * BK on */
  __host__ __device__ int count(int c, int C) const {
    long long k = (long long)c * C * BK;
    if (k >= tk) return 0;
    if (!causal) return nq;
    long long first = k / BQ;   /* the first tile with a row past key k */
    return first >= nq ? 0 : nq - (int)first;
  }
};

/* The backward's walks (flash_bwd_wgmma.cu): walk x is key block x (BK
 * keys) over the query tiles that see it, upwards from the first; block
 * 0 sees all. */
template <int BK> struct bwd_walks_t {
  int nq, nk, BQ, causal;
  /* the first row (key) of walk x's key block */
  __host__ __device__ int row0(int x) const { return x * BK; }
  __host__ __device__ int walk(int x) const {
    if (!causal) return nq;
    long long i0 = (long long)x * BK / BQ;   /* the first tile that sees it */
    return i0 >= nq ? 0 : nq - (int)i0;
  }
  /* walks longer than c * C query tiles: blocks x < ceil((nq - c C) BQ /
   * BK); at c = 0 every block, as one no query sees still writes zeros */
  __host__ __device__ int count(int c, int C) const {
    if (c == 0) return nk;
    long long m = (long long)c * C;
    if (m >= nq) return 0;
    if (!causal) return nk;
    long long lim = ((nq - m) * BQ + BK - 1) / BK;
    return lim < nk ? (int)lim : nk;
  }
};

/* A cut: chunks of C tiles, nc of them in the longest walk, `units`
 * blocks a head. The `whole` walks of one chunk (count(0) - count(1), the
 * shortest) write their results directly; the us = units - whole units
 * of the others write partials, to slots 0 .. us - 1 of their head.
 * Uncut: C = the longest walk, nc = 1, us = 0. */
struct walk_cut {
  int n, C, nc, units, whole, us;
};

/* Unit u's walk x and chunk c, and (for a cut walk) its partial slot. */
template <class W>
__host__ __device__ inline void cut_unit(const walk_cut &p, const W &w, int u,
                                         int *x, int *c, int *slot) {
  int i = u, k = 0;
  for (int cnt; k < p.nc - 1 && i >= (cnt = w.count(k, p.C)); k++) i -= cnt;
  *x = i;
  *c = k;
  /* chunk 0 lists the cut walks first (the longest); later chunks hold
   * cut walks only */
  *slot = k == 0 ? u : u - p.whole;
}

/* The slot of chunk c of cut walk x (the merge kernels). */
template <class W>
__host__ __device__ inline int cut_slot(const walk_cut &p, const W &w, int x,
                                        int c) {
  int start = 0;
  for (int k = 0; k < c; k++) start += w.count(k, p.C);
  return c == 0 ? x : start + x - p.whole;
}

#ifdef __CUDACC__
/* The rows a merge block combines, a warp each (flash_fwd_merge,
 * flash_sum_merge): a cut walk's rows spread over many blocks. With one
 * block a walk, each warp took its rows one after another through every
 * chunk, a dependent load at a time, and the merge cost about what the cut
 * saved (1 x 32768, Dh 64, H200: forward 0.45 ms uncut, 0.50 cut). */
constexpr int CUT_MERGE_ROWS = 8;

/* For a merge kernel's block: the chunks of cut walk x, their slots into
 * shared memory (the block's threads find them, every thread waits). */
template <class W>
__device__ inline int cut_slots(const walk_cut &p, const W &w, int x,
                                int *slots) {
  int n = (w.walk(x) + p.C - 1) / p.C;
  for (int c = threadIdx.x; c < n; c += blockDim.x) slots[c] = cut_slot(p, w, x, c);
  __syncthreads();
  return n;
}

namespace {
/* The forward kernels' merge (W: their walk family, fwd_walks_t): O and L
 * of the cut tiles (walk x, query tile nq - 1 - x, of head y)
 * from their chunks' partials: with l_c a chunk's logsumexp (log2 units)
 * and m their max, O = sum_c 2^(l_c - m) O_c / sum_c 2^(l_c - m),
 * L = (m + log2 of that sum) ln 2, the sums in chunk order. Block
 * (g, y): CUT_MERGE_ROWS rows of walk g / (BQ / CUT_MERGE_ROWS), a warp a
 * row, lanes over its columns (the max over the chunks' l, lanes over the
 * chunks); the chunks' slots in shared memory (cut.nc of them). */
template <typename T, int DH, int BQ, class W>
__global__ void __launch_bounds__(32 * CUT_MERGE_ROWS)
    flash_fwd_merge(const float *__restrict__ part_o,
                    const float *__restrict__ part_l, T *__restrict__ o,
                    float *__restrict__ lse, walk_cut cut, W fw,
                    int tq) {
  extern __shared__ int slots[];
  constexpr int GROUPS = BQ / CUT_MERGE_ROWS, PER = (DH + 31) / 32;
  int x = blockIdx.x / GROUPS, b = blockIdx.y, q0 = (fw.nq - 1 - x) * BQ;
  int r = blockIdx.x % GROUPS * CUT_MERGE_ROWS + (threadIdx.x >> 5),
      lane = threadIdx.x & 31;
  int n = cut_slots(cut, fw, x, slots);
  if (q0 + r >= tq) return;   /* past the last row: after the barrier */
  const float *l = part_l + (size_t)b * cut.us * BQ + r;   /* slot s: l[s BQ] */
  float m = -INFINITY;
  for (int c = lane; c < n; c += 32) m = fmaxf(m, l[(size_t)slots[c] * BQ]);
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
  /* chunk 0 holds key 0, which every row sees: m is finite */
  float wsum = 0.f, acc[PER];
#pragma unroll
  for (int i = 0; i < PER; i++) acc[i] = 0.f;
#pragma unroll 4
  for (int c = 0; c < n; c++) {
    size_t sl = (size_t)b * cut.us + slots[c];
    float wt = exp2f(part_l[sl * BQ + r] - m);
    wsum += wt;
    const float *src = part_o + (sl * BQ + r) * DH;
#pragma unroll
    for (int i = 0; i < PER; i++)
      if (lane + 32 * i < DH) acc[i] += wt * src[lane + 32 * i];
  }
  float inv = 1.f / wsum;
  T *dst = o + ((size_t)b * tq + q0 + r) * DH;
#pragma unroll
  for (int i = 0; i < PER; i++)
    if (lane + 32 * i < DH) dst[lane + 32 * i] = elt<T>::store(acc[i] * inv);
  if (lane == 0) lse[(size_t)b * tq + q0 + r] = (m + log2f(wsum)) * FLASH_LN2;
}
/* The merge of partials that add up (the backward's dK and dV, the dQ
 * pass's dQ): for cut walk x (its owned tile of ROWS rows from w.row0(x),
 * of head y), each of NT tensors is the sum of its chunks' partials in
 * chunk order, so results repeat bit for bit. A slot holds the NT
 * tensors' ROWS rows one after another; out0, out1 their destinations
 * (nrows rows a head). Block (g, y): CUT_MERGE_ROWS rows of walk
 * g / (ROWS / CUT_MERGE_ROWS), a warp a row, lanes over its columns; the
 * chunks' slots in shared memory (cut.nc of them). */
template <typename T, int DH, int ROWS, int NT, class W>
__global__ void __launch_bounds__(32 * CUT_MERGE_ROWS)
    flash_sum_merge(const float *__restrict__ part, T *__restrict__ out0,
                    T *__restrict__ out1, walk_cut cut, W w, int nrows) {
  extern __shared__ int slots[];
  constexpr int GROUPS = ROWS / CUT_MERGE_ROWS, PER = (DH + 31) / 32;
  int x = blockIdx.x / GROUPS, b = blockIdx.y, r0 = w.row0(x);
  int r = blockIdx.x % GROUPS * CUT_MERGE_ROWS + (threadIdx.x >> 5),
      lane = threadIdx.x & 31;
  int n = cut_slots(cut, w, x, slots);
  if (r0 + r >= nrows) return;   /* past the last row: after the barrier */
  float sum[NT][PER];
#pragma unroll
  for (int u = 0; u < NT; u++)
#pragma unroll
    for (int i = 0; i < PER; i++) sum[u][i] = 0.f;
#pragma unroll 4
  for (int c = 0; c < n; c++) {
    const float *p = part + (((size_t)b * cut.us + slots[c]) * NT * ROWS + r) * DH;
#pragma unroll
    for (int u = 0; u < NT; u++)
#pragma unroll
      for (int i = 0; i < PER; i++)
        if (lane + 32 * i < DH) sum[u][i] += p[(size_t)u * ROWS * DH + lane + 32 * i];
  }
  size_t row = ((size_t)b * nrows + r0 + r) * DH;
#pragma unroll
  for (int u = 0; u < NT; u++) {
    T *dst = u == 0 ? out0 : out1;
#pragma unroll
    for (int i = 0; i < PER; i++)
      if (lane + 32 * i < DH) dst[row + lane + 32 * i] = elt<T>::store(sum[u][i]);
  }
}
}  // namespace

/* A cut forward's query row rr (of its tile) into the unit's partials
 * (slot pslot, tiles of BQ rows): O over the chunk, its columns
 * 8n + 2t, +1 from o2(n) unnormalised, divided by the row's sum, and L =
 * ref + log2 sum (log2 units). A row with no key in the chunk (causal:
 * keys past it) has sum 0: O 0 and L -inf, which the merge weighs 0. */
template <int DH, int BQ, class O2>
__device__ __forceinline__ void fwd_partial_row(float *part_o, float *part_l,
                                                size_t pslot, int rr, int t,
                                                float sum, float ref, O2 o2) {
  float pinv = sum > 0.f ? 1.f / sum : 0.f;
  float *prow = part_o + (pslot * BQ + rr) * DH;
#pragma unroll
  for (int n = 0; n < DH / 8; n++) {
    float2 v = o2(n);
    *reinterpret_cast<float2 *>(prow + n * 8 + 2 * t) = make_float2(v.x * pinv, v.y * pinv);
  }
  if (t == 0) part_l[pslot * BQ + rr] = sum > 0.f ? ref + log2f(sum) : -INFINITY;
}

/* A cut forward's partials in the engine's workspace: one row of O (Dh
 * floats) and one logsumexp (log2 units) per query row of each of the
 * bh x us cut units (none uncut). */
inline int fwd_cut_partials(engine *e, const walk_cut &cut, int bh, int BQ,
                            int dh, float **part_o, float **part_l) {
  *part_o = *part_l = NULL;
  if (cut.us == 0) return 0;
  size_t rows = (size_t)bh * cut.us * BQ;
  void *ws;
  TRY(cuda_workspace(e, rows * (dh + 1) * sizeof(float), &ws));
  *part_o = (float *)ws;
  *part_l = *part_o + rows * dh;
  return 0;
}

/* After a cut forward on the engine's stream: its cut walks' O and L from
 * their partials (nothing uncut). */
template <typename T, int DH, int BQ, class W>
inline int fwd_cut_merge(engine *e, const walk_cut &cut, const W &fw,
                         const float *part_o, const float *part_l, void *o,
                         float *lse, int bh, int tq) {
  if (cut.us == 0) return 0;
  static_assert(BQ % CUT_MERGE_ROWS == 0, "merge blocks of whole rows");
  flash_fwd_merge<T, DH, BQ, W><<<dim3((cut.n - cut.whole) * (BQ / CUT_MERGE_ROWS), bh),
                                  32 * CUT_MERGE_ROWS, cut.nc * sizeof(int),
                                  cuda_stream(e)>>>(part_o, part_l, (T *)o, lse,
                                                    cut, fw, tq);
  CHECK_LAUNCH();
  return 0;
}

/* After a cut launch on the engine's stream whose partials add up
 * (flash_sum_merge): its cut walks' NT tensors, out0 and out1, from them
 * (part: per cut unit, ROWS rows of each in turn, fp32; nothing uncut). */
template <typename T, int DH, int ROWS, int NT, class W>
inline int sum_cut_merge(engine *e, const walk_cut &cut, const W &w,
                         const float *part, void *out0, void *out1, int bh,
                         int nrows) {
  if (cut.us == 0) return 0;
  static_assert(ROWS % CUT_MERGE_ROWS == 0, "merge blocks of whole rows");
  flash_sum_merge<T, DH, ROWS, NT, W><<<dim3((cut.n - cut.whole) * (ROWS / CUT_MERGE_ROWS), bh),
                                        32 * CUT_MERGE_ROWS, cut.nc * sizeof(int),
                                        cuda_stream(e)>>>(part, (T *)out0, (T *)out1,
                                                          cut, w, nrows);
  CHECK_LAUNCH();
  return 0;
}
#endif

template <class W>
inline walk_cut make_cut(const W &w, int n, int C) {
  walk_cut p;
  p.n = n;
  p.C = C;
  p.nc = (w.walk(0) + C - 1) / C;
  p.units = 0;
  for (int c = 0; c < p.nc; c++) p.units += w.count(c, C);
  p.whole = w.count(0, C) - w.count(1, C);
  p.us = p.units - p.whole;
  return p;
}

/* The host's replay of the block scheduler for cut p (uncut: C the
 * longest walk) over bh heads on sms SMs: each block, in launch order, to
 * the SM that frees first, charged an estimated fixed cost of one tile
 * (its loads of the tiles it keeps, the pipeline's fill, its stores) over
 * its tiles, and a block of a cut walk one more (its fp32 store and the
 * merge's reads). The time the last SM frees, in tiles. heads_fastest:
 * blockIdx.x is the head (the unit otherwise). */
template <class W>
inline long long cut_replay(const walk_cut &p, const W &w, int bh, int sms,
                            bool heads_fastest) {
  std::priority_queue<long long, std::vector<long long>, std::greater<long long>>
      free_at;
  for (int s = 0; s < sms; s++) free_at.push(0);
  for (int a = 0; a < (heads_fastest ? p.units : bh); a++) {
    int u = heads_fastest ? a : 0, x, c, slot;
    for (int b = 0; b < (heads_fastest ? bh : p.units); b++) {
      if (!heads_fastest) u = b;
      cut_unit(p, w, u, &x, &c, &slot);
      int len = w.walk(x), tiles = std::min(len, (c + 1) * p.C) - c * p.C;
      long long t = free_at.top() + tiles + 1 + (len > p.C ? 1 : 0);
      free_at.pop();
      free_at.push(t);
    }
  }
  long long end = 0;
  for (; !free_at.empty(); free_at.pop()) end = free_at.top();
  return end;
}

/* A bound under cut_replay without replaying: the blocks' charges summed
 * (work, every head's walks' tiles; bh x units blocks + 1; bh x us blocks
 * of cut walks + 1 more) spread evenly over the SMs. No SM can free later
 * than the average of them all, so cut_replay(p) >= cut_floor(p). */
inline long long cut_floor(const walk_cut &p, long long work, int bh, int sms) {
  return (work + (long long)bh * (p.units + p.us) + sms - 1) / sms;
}

/* Fewest tiles a chunk: below this a chunk's fixed costs (its loads, the
 * pipeline's fill, its partial store) outweigh its tiles. Measured on one
 * H200 (bf16, one head, causal, seq 1024-4096): at least 4 tiles a chunk
 * ran the backward 1.3-2x and the forward up to 1.6x faster than at least
 * 16, which left most SMs idle at those lengths. The same 4 holds for the
 * mma.sync kernels' tiles of 16-64 rows, though a tile there is a quarter
 * to a half of a wgmma one: fp32 flash on TF32 / 3xTF32 at seq 1024 (H200,
 * one head, causal) ran in chunks of at least 4 tiles at 0.42-0.70 of the
 * time of chunks of at least 256 rows (16 tiles of 16, 8 of 32) at Dh 128
 * and at Dh 64's backward, and the same from 4096 to 16384. */
constexpr int CUT_MIN_TILES = 4;
/* The bytes that cost an SM about one tile's time (an H200 SM's share of
 * HBM against one backward tile at Dh 128, whose fp32 dK and dV partials
 * are 128 KiB): what converts the partials' traffic into tiles. */
constexpr long long CUT_TILE_BYTES = 128 << 10;
/* The saving, in percent of the replayed time, that a smaller chunk must
 * make over a larger one: the replay counts whole tiles and guesses the
 * fixed costs, so closer calls are noise in its model. With ties alone to
 * the larger chunk, the forward at Dh 64, seq 8192 took chunks of 6 tiles
 * (20 tiles replayed) over 16 (21) and ran 1-2% slower on an H200. (Over
 * no cut 3% stays: at 5% the forward at Dh 64, seq 65536 ran uncut, 3%
 * slower than in chunks of 84.) */
constexpr int CUT_MARGIN = 5;

/* The partials' traffic in tiles: each of the bh x us partials (of
 * partial_bytes) written by its block and read by the merge, spread over
 * every SM. The replay's per-block charge covers a chunk's latency; this
 * covers the bandwidth that many small chunks spend (the backward at Dh
 * 128, seq 4096: chunks of 4 tiles ran 0.071 ms against 0.063 in 16). */
inline long long cut_traffic(const walk_cut &p, int bh, int sms,
                             long long partial_bytes) {
  long long per = (long long)sms * CUT_TILE_BYTES;
  return (2LL * bh * p.us * partial_bytes + per - 1) / per;
}

/* The cut to launch: uncut unless a cut balances the SMs better. The host
 * replays the scheduler (cut_replay) uncut and cut into chunks of C =
 * CUT_MIN_TILES x 2^i and C = max(CUT_MIN_TILES, the work over K times
 * the SMs), K = 2, 4, 8, charging a cut two tiles more for the merge
 * kernel's launch and tail and its partials' traffic (cut_traffic), and
 * keeps the cheapest: a cut only where it saves 3% over none, a smaller
 * chunk only where it saves CUT_MARGIN over the larger ones. With many
 * walks a head (bh x n >= 8 x SMs) the scheduler balances them already:
 * uncut, not replayed; nor is a cut whose cut_floor already misses the
 * saving. The replays cost the host up to a few hundred us at long
 * sequences, so launches plan once a shape (plan_cut_memo). force > 0
 * (tests): chunks of force tiles wherever a walk is longer, unreplayed.
 * partial_bytes: one cut unit's partials. */
template <class W>
inline walk_cut plan_cut(const W &w, int n, int bh, int sms, int force,
                         bool heads_fastest, long long partial_bytes) {
  int longest = n > 0 ? w.walk(0) : 0;
  walk_cut uncut = make_cut(w, n, longest > 0 ? longest : 1);
  if (force > 0) {
    if (force >= longest) return uncut;
    walk_cut p = make_cut(w, n, force);
    return p.nc > 1024 || p.units > 65535 ? uncut : p;
  }
  if (n <= 0 || sms < 1 || (long long)bh * n >= 8LL * sms ||
      longest <= CUT_MIN_TILES)
    return uncut;
  long long work = 0;
  for (int x = 0; x < n; x++) work += w.walk(x);
  work *= bh;
  std::vector<int> sizes;
  for (long long C = CUT_MIN_TILES; C < longest; C *= 2) sizes.push_back((int)C);
  for (int K = 2; K <= 8; K *= 2) {
    long long C = std::max<long long>(
        CUT_MIN_TILES, (work + (long long)sms * K - 1) / ((long long)sms * K));
    if (C < longest) sizes.push_back((int)C);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  walk_cut best = uncut;
  long long t_uncut = cut_replay(uncut, w, bh, sms, heads_fastest), t_best = t_uncut;
  /* largest first: a cut must save 3% over none, a smaller chunk
   * CUT_MARGIN % over the best larger one */
  for (auto it = sizes.rbegin(); it != sizes.rend(); ++it) {
    walk_cut p = make_cut(w, n, *it);
    if (p.nc > 1024 || p.units > 65535) continue;
    long long extra = 2 + cut_traffic(p, bh, sms, partial_bytes);
    long long floor = cut_floor(p, work, bh, sms) + extra;
    int keep = best.nc > 1 ? 100 - CUT_MARGIN : 97;
    if (floor * 100 >= t_best * keep) continue;
    long long t = cut_replay(p, w, bh, sms, heads_fastest) + extra;
    if (t * 100 < t_best * keep) {
      best = p;
      t_best = t;
    }
  }
  return best;
}

/* A memo key: the caller's sizes, then sms, force and partial_bytes. */
inline void cut_memo_key(const int key[CUT_MEMO_KEY - 3], int sms, int force,
                         long long partial_bytes, int k[CUT_MEMO_KEY]) {
  for (int i = 0; i < CUT_MEMO_KEY - 3; i++) k[i] = key[i];
  k[CUT_MEMO_KEY - 3] = sms;
  k[CUT_MEMO_KEY - 2] = force;
  k[CUT_MEMO_KEY - 1] = (int)partial_bytes;
}
/* The chunk size kept under k, or 0 when none is. */
inline int cut_memo_find(const cut_memo *m, const int k[CUT_MEMO_KEY]) {
  for (int e = 0; e < CUT_MEMO_ENTRIES; e++) {
    const cut_memo_entry &x = m->e[e];
    if (x.C > 0 && std::equal(k, k + CUT_MEMO_KEY, x.key)) return x.C;
  }
  return 0;
}
/* Keeps C under k in place of the oldest entry. */
inline void cut_memo_put(cut_memo *m, const int k[CUT_MEMO_KEY], int C) {
  cut_memo_entry &x = m->e[m->next];
  m->next = (m->next + 1) % CUT_MEMO_ENTRIES;
  std::copy(k, k + CUT_MEMO_KEY, x.key);
  x.C = C;
}

/* plan_cut once a launch shape: key names the shape (the caller's sizes;
 * sms, force and partial_bytes are added here), a hit rebuilds the cut
 * from its chunk size. The key holds everything plan_cut reads, so an
 * entry never goes stale; a miss replaces the oldest entry. */
template <class W>
inline walk_cut plan_cut_memo(cut_memo *m, const int key[CUT_MEMO_KEY - 3],
                              const W &w, int n, int bh, int sms, int force,
                              bool heads_fastest, long long partial_bytes) {
  int k[CUT_MEMO_KEY];
  cut_memo_key(key, sms, force, partial_bytes, k);
  if (int C = cut_memo_find(m, k)) return make_cut(w, n, C);
  walk_cut p = plan_cut(w, n, bh, sms, force, heads_fastest, partial_bytes);
  cut_memo_put(m, k, p.C);
  return p;
}

#ifdef __CUDACC__
/* key[0] of an mma.sync kernel's plan: the kernel (KERNEL: 2 the forward,
 * 3 the dK/dV pass, 4 the dQ pass) and its instance's element type and
 * products, which set its registers, so its occupancy, so the plan. */
template <typename T, bool X3>
constexpr int mma_cut_key(int kernel) {
  return 4 * kernel + (sizeof(T) == 4 ? 2 + X3 : std::is_same<T, __nv_bfloat16>::value);
}

/* plan_cut_memo for a kernel that holds several blocks an SM (the
 * mma.sync ones): planned over every block the GPU holds at once (SMs x
 * the kernel's occupancy at `threads` and `smem`), heads slowest. The
 * key is taken over the SMs alone, key[0] naming the instance
 * (mma_cut_key), so a hit asks the driver nothing; a miss sets `smem` as
 * the kernel's dynamic shared memory and queries its occupancy. */
template <class W, class K>
inline int plan_cut_blocks(engine *e, K kernel, int threads, size_t smem,
                           const int key[CUT_MEMO_KEY - 3], const W &w, int n,
                           int bh, long long partial_bytes, walk_cut *cut) {
  cuda_engine *ce = cuda_impl(e);
  int k[CUT_MEMO_KEY];
  cut_memo_key(key, ce->sms, ce->flash_cut_force, partial_bytes, k);
  if (int C = cut_memo_find(&ce->cuts, k)) {
    *cut = make_cut(w, n, C);
    return 0;
  }
  int per_sm = 0;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads,
                                                           smem));
  *cut = plan_cut(w, n, bh, ce->sms * (per_sm > 0 ? per_sm : 1), ce->flash_cut_force,
                  false, partial_bytes);
  cut_memo_put(&ce->cuts, k, cut->C);
  return 0;
}
#endif

#endif
