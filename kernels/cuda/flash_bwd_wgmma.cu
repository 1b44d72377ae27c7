/* FlashAttention backward on Hopper's warpgroup products (wgmma), one pass
 * (FlashAttention-3's shape), bf16 / f16 at head dims 64, 80 and 128 on
 * sm_90a.
 *
 * A block owns BK = 128 keys (64 per warpgroup) and walks the query tiles
 * of BQ rows that can see them, upwards from the first:
 *   S^T = K Q^T, dP^T = V dO^T        (m64nBQ, A and B in shared memory)
 *   P^T = exp2(S^T scale log2e - L log2e), dS^T = P^T (dP^T - D)
 *   dV += P^T dO                      (A = P^T from registers)
 *   dK += dS^T Q                      (A = dS^T, written to shared memory
 *                                      for dQ anyway, read K-major)
 *   dQ_part = dS K                    (dS^T read MN-major, m64n64)
 * dK and dV stay in registers until the walk ends. Each tile's dQ (fp32)
 * is added into an fp32 accumulator in global memory by the copy engine
 * (cp.reduce.async.bulk .add.f32: every element's add is atomic, so blocks
 * never race); a last kernel scales it and rounds it to dq. Against the
 * two-pass kernels (flash_bwd.cu) this computes S and dP once instead of
 * twice: 5 products per (query, key) pair instead of 7. Sums of dQ arrive
 * in whatever order blocks finish, so dq may differ in the last bits from
 * run to run; dk and dv repeat bit for bit.
 *
 * Tiles per head dim (bwd_tiles): a thread holds dK and dV (2 x Dh / 2
 * floats), S^T and dP^T (2 x BQ / 2) and 32 of dQ: 224 floats at Dh 64
 * and 128, 176 at 80.
 *   Dh 64: BQ = 128; each warpgroup's dQ is 64 of the tile's queries at
 *     all 64 columns.
 *   Dh 80, 128: two column blocks of 64 (DHP = 128; Dh 80's second block
 *     is the loads' zero fill, and S^T, dP^T stop their k-steps at 80),
 *     BQ = 64 so that S^T and dP^T shrink as dK and dV grow; each
 *     warpgroup's dQ is the tile's 64 queries at one column block.
 *
 * The accumulator's layout in global memory is the registers' (chunks of
 * 64 rows x 64 columns, thread-major; chunk (row block, column block) at
 * row block * CB + column block), so the shared-memory copy is
 * conflict-free and one bulk operation moves it; dq_convert undoes it.
 *
 * Q / dO tiles (with their L and D) come by TMA into two stages guarded by
 * full / empty mbarriers, as in flash_fwd_wgmma.cu; a producer
 * warpgroup's first thread issues them (Dh 80 / 128), else warpgroup 1's.
 * L (log2 units) and D are copied by flash_bwd_prep into arrays padded to
 * whole tiles, so a tile's BQ values are one aligned bulk copy.
 *
 * Cut walks (flash_cut.cuh): with few key blocks a head, a block's walk
 * over the query tiles may be cut into chunks, a block a chunk; the chunks
 * of a cut walk add their dQ as every block does and write their dK, dV
 * (fp32) to the scratch, which flash_sum_merge sums in chunk order (dk, dv
 * still repeat bit for bit). */
#include "kernels/cuda/wgmma.cuh"
#include "kernels/cuda/flash_cut.cuh"

