/* Matrix products on the CPU, fp32 in, fp32 accumulation, fp32 out.
 *
 *   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C        (row-major)
 *
 * op(X) is X or X^T as trans_x says; lda/ldb/ldc are the row strides of A,
 * B, C as stored: A is [m,k] (trans_a=0) or [k,m] (trans_a=1), B is [k,n]
 * or [n,k], C is [m,n]. As in BLAS, beta = 0 means C is not read (NaN in C
 * does not survive). Linear layer y = x W^T, x [N,Din], W [Dout,Din]:
 * trans_a=0, trans_b=1, m=N, n=Dout, k=Din.
 *
 * Batched: `batch` independent products, operand i at A + i*stride_a, and
 * likewise for B and C.
 *
 * The loop: for each block of NB columns and KB steps of k, copy op(B)'s
 * [KB, NB] tile into a contiguous panel (so both transposes read it the
 * same way, and it stays in cache), then every block of MR rows of C, in
 * parallel, runs over the panel with MR x NB accumulators (MR x 16, 32 or
 * 64 when the block has that few columns): each panel row is loaded once
 * per MR rows and the innermost loop is a unit-stride axpy the compiler
 * vectorises. Each row block belongs to one thread, so the result does not
 * depend on the thread count. */
#include "config.h"
#include "kernels/cpu/cpu.h"
#include "common/check.h"

#include <stdlib.h>
#include <string.h>

enum { MR = 4, NB = 128, KB = 256 };

static int min_int(int a, int b) { return a < b ? a : b; }

/* panel[p][j] = op(B)[p0+p, j0+j] for p < kb, j < nb, and 0 for j >= nb:
 * the inner loops always run NB long, a fixed count the compiler
 * vectorises without a remainder loop. */
static void pack_b(int tb, const float *B, int ldb, int p0, int kb, int j0,
                   int nb, float *panel) {
  if (nb < NB)
    for (int p = 0; p < kb; p++)
      memset(panel + (size_t)p * NB + nb, 0, (size_t)(NB - nb) * sizeof(float));
  if (!tb) {
    for (int p = 0; p < kb; p++)
      memcpy(panel + (size_t)p * NB, B + (size_t)(p0 + p) * ldb + j0,
             (size_t)nb * sizeof(float));
  } else {                      /* op(B)[p,j] = B[j,p]: read B rows */
    for (int j = 0; j < nb; j++) {
      const float *b = B + (size_t)(j0 + j) * ldb + p0;
      for (int p = 0; p < kb; p++) panel[(size_t)p * NB + j] = b[p];
    }
  }
}

/* C's rows i0..i0+mr-1, columns j0..j0+nb-1 from a block's accumulators
 * (row r at acc + r * stride): the first k block applies beta, later ones
 * add. */
static inline void store_rows(const float *acc, int stride, int i0, int mr,
                              int j0, int nb, float alpha, float beta,
                              int first, float *C, int ldc) {
  for (int r = 0; r < mr; r++) {
    const float *a = acc + (size_t)r * stride;
    float *c = C + (size_t)(i0 + r) * ldc + j0;
    if (!first)
      for (int j = 0; j < nb; j++) c[j] += alpha * a[j];
    else if (beta == 0.0f)
      for (int j = 0; j < nb; j++) c[j] = alpha * a[j];
    else
      for (int j = 0; j < nb; j++) c[j] = alpha * a[j] + beta * c[j];
  }
}

/* Rows i0..i0+mr-1 of C, columns j0..j0+nb-1, k steps p0..p0+kb-1. The
 * first k block applies beta; later ones add. */
static void row_block(int ta, const float *A, int lda, const float *panel,
                      int i0, int mr, int p0, int kb, int j0, int nb,
                      float alpha, float beta, int first, float *C, int ldc) {
  float acc[MR][NB] = {{0}};
  for (int p = 0; p < kb; p++) {
    const float *b = panel + (size_t)p * NB;
    for (int r = 0; r < mr; r++) {
      float a = ta ? A[(size_t)(p0 + p) * lda + i0 + r]
                   : A[(size_t)(i0 + r) * lda + p0 + p];
      float *c = acc[r];
      for (int j = 0; j < NB; j++) c[j] += a * b[j];
    }
  }
  store_rows(&acc[0][0], NB, i0, mr, j0, nb, alpha, beta, first, C, ldc);
}

/* row_block for nb <= 64 over W = 16, 32 or 64 of the panel's columns
 * (its columns from nb on are 0) instead of NB: a narrow product (a
 * head's Dh or T, a small model's width) does not pay for NB columns.
 * Inlined with W a constant, so the inner loop keeps a fixed count the
 * compiler vectorises at -O2; column j's sum is row_block's. row_block
 * itself stays as it is: a generic W there made GCC's wide loop slower. */
static inline __attribute__((always_inline)) void
narrow_block_w(const int W, int ta, const float *A, int lda,
               const float *panel, int i0, int mr, int p0, int kb, int j0,
               int nb, float alpha, float beta, int first, float *C, int ldc) {
  float acc[MR][64];
  for (int r = 0; r < MR; r++)
    for (int j = 0; j < W; j++) acc[r][j] = 0.0f;
  for (int p = 0; p < kb; p++) {
    const float *b = panel + (size_t)p * NB;
    for (int r = 0; r < mr; r++) {
      float a = ta ? A[(size_t)(p0 + p) * lda + i0 + r]
                   : A[(size_t)(i0 + r) * lda + p0 + p];
      float *c = acc[r];
      for (int j = 0; j < W; j++) c[j] += a * b[j];
    }
  }
  store_rows(&acc[0][0], 64, i0, mr, j0, nb, alpha, beta, first, C, ldc);
}

