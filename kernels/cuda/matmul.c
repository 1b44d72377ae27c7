/* Matrix products on the CUDA engine, through cuBLAS.
 *
 *   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C        (row-major)
 *
 * Same contract as the CPU engine (kernels/cpu/matmul.c): op(X) is X or X^T
 * as trans_x says, lda/ldb/ldc are row strides as stored; beta = 0 means C
 * is not read (cuBLAS guarantees it); k = 0 gives C = beta*C. Batched:
 * operand i at A + i*stride_a, and likewise B and C (stride 0 shares one
 * operand).
 *
 * Row-major to cuBLAS's column-major: a row-major [r,c] matrix with row
 * stride ld is the column-major [c,r] matrix with the same ld, its
 * transpose. So row-major C = op(A) op(B) is column-major
 * C^T = op(B)^T op(A)^T: cuBLAS gets B first with transa = trans_b, then A
 * with transb = trans_a, and sizes (n, m, k).
 *
 * compute = DT_F32: fp32 inputs, run as eng_f32_products says: true fp32
 * (CUBLAS_COMPUTE_32F in the default math mode, PyTorch's default), TF32
 * (cuBLAS's TF32 math mode), or 3xTF32: both operands split into the
 * engine's workspace as split_tf32.cu describes and one TF32 product
 * (CUBLAS_COMPUTE_32F_FAST_TF32) over the inner dimension 3k.
 * compute = DT_BF16 / DT_F16: A and B are first rounded (to nearest even)
 * into the engine's workspace as bf16 / f16, packed with rows padded to 8
 * elements (16 bytes, what the tensor-core kernels want); then GemmEx with
 * 16-bit inputs, fp32 accumulation (CUBLAS_COMPUTE_32F) and fp32 C: what
 * torch.autocast does to a matmul, except the output stays fp32. A shared
 * operand (stride 0) is packed once. */
#include "config.h"
#include "kernels/cuda/cuda_ops.h"
#include "common/check.h"
#include "common/check_cuda.h"

#include <limits.h>
#include <stdint.h>

enum { MAX_BATCH = 65535 };   /* batches per cuBLAS call (grid z limit) */

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* One operand of a product in the form the product reads. */
typedef struct operand {
  const void *p;
  int ld;
  long long stride;
} operand;

/* op(A) [m,k] and op(B) [k,n] (row-major as stored, batches sa / sb apart,
 * 0 = shared) in their 3xTF32 form in the workspace: A3 with inner
 * dimension 3k as [lo hi hi], B3 as [hi; lo; hi]. */
static int split_operands(engine *e, int ta, int tb, int m, int n, int k,
                          const float *A, int lda, long long sa,
                          const float *B, int ldb, long long sb, int batch,
                          operand *a3, operand *b3) {
  /* Stored shapes; the inner dimension runs along A's columns unless A is
   * transposed, and down B's rows unless B is. */
  int arows = ta ? k : m, acols = ta ? m : k, a_krows = ta;
  int brows = tb ? n : k, bcols = tb ? k : n, b_krows = !tb;
  int ar3 = a_krows ? 3 * arows : arows, ac3 = a_krows ? acols : 3 * acols;
  int br3 = b_krows ? 3 * brows : brows, bc3 = b_krows ? bcols : 3 * bcols;
  int la = (int)round_up((size_t)ac3, 4), lb = (int)round_up((size_t)bc3, 4);
  if (k > INT_MAX / 3)
    FAIL(ERR_FAIL, "k_matmul (3xtf32): inner dimension %d is too long to "
         "triple (allowed: up to %d)", k, INT_MAX / 3);
  int na = sa == 0 ? 1 : batch, nb = sb == 0 ? 1 : batch;
  size_t abytes = round_up((size_t)na * ar3 * la * 4, 256);
  size_t bbytes = (size_t)nb * br3 * lb * 4;
  void *ws;
  TRY(cuda_workspace(e, abytes + bbytes, &ws));
  float *wa = ws, *wb = (float *)((char *)ws + abytes);
  long long s3a = sa == 0 ? 0 : (long long)ar3 * la;
  long long s3b = sb == 0 ? 0 : (long long)br3 * lb;
  TRY(cuda_split_3xtf32(e, A, arows, acols, lda, sa, na, a_krows, 0, wa, la,
                        s3a));
  TRY(cuda_split_3xtf32(e, B, brows, bcols, ldb, sb, nb, b_krows, 1, wb, lb,
                        s3b));
  *a3 = (operand){wa, la, s3a};
  *b3 = (operand){wb, lb, s3b};
  return 0;
}