namespace {

constexpr int NWG = 2, NT = 128 * NWG, BK = 128;
/* At Dh 80 / 128 a producer warpgroup (after the NWG math warpgroups)
 * issues the loads, keeping 24 registers a thread while the math
 * warpgroups take 240 (setmaxnreg, FlashAttention-3's split), and the
 * loop takes FlashAttention-3's order, whose dQ leaves the registers
 * within the tile. At Dh 64 the math warpgroups need 250 and one of
 * their threads issues the loads. */
__host__ __device__ constexpr bool bwd_producer(int dh) { return dh > 64; }
__host__ __device__ constexpr int bwd_threads(int dh) { return NT + (bwd_producer(dh) ? 128 : 0); }
/* Shared memory (bytes, after the 1024-byte alignment): K, V; two stages
 * of Q, dO, L, D; two dS^T buffers (a tile's dS is read by the other
 * warpgroup's dQ product, so the next tile writes the other one); one dQ
 * staging chunk per warpgroup. Every tile is CB column blocks of `rows`
 * 128-byte lines (wgmma.cuh's layout). */
/* Query rows a tile: 128 at Dh 64, 64 where dK and dV take two column
 * blocks (see the top). */
constexpr int bwd_rows(int dh) { return (dh + 63) / 64 == 1 ? 128 : 64; }

template <int DH> struct bwd_tiles {
  static constexpr int CB = (DH + 63) / 64, DHP = 64 * CB, BQ = bwd_rows(DH);
  static constexpr int KBYTES = BK * CB * 128, QBYTES = BQ * CB * 128,
                       DS_BYTES = BK * BQ * 2, DQ_BYTES = 64 * 64 * 4,
                       OFF_K = 0, OFF_V = OFF_K + KBYTES,
                       OFF_Q = OFF_V + KBYTES, OFF_DO = OFF_Q + 2 * QBYTES,
                       OFF_DS = OFF_DO + 2 * QBYTES,
                       OFF_DQ = OFF_DS + 2 * DS_BYTES,
                       OFF_L = OFF_DQ + NWG * DQ_BYTES,
                       OFF_D = OFF_L + 2 * BQ * 4,
                       SMEM = OFF_D + 2 * BQ * 4 + 1024;
  static_assert(SMEM <= 227 * 1024, "fits an H100's shared memory");
};

using bwd_walks = bwd_walks_t<BK>;   /* flash_cut.cuh */

/* The walks and the cut of a launch at these sizes (launch; the tests
 * count its chunks through cuda_flash_bwd_chunks). */
walk_cut bwd_plan(cuda_engine *ce, int bh, int tq, int tk, int dh,
                  int causal, bwd_walks *bw) {
  int BQ = bwd_rows(dh);
  *bw = {(tq + BQ - 1) / BQ, (tk + BK - 1) / BK, BQ, causal};
  const int key[] = {1, bh, tq, tk, dh * 2 + !!causal};
  /* a cut unit's partials: BK rows of dK and of dV, fp32 */
  return plan_cut_memo(&ce->cuts, key, *bw, bw->nk, bh, ce->sms,
                       ce->flash_cut_force, false, 2LL * BK * dh * 4);
}

/* L in log2 units and D = rowsum(dO * O) into arrays of tqp (tq rounded
 * up to BQ) per head, padding rows 0, and each row's DHP floats of the dQ
 * accumulator zeroed. PREP_LANES lanes a row, each reading 16-byte chunks
 * of O and dO (rows are 16-byte aligned: the launcher's checks and Dh x 2
 * bytes), so that a lane has a row's share in flight at once. */
constexpr int PREP_LANES = 8;
template <typename T, int DH>
__global__ void flash_bwd_prep(const T *__restrict__ o,
                               const T *__restrict__ dout,
                               const float *__restrict__ lse,
                               float *__restrict__ l2, float *__restrict__ D,
                               float *__restrict__ acc, int bh, int tq,
                               int tqp) {
  constexpr int DHP = bwd_tiles<DH>::DHP, NCH = DH * (int)sizeof(T) / 16;
  long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / PREP_LANES;
  int j = threadIdx.x % PREP_LANES;
  if (r >= (long long)bh * tqp) return;   /* a row's lanes leave together */
  int b = (int)(r / tqp), i = (int)(r % tqp);
  float4 *a4 = reinterpret_cast<float4 *>(acc + r * DHP);
#pragma unroll
  for (int c = j; c < DHP / 4; c += PREP_LANES) a4[c] = make_float4(0.f, 0.f, 0.f, 0.f);
  float s = 0.f;
  if (i < tq) {
    size_t row = ((size_t)b * tq + i) * DH;
    const uint4 *o4 = reinterpret_cast<const uint4 *>(o + row),
                *d4 = reinterpret_cast<const uint4 *>(dout + row);
#pragma unroll
    for (int c = j; c < NCH; c += PREP_LANES) {
      uint4 ov = o4[c], dv = d4[c];
      const T *o8 = reinterpret_cast<const T *>(&ov),
              *d8 = reinterpret_cast<const T *>(&dv);
#pragma unroll
      for (int e = 0; e < 8; e++) s += elt<T>::load(o8[e]) * elt<T>::load(d8[e]);
    }
  }
  unsigned group = 0xffu << (threadIdx.x & 31 & ~(PREP_LANES - 1));
#pragma unroll
  for (int m = PREP_LANES / 2; m > 0; m >>= 1) s += __shfl_xor_sync(group, s, m);
  if (j == 0) {
    D[r] = s;
    l2[r] = i < tq ? lse[(size_t)b * tq + i] * FLASH_LOG2E : 0.f;
  }
}

/* dq = scale * acc, from the accumulator's register-major layout: block x
 * of head b is chunk x (rows 64 (x / CB) .., columns 64 (x % CB) ..); in
 * a chunk, float4 n of thread x' (warp w = x' / 32, g = x' % 32 / 4,
 * u = x' % 4) is rows 16w + g and 16w + g + 8, columns 8n + 2u and
 * 8n + 2u + 1. The chunk comes into shared memory in whole 512-byte
 * lines a warp (float4 n of thread x' at n * 129 + x': the pad of one
 * float4 a row of 128 spreads the gather below over the banks); then a
 * thread writes 8 columns of one row (one 16-byte store), gathering them
 * from the four threads u; columns past Dh (80's padding) are not
 * written. */
template <typename T, int DH>
__global__ void flash_dq_convert(const float *__restrict__ acc,
                                 T *__restrict__ dq, int tq, int tqp,
                                 float scale) {
  constexpr int CB = bwd_tiles<DH>::CB, LD = 129;
  __shared__ float4 sc[8 * LD];
  int ch = blockIdx.x, b = blockIdx.y, rb = ch / CB, cb = ch % CB;
  const float4 *src = reinterpret_cast<const float4 *>(
      acc + ((size_t)b * (tqp / 64) * CB + ch) * 64 * 64);
#pragma unroll
  for (int n = 0; n < 8; n++) sc[n * LD + threadIdx.x] = src[n * 128 + threadIdx.x];
  __syncthreads();
#pragma unroll
  for (int it = 0; it < 64 * 64 / 8 / 128; it++) {
    int p = threadIdx.x + 128 * it, R = p >> 3, n = p & 7;
    int r = rb * 64 + R, col = cb * 64 + n * 8;
    if (r >= tq || col >= DH) continue;
    int x0 = (R >> 4) * 32 + (R & 7) * 4, hh = (R >> 3) & 1;
    uint32_t out[4];
#pragma unroll
    for (int u = 0; u < 4; u++) {
      float2 v = *(reinterpret_cast<const float2 *>(&sc[n * LD + x0 + u]) + hh);
      out[u] = elt<T>::pack(v.x * scale, v.y * scale);
    }
    *reinterpret_cast<uint4 *>(dq + ((size_t)b * tq + r) * DH + col) =
        make_uint4(out[0], out[1], out[2], out[3]);
  }
}

/* CUT: compiled for a cut launch (cut.us > 0); the uncut instance folds
 * the chunk arithmetic and the partial stores away (flash_fwd_wg's). */
template <typename T, int DH, bool CUT>
__global__ void __launch_bounds__(bwd_threads(DH), 1)
    flash_bwd_wg(const __grid_constant__ CUtensorMap qmap,
                 const __grid_constant__ CUtensorMap kmap,
                 const __grid_constant__ CUtensorMap vmap,
                 const __grid_constant__ CUtensorMap omap,
                 const float *__restrict__ l2, const float *__restrict__ Dp,
                 float *__restrict__ dqacc, T *__restrict__ dk,
                 T *__restrict__ dv, float *__restrict__ part, walk_cut cut,
                 bwd_walks bw, int tq, int tk, int tqp, int causal,
                 float scale, float scale_log2) {
#if TL_WGMMA
  using C = bwd_tiles<DH>;
  /* k-steps of S^T and dP^T: up to Dh, not into the padding (dV and dK,
   * m64nDh products, stop at Dh too) */
  constexpr int CB = C::CB, DHP = C::DHP, BQ = C::BQ, KS = (DH + 15) / 16;
  extern __shared__ unsigned char smem_raw[];
  __shared__ uint64_t full_kv, full[2], empty[2];
  unsigned char *sm = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char *sk = sm + C::OFF_K, *sv = sm + C::OFF_V;
  float *sl = reinterpret_cast<float *>(sm + C::OFF_L),
        *sd = reinterpret_cast<float *>(sm + C::OFF_D);

  /* Unit blockIdx.x: chunk kc of walk kx, key block kx (uncut: kx). */
  int b = blockIdx.y, kx = blockIdx.x, kc = 0, slot = 0;
  if constexpr (CUT) cut_unit(cut, bw, (int)blockIdx.x, &kx, &kc, &slot);
  int k0 = CUT ? kx * BK : blockIdx.x * BK;   /* uncut: as before cuts */
  int wg = threadIdx.x >> 7, x = threadIdx.x & 127, w = x >> 5,
      g = (x & 31) >> 2, t = x & 3;
  int wk0 = k0 + wg * 64;
  int nq = (tq + BQ - 1) / BQ;
  /* The walk: query tiles from the first that sees key k0 (causal;
   * earlier ones see none of ours) up to nq - 1, this chunk's from sb on.
   * Upwards, concurrent blocks of a head start at different tiles, so
   * their dQ adds go to different addresses. */
  int i0 = causal ? min(k0 / BQ, nq) : 0, walk = nq - i0;   /* bw.walk(kx) */
  int sb = CUT ? kc * cut.C : 0;
  int ntiles = CUT ? min(walk, sb + cut.C) - sb : walk;
  bool partial = CUT && walk > cut.C;   /* a cut walk: dK, dV to the slot */
  /* The loads' issuer: the producer's first thread, else warpgroup 1's
   * first: a stage is refilled once every math thread has released it,
   * and warpgroup 1 releases last (it issues its S^T, dP^T after
   * warpgroup 0's), so its issuer finds the release done; warpgroup 0's
   * waited for warpgroup 1 there, with the rest of its warpgroup behind
   * it at the dQ flush's barrier. */
  constexpr bool PRODUCER = bwd_producer(DH);
  bool issuer = threadIdx.x == (PRODUCER ? NT : 128), elected = x == 0;
  l2 += (size_t)b * tqp;
  Dp += (size_t)b * tqp;

  /* A tile of `rows` rows: one box of 64 columns per column block; rows
   * and columns past the tensor's end arrive as zeros. */
  auto load = [&](unsigned char *dst, const CUtensorMap *map, uint64_t *bar,
                  int row0, int rows) {
#pragma unroll
    for (int c = 0; c < CB; c++)
      tma_load_3d(dst + c * rows * 128, map, bar, c * 64, row0, b);
  };
  /* Tile s of the chunk is query tile i0 + sb + s, in stage s & 1. */
  auto load_tile = [&](int s) {
    int st = s & 1, q0 = (i0 + sb + s) * BQ;
    mbar_expect_tx(&full[st], 2 * C::QBYTES + 2 * BQ * 4);
    load(sm + C::OFF_Q + st * C::QBYTES, &qmap, &full[st], q0, BQ);
    load(sm + C::OFF_DO + st * C::QBYTES, &omap, &full[st], q0, BQ);
    bulk_load(sl + st * BQ, l2 + q0, BQ * 4, &full[st]);
    bulk_load(sd + st * BQ, Dp + q0, BQ * 4, &full[st]);
  };
  auto load_kv = [&] {
    mbar_expect_tx(&full_kv, 2 * C::KBYTES);
    load(sk, &kmap, &full_kv, k0, BK);
    load(sv, &vmap, &full_kv, k0, BK);
  };
  if (issuer) {
    mbar_init(&full_kv, 1);
    for (int i = 0; i < 2; i++) {
      mbar_init(&full[i], 1);
      mbar_init(&empty[i], NT);
    }
    mbar_fence_init();
  }
  __syncthreads();
  if constexpr (PRODUCER) {
    /* K and V once, then each tile's stage once the tile two before it
     * has left it (every math thread arrives on empty). */
    if (wg == NWG) {
      wg_regs_dec<24>();
      if (issuer) {
        load_kv();
        for (int s = 0; s < ntiles; s++) {
          if (s >= 2) mbar_wait(&empty[s & 1], ((s - 2) >> 1) & 1);
          load_tile(s);
        }
      }
      return;
    }
    wg_regs_inc<240>();
  } else if (issuer) {
    load_kv();
    for (int s = 0; s < min(ntiles, 2); s++) load_tile(s);
  }

  float accv[DH / 2], acck[DH / 2], dq[32];
#pragma unroll
  for (int i = 0; i < DH / 2; i++) accv[i] = acck[i] = 0.f;
  mbar_wait(&full_kv, 0);
  /* This warpgroup's dQ chunk of a tile: at Dh 64 the tile's query block
   * wg (all columns), else column block wg (all 64 queries). */
  const int qb = CB == 1 ? wg : 0, cbk = CB == 1 ? 0 : wg;
  float *dq_dst = dqacc + (size_t)b * tqp * DHP;
  unsigned char *sdq = sm + C::OFF_DQ + wg * C::DQ_BYTES;
  /* Stage a finished dQ chunk (registers) and send it to global memory. */
  auto flush_dq = [&](int s) {
    int chunk = ((i0 + sb + s) * (BQ / 64) + qb) * CB + cbk;
    if (elected) bulk_wait_read();   /* the previous flush has left sdq */
    named_bar(2 + wg, 128);
#pragma unroll
    for (int n = 0; n < 8; n++)
      reinterpret_cast<float4 *>(sdq)[n * 128 + x] =
          make_float4(dq[4 * n], dq[4 * n + 1], dq[4 * n + 2], dq[4 * n + 3]);
    fence_async_smem();
    named_bar(2 + wg, 128);
    if (elected)
      bulk_reduce_add_f32(dq_dst + (size_t)chunk * 64 * 64, sdq, C::DQ_BYTES);
  };

  /* acc (64 x BQ) = this warpgroup's 64 rows of the owned tile a (BK
   * rows) times the streamed tile b (BQ rows) transposed, over Dh; both
   * K-major. */
  auto product_abt = [&](float *acc, const unsigned char *a,
                         const unsigned char *b) {
    wgmma<T, BQ>::ss0(acc, wg_desc(a + wg * 64 * 128, 16, 1024),
                      wg_desc(b, 16, 1024));
#pragma unroll
    for (int kk = 1; kk < KS; kk++)
      wgmma<T, BQ>::ss(
          acc, wg_desc(a + (kk >> 2) * BK * 128 + wg * 64 * 128 + (kk & 3) * 32, 16, 1024),
          wg_desc(b + (kk >> 2) * BQ * 128 + (kk & 3) * 32, 16, 1024), 1);
  };

  for (int s = 0; s < ntiles; s++) {
    int st = s & 1, q0 = (i0 + sb + s) * BQ;
    const unsigned char *sq = sm + C::OFF_Q + st * C::QBYTES,
                        *sdo = sm + C::OFF_DO + st * C::QBYTES;
    unsigned char *sds = sm + C::OFF_DS + st * C::DS_BYTES;
    float sacc[BQ / 2], dacc[BQ / 2];
    /* Unconditional: ptxas must see nothing pending when S^T, dP^T are
     * issued, or it serialises every product (C7511). */
    wg_wait<0>();
    wg_hold<DH / 2>(accv);
    wg_hold<DH / 2>(acck);
    if constexpr (!PRODUCER) wg_hold<32>(dq);
    mbar_wait(&full[st], (s >> 1) & 1);
    /* Warpgroup 1 issues its S^T, dP^T after warpgroup 0's, so its softmax
     * runs while the tensor cores work for warpgroup 0 (and warpgroup 0's
     * dV, dK while warpgroup 1's softmax runs). */
    if (wg == 1) named_bar(4, NT);
    wg_fence();
    product_abt(sacc, sk, sq);   /* S^T = K Q^T */
    wg_commit();
    product_abt(dacc, sv, sdo);  /* dP^T = V dO^T */
    wg_commit();
    if (wg == 0) named_bar_arrive(4, NT);
    /* Under S^T, dP^T: release tile s - 1's stage (its products are done),
     * refill it (without a producer), and send tile s - 1's dQ (the
     * producer's order sent it at the end of tile s - 1). */
    if (s > 0) {   /* tile s - 1's dV, dK, dQ are done: its stage is free */
      mbar_arrive(&empty[(s - 1) & 1]);
      if constexpr (!PRODUCER) {
        if (issuer && s + 1 < ntiles) {
          mbar_wait(&empty[(s + 1) & 1], ((s - 1) >> 1) & 1);
          load_tile(s + 1);
        }
        flush_dq(s - 1);
      }
    }
    /* P^T needs S^T only: its exponentials (the loop's special-function
     * work) run while the tensor cores finish dP^T (FlashAttention-3's
     * order). */
    wg_wait<1>();
    wg_hold<BQ / 2>(sacc);

    /* sacc[4i + e]: key wk0 + 16w + g + 8 (e >> 1), query q0 + 8i + 2t +
     * (e & 1). P^T overwrites S^T and goes into A fragments (c_to_a's
     * layout); dS^T also goes into shared memory for dQ. */
    bool edge = q0 + BQ > tq || k0 + BK > tk || (causal && wk0 + 63 > q0);
    const float *tl = sl + st * BQ, *td = sd + st * BQ;
    uint32_t pa[BQ / 16][4], dsa[4];
#pragma unroll
    for (int i = 0; i < BQ / 8; i++) {
      float2 lv = *reinterpret_cast<const float2 *>(tl + 8 * i + 2 * t);
#pragma unroll
      for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
          int j = 4 * i + 2 * h + e;
          float p = exp2_ftz(fmaf(sacc[j], scale_log2, -(e ? lv.y : lv.x)));
          if (edge) {
            int key = wk0 + 16 * w + g + 8 * h, col = q0 + 8 * i + 2 * t + e;
            if (col >= tq || key >= tk || (causal && key > col)) p = 0.f;
          }
          sacc[j] = p;
        }
        pa[i / 2][2 * (i & 1) + h] = elt<T>::pack(sacc[4 * i + 2 * h], sacc[4 * i + 2 * h + 1]);
      }
    }
    wg_wait<0>();
    wg_hold<BQ / 2>(dacc);
#pragma unroll
    for (int i = 0; i < BQ / 8; i++) {
      float2 dd = *reinterpret_cast<const float2 *>(td + 8 * i + 2 * t);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        int j = 4 * i + 2 * h;
        dsa[2 * (i & 1) + h] = elt<T>::pack(sacc[j] * (dacc[j] - dd.x),
                                            sacc[j + 1] * (dacc[j + 1] - dd.y));
      }
      /* dS^T into shared memory, a pair of i at a time: row = key (0..127
       * in the block), 64-query column blocks, 16-byte chunks swizzled by
       * row % 8. Matrix m of the stmatrix is dsa[m]: queries 8 (i - 1 +
       * (m >> 1)) .., keys 16w + 8 (m & 1) ..; lane l gives its row l % 8,
       * whose chunk (i - 1 + (m >> 1)) % 8 is (i - 1) % 8 ^ (m >> 1), i - 1
       * being even. */
      if (i & 1) {
        int lm = (x & 31) >> 3, lr = x & 7;
        stmatrix_x4(smem_addr(sds) + ((i - 1) >> 3) * BK * 128 +
                        (wg * 64 + 16 * w + 8 * (lm & 1) + lr) * 128 +
                        ((((i - 1) & 7) ^ (lm >> 1) ^ lr) << 4),
                    dsa);
      }
    }
    /* dV += P^T dO: A = P^T from registers, B = dO. */
    auto issue_dv = [&] {
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < BQ / 16; kk++)
        wgmma<T, DH>::rs(accv, pa[kk], wg_desc(sdo + kk * 16 * 128, BQ * 128, 1024));
    };
    /* dK += dS^T Q: A = this warpgroup's dS^T rows read K-major (16
     * queries a step), B = Q read MN-major. */
    auto issue_dk = [&] {
#pragma unroll
      for (int kk = 0; kk < BQ / 16; kk++)
        wgmma<T, DH>::ss_nt(acck,
                             wg_desc(sds + (kk >> 2) * BK * 128 + wg * 64 * 128 + (kk & 3) * 32, 16, 1024),
                             wg_desc(sq + kk * 16 * 128, BQ * 128, 1024));
    };
    /* This warpgroup's dQ chunk, keys 16 kk ..: A = dS (queries x keys)
     * is the stored dS^T read MN-major at query block qb, B = K read
     * MN-major at column block cbk; `first` starts the sum. */
    auto dq_step = [&](int kk, bool first) {
      uint64_t a = wg_desc(sds + qb * BK * 128 + kk * 16 * 128, BK * 128, 1024),
               b = wg_desc(sk + cbk * BK * 128 + kk * 16 * 128, BK * 128, 1024);
      if (first)
        wgmma<T, 64>::ss_tt0(dq, a, b);
      else
        wgmma<T, 64>::ss_tt(dq, a, b, 1);
    };
    if constexpr (PRODUCER) {
      /* FlashAttention-3's order: dV, then once both warpgroups' dS^T
       * rows are in, dQ and dK; dQ's registers go to shared memory and on
       * to global memory while dK runs, so they are free again before the
       * next tile's S^T, dP^T (within 240 registers). */
      fence_async_smem();   /* dS^T: read by the products (async proxy) */
      issue_dv();
      wg_commit();
      named_bar(1, NT);   /* both warpgroups' dS^T rows are in */
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) dq_step(kk, kk == 0);
      wg_commit();
      issue_dk();
      wg_commit();
      wg_wait<1>();   /* dV and dQ are in; dK may run on */
      wg_hold<32>(dq);
      flush_dq(s);
    } else {
      /* dV reads no dS^T: issued ahead of the fence, whose wait for the
       * stmatrix stores and the barrier behind it then run under dV. */
      issue_dv();
      fence_async_smem();
      named_bar(2 + wg, 128);   /* this warpgroup's dS^T rows are in */
      issue_dk();
      /* dQ over the 64 keys whose dS^T rows are this warpgroup's own
       * first, then, once both warpgroups' rows are in, the other 64: the
       * block barrier's wait runs under the first half. */
      const int own = wg * (BK / 32), other = (1 - wg) * (BK / 32);
#pragma unroll
      for (int kk = 0; kk < BK / 32; kk++) dq_step(own + kk, kk == 0);
      wg_commit();
      named_bar(1, NT);   /* both warpgroups' dS^T rows are in */
#pragma unroll
      for (int kk = 0; kk < BK / 32; kk++) dq_step(other + kk, false);
      wg_commit();
    }
  }
  wg_wait<0>();
  wg_hold<DH / 2>(accv);
  wg_hold<DH / 2>(acck);
  if (ntiles > 0) {
    if constexpr (!PRODUCER) {
      wg_hold<32>(dq);
      flush_dq(ntiles - 1);
    }
    if (elected) bulk_wait();
  }

  /* acc[4n + 2h + e]: key wk0 + 16w + g + 8h, column 8n + 2t + e; the
   * columns of Dh 80's padding are not stored. */
