/* FlashAttention-2 forward on Hopper's warpgroup products (wgmma): the
 * same algorithm and outputs as flash_fwd.cu's tensor-core kernel (O and
 * the logsumexp L from Q, K, V; online softmax in the log2 domain; causal
 * walks stop at the diagonal and only crossing tiles compare indices), for
 * bf16 / f16 at head dims 64, 80 and 128 on sm_90.
 *
 * One block of NWG warpgroups per (query tile of 64 * NWG rows, head).
 * Each warpgroup owns 64 query rows: S = Q K^T is one m64nBK product per
 * 16 of Dh with Q and K read by the tensor cores from swizzled shared
 * memory (wgmma.cuh); P stays in the S registers (c_to_a) and O += P V
 * reads V row-major (MN-major B), so nothing is transposed. Q, K and V
 * tiles come by TMA, issued by a producer warpgroup of their own, into
 * double buffers guarded by full / empty mbarriers, so the math
 * warpgroups never meet at a block barrier nor wait to issue a load
 * (kernels/cuda/NOTES.md has the measurements). Why not mma.sync
 * (flash_fwd.cu): there the warp's ldmatrix reads of K and V cap the
 * tensor cores; a wgmma reads its B operand once for 64 rows.
 *
 * Cut walks (flash_cut.cuh): with few query tiles a head, a tile's walk
 * over the key tiles may be cut into chunks, a block a chunk; the chunks
 * of a cut tile write O (fp32, normalised over the chunk) and the
 * logsumexp (log2 units) to the scratch, and flash_fwd_merge combines
 * them into O and L. */
#include "kernels/cuda/wgmma.cuh"
#include "kernels/cuda/flash_cut.cuh"