static void narrow_block(int ta, const float *A, int lda, const float *panel,
                         int i0, int mr, int p0, int kb, int j0, int nb,
                         float alpha, float beta, int first, float *C,
                         int ldc) {
#define NARROW(W)                                                             \
  narrow_block_w(W, ta, A, lda, panel, i0, mr, p0, kb, j0, nb, alpha, beta,  \
                 first, C, ldc)
  if (nb <= 16) NARROW(16);
  else if (nb <= 32) NARROW(32);
  else NARROW(64);
#undef NARROW
}

/* One product; panel has KB*NB floats. */
static void gemm(engine *e, int ta, int tb, int m, int n, int k, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta,
                 float *C, int ldc, float *panel) {
  if (k == 0) {                 /* no products: C = beta * C */
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
    for (int i = 0; i < m; i++) {
      float *c = C + (size_t)i * ldc;
      for (int j = 0; j < n; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
    }
    return;
  }
  for (int j0 = 0; j0 < n; j0 += NB) {
    int nb = min_int(NB, n - j0);
    for (int p0 = 0; p0 < k; p0 += KB) {
      int kb = min_int(KB, k - p0);
      pack_b(tb, B, ldb, p0, kb, j0, nb, panel);
#pragma omp parallel for num_threads(cpu_threads(e)) schedule(static)
      for (int i0 = 0; i0 < m; i0 += MR)
        (nb <= 64 ? narrow_block : row_block)(ta, A, lda, panel, i0,
                                              min_int(MR, m - i0), p0, kb, j0,
                                              nb, alpha, beta, p0 == 0, C, ldc);
    }
  }
}

static int check_compute(const char *op, dtype compute) {
  if (compute != DT_F32)
    FAIL(ERR_FAIL,
         "%s: the CPU engine computes in fp32 only (compute dtype %s asked "
         "for; use f32, or the CUDA engine for %s)",
         op, dtype_name(compute), dtype_name(compute));
  return 0;
}

int cpu_matmul(engine *e, int trans_a, int trans_b, int m, int n, int k,
               float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc, dtype compute) {
  TRY(check_compute("k_matmul", compute));
  float *panel = malloc((size_t)KB * NB * sizeof *panel);
  CHECK_ALLOC(panel, (size_t)KB * NB * sizeof *panel);
  gemm(e, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc,
       panel);
  free(panel);
  return 0;
}

int cpu_matmul_batched(engine *e, int trans_a, int trans_b, int m, int n,
                       int k, float alpha, const float *A, int lda,
                       long long stride_a, const float *B, int ldb,
                       long long stride_b, float beta, float *C, int ldc,
                       long long stride_c, int batch, dtype compute) {
  TRY(check_compute("k_matmul_batched", compute));
  float *panel = malloc((size_t)KB * NB * sizeof *panel);
  CHECK_ALLOC(panel, (size_t)KB * NB * sizeof *panel);
  for (int i = 0; i < batch; i++)       /* k = 0: A, B may be NULL */
    gemm(e, trans_a, trans_b, m, n, k, alpha, k ? A + i * stride_a : A, lda,
         k ? B + i * stride_b : B, ldb, beta, C + i * stride_c, ldc, panel);
  free(panel);
  return 0;
}

/* Elements a rows x cols matrix with row stride ld spans. */
static size_t span(int rows, int cols, int ld) {
  return rows > 0 && cols > 0 ? (size_t)(rows - 1) * ld + cols : 0;
}

/* 16-bit A and B widened, a 16-bit C computed in fp32 and rounded once
 * (cpu_stage). C is read back first where beta adds to it or its rows have
 * gaps (ldc > n: columns of a wider matrix, which must come back as they
 * were: widening and rounding a 16-bit value again gives its bits). */
int cpu_matmul_ex(engine *e, int ta, int tb, int m, int n, int k, float alpha,
                  const void *A, int lda, const void *B, int ldb, dtype in_t,
                  float beta, void *C, int ldc, dtype ct, f32_products f32) {
  if (f32 != F32_EXACT && in_t == DT_F32)
    FAIL(ERR_FAIL, "k_matmul_ex: the cpu engine has no TF32 tensor cores for "
         "%s products (allowed: fp32)", f32_products_name(f32));
  cpu_stage s;
  cpu_stage_init(&s, e);
  const float *fa = cpu_stage_in(&s, A, in_t, ta ? span(k, m, lda) : span(m, k, lda));
  const float *fb = cpu_stage_in(&s, B, in_t, tb ? span(n, k, ldb) : span(k, n, ldb));
  float *fc = cpu_stage_out(&s, C, ct, span(m, n, ldc), beta != 0.0f || ldc != n);
  return cpu_stage_end(&s, cpu_stage_ok(&s)
                               ? cpu_matmul(e, ta, tb, m, n, k, alpha, fa, lda, fb,
                                            ldb, beta, fc, ldc, DT_F32)
                               : 0);
}