#pragma unroll
  for (int h = 0; h < 2; h++) {
    int key = wk0 + 16 * w + g + 8 * h;
    if (key < tk && partial) {   /* slot: dV's BK rows, then dK's */
      float *pv = part + (((size_t)b * cut.us + slot) * 2 * BK + (key - k0)) * DH,
            *pk = pv + (size_t)BK * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++) {
        *reinterpret_cast<float2 *>(pv + n * 8 + 2 * t) =
            make_float2(accv[4 * n + 2 * h], accv[4 * n + 2 * h + 1]);
        *reinterpret_cast<float2 *>(pk + n * 8 + 2 * t) = make_float2(
            acck[4 * n + 2 * h] * scale, acck[4 * n + 2 * h + 1] * scale);
      }
    } else if (key < tk) {
      size_t row = ((size_t)b * tk + key) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++) {
        *reinterpret_cast<uint32_t *>(dv + row + n * 8 + 2 * t) =
            elt<T>::pack(accv[4 * n + 2 * h], accv[4 * n + 2 * h + 1]);
        *reinterpret_cast<uint32_t *>(dk + row + n * 8 + 2 * t) = elt<T>::pack(
            acck[4 * n + 2 * h] * scale, acck[4 * n + 2 * h + 1] * scale);
      }
    }
  }