static int gemm(engine *e, int ta, int tb, int m, int n, int k, float alpha,
                const float *A, int lda, long long sa, const float *B, int ldb,
                long long sb, float beta, float *C, int ldc, long long sc,
                int batch, dtype compute) {
  cuda_engine *c = cuda_impl(e);
  if (k == 0) {
    TRY(cuda_scale_matrix(e, C, m, n, ldc, sc, batch, beta));
    return 0;
  }
  cublasOperation_t opA = tb ? CUBLAS_OP_T : CUBLAS_OP_N;   /* cuBLAS's A: B */
  cublasOperation_t opB = ta ? CUBLAS_OP_T : CUBLAS_OP_N;   /* cuBLAS's B: A */
  const void *a = A, *b = B;
  cudaDataType_t type = CUDA_R_32F;
  cublasComputeType_t comp = CUBLAS_COMPUTE_32F;
  if (compute == DT_F32 && c->f32 == F32_3XTF32) {
    operand a3, b3;
    TRY(split_operands(e, ta, tb, m, n, k, A, lda, sa, B, ldb, sb, batch,
                       &a3, &b3));
    a = a3.p;
    lda = a3.ld;
    sa = a3.stride;
    b = b3.p;
    ldb = b3.ld;
    sb = b3.stride;
    k *= 3;
    comp = CUBLAS_COMPUTE_32F_FAST_TF32;
  } else if (compute != DT_F32) {
    type = compute == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
    int arows = ta ? k : m, acols = ta ? m : k;
    int brows = tb ? n : k, bcols = tb ? k : n;
    int pa = (int)round_up((size_t)acols, 8), pb = (int)round_up((size_t)bcols, 8);
    int na = sa == 0 ? 1 : batch, nb = sb == 0 ? 1 : batch;
    size_t abytes = round_up((size_t)na * arows * pa * 2, 256);
    size_t bbytes = (size_t)nb * brows * pb * 2;
    void *ws;
    TRY(cuda_workspace(e, abytes + bbytes, &ws));
    void *wa = ws, *wb = (char *)ws + abytes;
    TRY(cuda_pack_lowp(e, A, arows, acols, lda, sa, na, compute, wa, pa));
    TRY(cuda_pack_lowp(e, B, brows, bcols, ldb, sb, nb, compute, wb, pb));
    a = wa;
    b = wb;
    lda = pa;
    ldb = pb;
    sa = sa == 0 ? 0 : (long long)arows * pa;
    sb = sb == 0 ? 0 : (long long)brows * pb;
  }
  size_t esz = compute == DT_F32 ? 4 : 2;
  cublasHandle_t blas;
  TRY(cuda_blas(e, &blas));
  if (batch == 1) {
    CHECK_CUBLAS(tl_cublas.cublasGemmEx(
        blas, opA, opB, n, m, k, &alpha, b, type, ldb, a, type, lda, &beta, C,
        CUDA_R_32F, ldc, comp, CUBLAS_GEMM_DEFAULT));
    return 0;
  }
  for (int i0 = 0; i0 < batch; i0 += MAX_BATCH) {
    int nbat = batch - i0 < MAX_BATCH ? batch - i0 : MAX_BATCH;
    const char *ai = (const char *)a + (size_t)i0 * sa * esz;
    const char *bi = (const char *)b + (size_t)i0 * sb * esz;
    float *ci = C + (size_t)i0 * sc;
    CHECK_CUBLAS(tl_cublas.cublasGemmStridedBatchedEx(
        blas, opA, opB, n, m, k, &alpha, bi, type, ldb, sb, ai, type, lda,
        sa, &beta, ci, CUDA_R_32F, ldc, sc, nbat, comp, CUBLAS_GEMM_DEFAULT));
  }
  return 0;
}