namespace {

/* Key tiles of BK = 128 at every head dim (measured against 64 with
 * two blocks an SM, H100, bf16 causal: 369 vs 332 TFLOP/s at Dh 128 on
 * 65536, even at Dh 64). A block has NWG warpgroups of 64 query rows;
 * with three, the first warpgroup's last causal key tile is all masked
 * (its rows keep their sums; P is 0 there). */
constexpr int BK = 128;

using fwd_walks = fwd_walks_t<BK>;   /* flash_cut.cuh */

/* Math warpgroups a block (64 query rows each; the producer is one
 * more): three at Dh 64, as FlashAttention-3 runs it (H100, leaderboard
 * shape, forward 1.33 ms against 1.43 with two); at Dh 80 / 128 three
 * would need more than the 162 registers a thread they could have. */
constexpr int fwd_warpgroups(int dh) { return dh == 64 ? 3 : 2; }
/* At Dh 64 heads vary fastest in the grid (blockIdx.x the head). */
__host__ __device__ constexpr bool fwd_heads_fastest(int dh) { return dh == 64; }
/* At Dh 64 the row sums come from the tensor cores: P V runs as m64n72
 * with B's columns 64..71 read from a block of ones, so O's accumulator
 * carries each row's sum of P, rescaled with it, and the softmax adds
 * nothing (a third of its FP32 instructions besides the exponentials and
 * the max; its issue slots bound Dh 64's loop, NOTES.md). The sums are of
 * P as rounded for the product, the P that O is the average of. The
 * ones take two more shared tiles of BK rows, one after each V buffer. */
__host__ __device__ constexpr bool fwd_sum_by_mma(int dh) { return dh == 64; }

/* The walks and the cut of a launch at these sizes (launch_n; the tests
 * count its chunks through cuda_flash_fwd_chunks). */
walk_cut fwd_plan(cuda_engine *ce, int bh, int tq, int tk, int dh,
                  int causal, fwd_walks *fw) {
  int BQ = 64 * fwd_warpgroups(dh);
  *fw = {(tq + BQ - 1) / BQ, BQ, tk, causal};
  const int key[] = {0, bh, tq, tk, dh * 2 + !!causal};
  /* a cut unit's partials: BQ rows of O and one of the log-sum-exp, fp32 */
  return plan_cut_memo(&ce->cuts, key, *fw, fw->nq, bh, ce->sms,
                       ce->flash_cut_force, fwd_heads_fastest(dh),
                       (long long)BQ * (dh + 1) * 4);
}

/* CUT: compiled for a cut launch (cut.us > 0); the uncut instance folds
 * the chunk arithmetic and the partial stores away, so an uncut shape
 * runs the code it ran before cuts existed. */
template <typename T, int DH, int NWG, bool CUT>
__global__ void __launch_bounds__(128 * (NWG + 1), 1)
    flash_fwd_wg(const __grid_constant__ CUtensorMap qmap,
                 const __grid_constant__ CUtensorMap kmap,
                 const __grid_constant__ CUtensorMap vmap, T *__restrict__ o,
                 float *__restrict__ lse, float *__restrict__ part_o,
                 float *__restrict__ part_l, walk_cut cut, fwd_walks fw,
                 int tq, int tk, int causal, float scale_log2) {
#if TL_WGMMA
  /* NWG math warpgroups, then the producer warpgroup, whose first thread
   * issues every load; it keeps 24 or 32 registers and the math
   * warpgroups take the rest (FlashAttention-3's split). */
  constexpr int WG_THREADS = 128 * NWG, BQ = 64 * NWG,
                NT = WG_THREADS + 128, PRODUCER_REGS = NWG == 2 ? 24 : 32,
                MATH_REGS = NWG == 2 ? 240 : 160;
  /* The growth of a row's max, in the exponent's log2 units, past which
   * its reference moves (the softmax below): P stays under 2^8 = 256.
   * Only at Dh 64, where three warpgroups' softmax bounds the loop by issue
   * slots: measured on an H200 (bf16, causal, seq 65536) it lifts forward
   * d64 from 409 to 423 TFLOP/s but costs d128 1.5% (592 -> 583), whose
   * loop the products bound, so there the vote would be pure overhead. */
  constexpr bool COND_RESCALE = DH == 64;
  constexpr float RESCALE_LOG2 = 8.f;
  /* CB column blocks of 64; Dh 80 fills the second one with zeros (the
   * loads' out-of-bounds fill), which the products never read past. */
  constexpr int CB = (DH + 63) / 64, QBYTES = BQ * CB * 128,
                KBYTES = BK * CB * 128;
  /* O's accumulator: Dh columns, then with SUMS 8 of row sums. With
   * SUMS each V buffer is followed by a block of ones, so P V's B reads
   * its second block of 64 columns one block past V's (LBO), as Dh 80's
   * reads V's padding there. */
  constexpr bool SUMS = fwd_sum_by_mma(DH);
  constexpr int NO = SUMS ? DH + 8 : DH, VSTRIDE = SUMS ? 2 * KBYTES : KBYTES;
  extern __shared__ unsigned char smem_raw[];
  /* Barriers: Q; K and V full (TMA done) and empty (both warpgroups done
   * reading) per buffer. */
  __shared__ uint64_t full_q, full_k[2], full_v[2], empty_k[2], empty_v[2];
  /* The swizzle needs 1024-byte aligned blocks (launch adds the slack). */
  unsigned char *sq =
      smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  unsigned char *sk = sq + QBYTES;       /* two buffers */
  unsigned char *sv = sk + 2 * KBYTES;   /* two buffers, VSTRIDE apart */

  /* Query tiles go last (most causal work) first. At Dh 64 heads vary
   * fastest, so blocks start in falling order of work across every head;
   * at Dh 80 / 128 head by head, whose blocks share K and V in L2, which
   * measured faster there (NOTES.md, launch order; so did the backward). */
  constexpr bool HF = fwd_heads_fastest(DH);
  int b = HF ? blockIdx.x : blockIdx.y;
  /* Unit u: chunk kc of walk x, query tile nq - 1 - x (uncut: u = x, and
   * the grid's extent is nq). The uncut instance computes q0 and the walk
   * from the grid, unsigned, as the kernel did before cuts existed: from
   * the parameters its main loop compiled differently (NOTES.md: the cut's
   * A/B). */
  int u = HF ? blockIdx.y : blockIdx.x, x = u, kc = 0, slot = 0;
  if constexpr (CUT) cut_unit(cut, fw, u, &x, &kc, &slot);
  int q0 = CUT ? (fw.nq - 1 - x) * BQ
               : (int)(((HF ? gridDim.y : gridDim.x) - 1 - u) * BQ);
  int wg = threadIdx.x >> 7, w = (threadIdx.x >> 5) & 3, l = threadIdx.x & 31,
      g = l >> 2, t = l & 3;
  int wq0 = q0 + wg * 64;               /* this warpgroup's first row */
  int kend = causal ? min(tk, q0 + BQ) : tk;
  int walk = (kend + BK - 1) / BK;      /* fw.walk(x) */
  int jb = CUT ? kc * cut.C : 0;
  int ntiles = CUT ? min(walk, jb + cut.C) - jb : walk;
  /* a cut tile: this unit's partial goes to its slot */
  bool partial = CUT && walk > cut.C;
  size_t pslot = (size_t)b * cut.us + slot;
  /* One thread issues every load (a box of 64 columns per column block);
   * rows past the sequence end arrive as zeros. */
  bool issuer = threadIdx.x == WG_THREADS;
  auto load = [&](unsigned char *dst, const CUtensorMap *map, uint64_t *bar,
                  int row0, int rows) {
    mbar_expect_tx(bar, rows * CB * 128);   /* zero fill counts too */
#pragma unroll
    for (int c = 0; c < CB; c++)
      tma_load_3d(dst + c * rows * 128, map, bar, c * 64, row0, b);
  };

  if (issuer) {
    mbar_init(&full_q, 1);
    for (int i = 0; i < 2; i++) {
      mbar_init(&full_k[i], 1);
      mbar_init(&full_v[i], 1);
      mbar_init(&empty_k[i], WG_THREADS);
      mbar_init(&empty_v[i], WG_THREADS);
    }
    mbar_fence_init();
  }
  if constexpr (SUMS) {   /* every element 1, so the swizzle is moot */
    const uint32_t one = elt<T>::pack(1.f, 1.f);
#pragma unroll 1
    for (int i = threadIdx.x; i < 2 * KBYTES / 16; i += NT) {
      int buf = i / (KBYTES / 16);
      reinterpret_cast<uint4 *>(sv + buf * VSTRIDE + KBYTES)[i % (KBYTES / 16)] =
          make_uint4(one, one, one, one);
    }
    fence_async_smem();   /* the products read them through the async proxy */
  }
  __syncthreads();
  /* Loads run one tile ahead, V one behind K: iteration j reads K_j and
   * V_{j-1} (the product of P_{j-1}); the producer fetches K_{j+1} once
   * K_{j-1}'s buffer is free and V_j once V_{j-2}'s is. */
  if (wg == NWG) {
    wg_regs_dec<PRODUCER_REGS>();
    if (issuer) {
      load(sq, &qmap, &full_q, q0, BQ);
      load(sk, &kmap, &full_k[0], jb * BK, BK);
      for (int j = 0; j < ntiles; j++) {
        int k0 = (jb + j) * BK, cur = j & 1, prev = cur ^ 1;
        if (j + 1 < ntiles) {
          if (j >= 1) mbar_wait(&empty_k[prev], ((j + 1) / 2 - 1) & 1);
          load(sk + prev * KBYTES, &kmap, &full_k[prev], k0 + BK, BK);
        }
        if (j >= 2) mbar_wait(&empty_v[cur], (j / 2 - 1) & 1);
        load(sv + cur * VSTRIDE, &vmap, &full_v[cur], k0, BK);
      }
    }
    return;
  }
  wg_regs_inc<MATH_REGS>();

  float acc[NO / 2];
#pragma unroll
  for (int i = 0; i < NO / 2; i++) acc[i] = 0.f;
  /* lsum: without SUMS, this thread's share of its rows' sums */
  float mrow[2] = {-INFINITY, -INFINITY}, lsum[2] = {0.f, 0.f};
  /* O += P V over one k-step (with SUMS, also the row sums) */
  auto pv = [&](const uint32_t a[4], const unsigned char *vt, int kk) {
    wgmma<T, NO>::rs(acc, a, wg_desc(vt + kk * 16 * 128, BK * 128, 1024));
  };
  uint32_t pa[BK / 16][4];   /* P of the previous tile, product inputs */
  mbar_wait(&full_q, 0);
  /* Ping-pong (FlashAttention-3): the warpgroups take turns issuing their
   * products, so one's softmax overlaps the other's products instead of
   * both computing softmax at once while the tensor cores idle.
   * Warpgroup 0 goes first. */
  if (wg == NWG - 1 && ntiles > 0) named_bar_arrive(5, 256);

  for (int j = 0; j < ntiles; j++) {
    int k0 = (jb + j) * BK, cur = j & 1, prev = cur ^ 1;
    const unsigned char *kt = sk + cur * KBYTES, *vprev = sv + prev * VSTRIDE;

    /* S = Q K_j^T, then O += P_{j-1} V_{j-1} behind it: the tensor cores
     * run the second while this warpgroup's softmax works on S. */
    float s[BK / 2];
    mbar_wait(&full_k[cur], (j >> 1) & 1);
    named_bar(5 + wg, 256);   /* this warpgroup's turn (ping-pong) */
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < DH / 16; kk++) {
      uint32_t ko = (kk & 3) * 32;   /* 16 elements inside a block */
      uint64_t da = wg_desc(sq + (kk >> 2) * BQ * 128 + wg * 64 * 128 + ko, 16, 1024);
      uint64_t db = wg_desc(kt + (kk >> 2) * BK * 128 + ko, 16, 1024);
      wgmma<T, BK>::ss(s, da, db, kk > 0);
    }
    wg_commit();
    if (j > 0) {
      mbar_wait(&full_v[prev], ((j - 1) >> 1) & 1);
      /* The products read acc and pa, which plain code wrote (the softmax
       * rescale and P's conversion): the fence wgmma requires before them,
       * which ptxas otherwise injects with an advisory per instance. */
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) pv(pa[kk], vprev, kk);
      wg_commit();
    }
    if (j > 0)
      wg_wait<1>();
    else
      wg_wait<0>();
    wg_hold<BK / 2>(s);
    mbar_arrive(&empty_k[cur]);
    /* S is in: the other warpgroup's turn. Its products queue behind this
     * one's P V and run while this one's softmax does. (Handing over
     * between issuing and this point makes ptxas serialise the products,
     * C7514.) Warpgroup 0 takes warpgroup 1's last hand-over after the
     * loop. */
    named_bar_arrive(5 + (wg + 1) % NWG, 256);