#else
  __trap();
#endif
}

template <typename T, int DH>
int launch(engine *e, const void *q, const void *k, const void *v,
           const void *o, const void *dout, const float *lse, void *dq,
           void *dk, void *dv, int bh, int tq, int tk, int causal,
           float scale, dtype dt) {
  using C = bwd_tiles<DH>;
  static const char *op = "k_attention_bwd";
  int tqp = (tq + C::BQ - 1) / C::BQ * C::BQ;
  cuda_engine *ce = cuda_impl(e);
  bwd_walks bw;
  walk_cut cut = bwd_plan(ce, bh, tq, tk, DH, causal, &bw);
  size_t nacc = (size_t)bh * tqp * C::DHP, npad = (size_t)bh * tqp,
         npart = (size_t)bh * cut.us * 2 * BK * DH;
  void *ws;
  TRY(cuda_workspace(e, (nacc + 2 * npad + npart) * sizeof(float), &ws));
  float *acc = (float *)ws, *l2 = acc + nacc, *D = l2 + npad,
        *part = cut.us > 0 ? D + npad : NULL;
  CUtensorMap qm, km, vm, om;
  TRY(wg_tensor_map(&qm, q, dt, bh, tq, DH, C::BQ, op));
  TRY(wg_tensor_map(&km, k, dt, bh, tk, DH, BK, op));
  TRY(wg_tensor_map(&vm, v, dt, bh, tk, DH, BK, op));
  TRY(wg_tensor_map(&om, dout, dt, bh, tq, DH, C::BQ, op));
  cudaStream_t st = cuda_stream(e);
  constexpr int prep_rows = 256 / PREP_LANES;   /* a block's */
  flash_bwd_prep<T, DH><<<(unsigned)((npad + prep_rows - 1) / prep_rows), 256, 0, st>>>(
      (const T *)o, (const T *)dout, lse, l2, D, acc, bh, tq, tqp);
  CHECK_LAUNCH();
  auto kernel = cut.us > 0 ? flash_bwd_wg<T, DH, true> : flash_bwd_wg<T, DH, false>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  C::SMEM));
  if (bh > 65535)
    FAIL(ERR_FAIL, "%s: batch x heads %d (allowed: at most 65535, a grid "
         "dimension's limit)", op, bh);
  dim3 grid(cut.units, bh);
  kernel<<<grid, bwd_threads(DH), C::SMEM, st>>>(
      qm, km, vm, om, l2, D, acc, (T *)dk, (T *)dv, part, cut, bw, tq, tk, tqp,
      causal, scale, scale * FLASH_LOG2E);
  CHECK_LAUNCH();
  /* a slot: dV's BK rows, then dK's */
  TRY((sum_cut_merge<T, DH, BK, 2>(e, cut, bw, part, dv, dk, bh, tk)));
  flash_dq_convert<T, DH><<<dim3(tqp / 64 * C::CB, bh), 128, 0, st>>>(
      acc, (T *)dq, tq, tqp, scale);
  CHECK_LAUNCH();
  return 0;
}