cudaDataType_t cuda_data_type(dtype dt) {
  return dt == DT_F32 ? CUDA_R_32F : dt == DT_BF16 ? CUDA_R_16BF : CUDA_R_16F;
}

int cuda_bgemm(engine *e, int ta, int tb, int m, int n, int k, float alpha,
               const void *A, int lda, long long sa, const void *B, int ldb,
               long long sb, void *C, cudaDataType_t ct, int ldc,
               long long sc, int batch, dtype dt) {
  float beta = 0.f;
  cudaDataType_t t = cuda_data_type(dt);
  cublasHandle_t blas;
  TRY(cuda_blas(e, &blas));
  CHECK_CUBLAS(tl_cublas.cublasGemmStridedBatchedEx(
      blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n,
      m, k, &alpha, B, t, ldb, sb, A, t, lda, sa, &beta, C, ct, ldc, sc,
      batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return 0;
}

int cuda_matmul(engine *e, int trans_a, int trans_b, int m, int n, int k,
                float alpha, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc, dtype compute) {
  TRY(gemm(e, trans_a, trans_b, m, n, k, alpha, A, lda, 0, B, ldb, 0, beta, C,
           ldc, 0, 1, compute));
  return 0;
}

int cuda_matmul_batched(engine *e, int trans_a, int trans_b, int m, int n,
                        int k, float alpha, const float *A, int lda,
                        long long stride_a, const float *B, int ldb,
                        long long stride_b, float beta, float *C, int ldc,
                        long long stride_c, int batch, dtype compute) {
  TRY(gemm(e, trans_a, trans_b, m, n, k, alpha, A, lda, stride_a, B, ldb,
           stride_b, beta, C, ldc, stride_c, batch, compute));
  return 0;
}

/* The fused path's product (kernels.h k_matmul_ex): operands already in
 * in_t, so no packing; C in fp32 or in_t, fp32 accumulation throughout.
 * For fp32 inputs f32 says how: true fp32, TF32 (CUBLAS_COMPUTE_32F_FAST_TF32:
 * 10-bit mantissa products, fp32 accumulation), or 3xTF32 (the operands
 * split as in gemm above, then one TF32 product over 3k). Run by cuBLASLt
 * with each shape's fastest algorithm (matmul_lt.c). */

int cuda_matmul_ex(engine *e, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const void *A, int lda, const void *B,
                   int ldb, dtype in_t, float beta, void *C, int ldc,
                   dtype ct, f32_products f32) {
  if (k == 0) {
    if (ct != DT_F32)
      FAIL(ERR_FAIL, "k_matmul_ex: k = 0 with a %s output (allowed: f32)",
           dtype_name(ct));
    TRY(cuda_scale_matrix(e, C, m, n, ldc, 0, 1, beta));
    return 0;
  }
  if (m == 0 || n == 0) return 0;
  if (in_t == DT_F32 && f32 == F32_3XTF32) {
    operand a3, b3;
    TRY(split_operands(e, trans_a, trans_b, m, n, k, A, lda, 0, B, ldb, 0, 1,
                       &a3, &b3));
    TRY(cuda_matmul_lt(e, trans_a, trans_b, m, n, 3 * k, alpha, a3.p, a3.ld,
                       b3.p, b3.ld, DT_F32, beta, C, ldc, ct, 1));
    return 0;
  }
  TRY(cuda_matmul_lt(e, trans_a, trans_b, m, n, k, alpha, A, lda, B, ldb, in_t,
                     beta, C, ldc, ct, f32 == F32_TF32));
  return 0;
}