    /* s[4i + e]: row 16w + g + 8 (e >> 1), key k0 + 8i + 2t + (e & 1).
     * Raw dot products; the scale goes into the exponent's FMA. */
    if (k0 + BK > tk || (causal && k0 + BK - 1 > wq0)) {
#pragma unroll
      for (int i = 0; i < BK / 2; i++) {
        int col = k0 + 8 * (i >> 2) + 2 * t + (i & 1),
            r = wq0 + 16 * w + g + 8 * ((i >> 1) & 1);
        if (col >= tk || (causal && col > r)) s[i] = -INFINITY;
      }
    }
    /* mrow is each row's reference: the max its exponents are taken
     * against, O and the sum scaled to it. A tile moves the reference only
     * when it raises a row's max by more than 2^RESCALE_LOG2 in the
     * exponent (FlashAttention-4's conditional rescaling); below that P's
     * values stay under 2^RESCALE_LOG2 against the old reference, which the
     * fp32 sums and 16-bit P hold to the same relative precision, and O's
     * rescale (Dh / 2 multiplies a thread a tile) and alpha's exponentials
     * are skipped. Decided per warp (its rows move together; a row whose
     * max did not grow gets alpha exactly 1), so nothing diverges. The
     * reference only ever grows to a row's true max, so L is unchanged.
     * Without COND_RESCALE every tile moves it to the max (FlashAttention-2).
     */
    /* a row's max over this tile and init, across the row's 4 threads */
    auto row_max = [&](int h, float init) {
      float mx = init;
#pragma unroll
      for (int n = 0; n < BK / 8; n++)
        mx = fmaxf(mx, fmaxf(s[4 * n + 2 * h], s[4 * n + 2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
      return fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
    };
    float tmax[2];
    bool grow = true;
    if constexpr (COND_RESCALE) {
      grow = false;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        tmax[h] = row_max(h, -INFINITY);
        /* -inf - -inf (a row masked so far) is NaN: no growth */
        grow |= (tmax[h] - mrow[h]) * scale_log2 > RESCALE_LOG2;
      }
      grow = __any_sync(FULL_MASK, grow);
    }
    float alpha[2] = {1.f, 1.f};
#pragma unroll
    for (int h = 0; h < 2; h++) {
      float mx;
      if constexpr (COND_RESCALE)
        mx = grow ? fmaxf(mrow[h], tmax[h]) : mrow[h];
      else
        mx = row_max(h, mrow[h]);
      /* A row that has seen only masked keys keeps max -inf; 0 as its
       * reference gives exp2 = 0, not NaN. */
      float ref = mx == -INFINITY ? 0.f : mx * scale_log2, sum = 0.f;
      if (grow) alpha[h] = exp2_ftz(mrow[h] * scale_log2 - ref);
#pragma unroll
      for (int n = 0; n < BK / 8; n++) {
        s[4 * n + 2 * h] = exp2_ftz(fmaf(s[4 * n + 2 * h], scale_log2, -ref));
        s[4 * n + 2 * h + 1] = exp2_ftz(fmaf(s[4 * n + 2 * h + 1], scale_log2, -ref));
        if constexpr (!SUMS) sum += s[4 * n + 2 * h] + s[4 * n + 2 * h + 1];
      }
      if constexpr (!SUMS) lsum[h] = lsum[h] * alpha[h] + sum;
      mrow[h] = mx;
    }
    wg_wait<0>();            /* O += P_{j-1} V_{j-1} is in */
    wg_hold<NO / 2>(acc);
    if (j > 0) mbar_arrive(&empty_v[prev]);
    if (grow) {
#pragma unroll
      for (int n = 0; n < NO / 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[4 * n + e] *= alpha[e >> 1];
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++)
      c_to_a<T>(pa[kk], s + 8 * kk, s + 8 * kk + 4);
  }
  if (wg == 0 && ntiles > 0) named_bar(5, 256);
  {   /* the last tile's P V */
    int last = ntiles - 1;
    mbar_wait(&full_v[last & 1], (last >> 1) & 1);
    const unsigned char *vlast = sv + (last & 1) * VSTRIDE;
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) pv(pa[kk], vlast, kk);
    wg_commit();
    wg_wait<0>();
    wg_hold<NO / 2>(acc);
  }

#pragma unroll
  for (int h = 0; h < 2; h++) {
    float sum;
    if constexpr (SUMS) {
      sum = acc[DH / 2 + 2 * h];   /* row g + 8h, a column of ones */
    } else {
      sum = lsum[h];
      sum += __shfl_xor_sync(FULL_MASK, sum, 1);
      sum += __shfl_xor_sync(FULL_MASK, sum, 2);
    }
    float inv = 1.f / sum;
    int r = wq0 + 16 * w + g + 8 * h;
    if (partial) {
      if (r < tq)
        fwd_partial_row<DH, BQ>(part_o, part_l, pslot, r - q0, t, sum,
                                mrow[h] * scale_log2, [&](int n) {
                                  return make_float2(acc[4 * n + 2 * h], acc[4 * n + 2 * h + 1]);
                                });
    } else if (r < tq) {
      T *orow = o + ((size_t)b * tq + r) * DH;
#pragma unroll
      for (int n = 0; n < DH / 8; n++)
        *reinterpret_cast<uint32_t *>(orow + n * 8 + 2 * t) =
            elt<T>::pack(acc[4 * n + 2 * h] * inv, acc[4 * n + 2 * h + 1] * inv);
      if (t == 0)
        lse[(size_t)b * tq + r] = (mrow[h] * scale_log2 + log2f(sum)) * FLASH_LN2;
    }
  }
#else
  __trap();
#endif
}

template <typename T, int DH, int NWG>
int launch_n(engine *e, const void *q, const void *k, const void *v, void *o,
             float *lse, int bh, int tq, int tk, int causal, float sl2,
             dtype dt) {
  constexpr int BQ = 64 * NWG;
  constexpr bool HF = fwd_heads_fastest(DH);
  CUtensorMap qm, km, vm;
  TRY(wg_tensor_map(&qm, q, dt, bh, tq, DH, BQ, "k_attention_fwd"));
  TRY(wg_tensor_map(&km, k, dt, bh, tk, DH, BK, "k_attention_fwd"));
  TRY(wg_tensor_map(&vm, v, dt, bh, tk, DH, BK, "k_attention_fwd"));
  size_t smem = 1024 + (size_t)(BQ + 4 * BK) * ((DH + 63) / 64) * 128 +
                (fwd_sum_by_mma(DH) ? 2 * BK * 128 : 0);   /* the ones */
  cuda_engine *ce = cuda_impl(e);
  fwd_walks fw;
  walk_cut cut = fwd_plan(ce, bh, tq, tk, DH, causal, &fw);
  auto kernel = cut.us > 0 ? flash_fwd_wg<T, DH, NWG, true> : flash_fwd_wg<T, DH, NWG, false>;
  CHECK_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)smem));
  if ((HF ? cut.units : bh) > 65535)
    FAIL(ERR_FAIL, "k_attention_fwd: %d query tiles of %d, %d batch x heads "
         "(allowed: at most 65535 %s, a grid dimension's limit)", fw.nq, BQ, bh,
         HF ? "tiles" : "batch x heads");
  float *part_o = NULL, *part_l = NULL;
  TRY(fwd_cut_partials(e, cut, bh, BQ, DH, &part_o, &part_l));
  dim3 grid = HF ? dim3(bh, cut.units) : dim3(cut.units, bh);
  kernel<<<grid, 128 * (NWG + 1), smem, cuda_stream(e)>>>(
      qm, km, vm, (T *)o, lse, part_o, part_l, cut, fw, tq, tk, causal, sl2);
  CHECK_LAUNCH();
  return fwd_cut_merge<T, DH, BQ>(e, cut, fw, part_o, part_l, o, lse, bh, tq);
}