template <typename T>
int launch_dh(engine *e, const void *q, const void *k, const void *v,
              const void *o, const void *dout, const float *lse, void *dq,
              void *dk, void *dv, int bh, int tq, int tk, int dh, int causal,
              float scale, dtype dt) {
  switch (dh) {
  case 64: return launch<T, 64>(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk, causal, scale, dt);
  case 80: return launch<T, 80>(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk, causal, scale, dt);
  case 128: return launch<T, 128>(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk, causal, scale, dt);
  }
  FAIL(ERR_FAIL, "k_attention_bwd: the wgmma kernel takes head dims 64, 80 "
       "and 128 (got dh=%d)", dh);
}

}  // namespace

int cuda_flash_bwd_chunks(engine *e, int bh, int tq, int tk, int dh,
                          int causal) {
  bwd_walks bw;
  return bwd_plan(cuda_impl(e), bh, tq, tk, dh, causal, &bw).nc;
}

int cuda_flash_bwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, const void *o, const void *dout,
                         const float *lse, void *dq, void *dk, void *dv,
                         int bh, int tq, int tk, int dh, int causal,
                         float scale, dtype dt) {
  if (dt == DT_BF16)
    return launch_dh<__nv_bfloat16>(e, q, k, v, o, dout, lse, dq, dk, dv, bh,
                                    tq, tk, dh, causal, scale, dt);
  if (dt == DT_F16)
    return launch_dh<__half>(e, q, k, v, o, dout, lse, dq, dk, dv, bh, tq, tk,
                             dh, causal, scale, dt);
  FAIL(ERR_FAIL, "k_attention_bwd: the wgmma kernel takes bf16 / f16 (got "
       "%s, dh=%d)", dtype_name(dt), dh);
}