template <typename T, int DH>
int launch(engine *e, const void *q, const void *k, const void *v, void *o,
           float *lse, int bh, int tq, int tk, int causal, float sl2,
           dtype dt) {
  return launch_n<T, DH, fwd_warpgroups(DH)>(e, q, k, v, o, lse, bh, tq, tk,
                                             causal, sl2, dt);
}

}  // namespace

int cuda_flash_fwd_chunks(engine *e, int bh, int tq, int tk, int dh,
                          int causal) {
  fwd_walks fw;
  return fwd_plan(cuda_impl(e), bh, tq, tk, dh, causal, &fw).nc;
}

int cuda_flash_fwd_wgmma(engine *e, const void *q, const void *k,
                         const void *v, void *o, float *lse, int bh, int tq,
                         int tk, int dh, int causal, float scale_log2,
                         dtype dt) {
  if (dt == DT_BF16 && dh == 64)
    return launch<__nv_bfloat16, 64>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  if (dt == DT_BF16 && dh == 128)
    return launch<__nv_bfloat16, 128>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  if (dt == DT_BF16 && dh == 80)
    return launch<__nv_bfloat16, 80>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  if (dt == DT_F16 && dh == 80)
    return launch<__half, 80>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  if (dt == DT_F16 && dh == 64)
    return launch<__half, 64>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  if (dt == DT_F16 && dh == 128)
    return launch<__half, 128>(e, q, k, v, o, lse, bh, tq, tk, causal, scale_log2, dt);
  FAIL(ERR_FAIL, "k_attention_fwd: the wgmma kernel takes bf16 / f16 at head "
       "dims 64, 80 and 128 (got %s, dh=%d)", dtype_name(dt), dh);
}
