/* The fused path's products (k_matmul_ex) through cuBLASLt, each shape's
 * algorithm chosen by timing.
 *
 *   C[m,n] = alpha * op(A)[m,k] op(B)[k,n] + beta * C     (row-major;
 *   matmul.c's header says how that maps onto cuBLAS's column-major view)
 *
 * Why: cublasGemmEx runs the heuristic's first algorithm. On the 2.7B
 * model's products (H100, bf16, 2048 tokens) the fastest of the heuristic's
 * first eight is up to 19% faster (the dW product of q|k|v: 0.135 ->
 * 0.111 ms) and a step's products 4% faster (56.9 -> 54.6 ms), measured.
 *
 * A plan per shape (sizes, strides, dtypes, transposes, operand alignment,
 * TF32, SM target) holds cuBLASLt's descriptors and the chosen algorithm.
 * The first product of a shape with beta = 0 runs each candidate on its
 * own operands (C is written, never read, so reruns are harmless), keeps
 * the fastest by CUDA events (a sync: warm-up steps pay it, timed steps
 * do not), then runs it. A product with beta != 0 never reruns: until a
 * beta = 0 product of its shape has been timed it takes the heuristic's
 * first choice. As with torch.backends.cudnn.benchmark, two runs may pick
 * different algorithms and differ in the last bits. */
#include "config.h"
#include "kernels/cuda/cuda_ops.h"
#include "common/check.h"
#include "common/check_cuda.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CANDIDATES = 32, TIMED_RUNS = 3 };

typedef struct lt_key {
  int ta, tb, m, n, k, lda, ldb, ldc;
  int in_t, ct, tf32, sm_target, align;   /* align: bytes, min over A, B, C */
} lt_key;

struct lt_plan {
  lt_key key;
  int tuned;                              /* 0: heuristic's first choice */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t a, b, c;
  cublasLtMatmulAlgo_t algo[CANDIDATES];
  size_t ws[CANDIDATES];                  /* workspace each needs */
  int nalgo, best;
  struct lt_plan *next;
};

static int align_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  int r = 1;
  while (r < 16 && (a & (uintptr_t)(2 * r - 1)) == 0) r *= 2;
  return r;
}

static void plan_free(struct lt_plan *p) {
  if (p->op) (void)tl_cublas.cublasLtMatmulDescDestroy(p->op);
  if (p->a) (void)tl_cublas.cublasLtMatrixLayoutDestroy(p->a);
  if (p->b) (void)tl_cublas.cublasLtMatrixLayoutDestroy(p->b);
  if (p->c) (void)tl_cublas.cublasLtMatrixLayoutDestroy(p->c);
  free(p);
}

void cuda_lt_plans_free(cuda_engine *c) {
  while (c->lt_plans) {
    struct lt_plan *p = c->lt_plans;
    c->lt_plans = p->next;
    plan_free(p);
  }
}

/* Descriptors and the heuristic's candidates for key k. cuBLAS's view:
 * its A is our B (op trans_b), its B our A (op trans_a), sizes (n, m, k). */
static int plan_make(cuda_engine *c, const lt_key *k, struct lt_plan **out) {
  struct lt_plan *p = calloc(1, sizeof *p);
  CHECK_ALLOC(p, sizeof *p);
  p->key = *k;
  cublasLtMatmulPreference_t pref = NULL;
  cublasLtMatmulHeuristicResult_t res[CANDIDATES];
  cublasOperation_t oa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t ob = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasComputeType_t comp = k->in_t == DT_F32 && k->tf32
                                 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                 : CUBLAS_COMPUTE_32F;
  cudaDataType_t it = cuda_data_type((dtype)k->in_t);
  uint32_t align = (uint32_t)k->align;
  size_t ws = c->blas_ws_bytes;
  int rc = -1, nres = 0;
#define LT(call)                                                              \
  do {                                                                        \
    cublasStatus_t s_ = (call);                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                        \
      err_set(ERR_FAIL, __FILE__, __LINE__, "cuBLASLt: %s failed: %s", #call, \
              tl_cublas.cublasGetStatusString(s_));                           \
      goto done;                                                              \
    }                                                                         \
  } while (0)
  const cublas_lib *L = &tl_cublas;
  LT(L->cublasLtMatmulDescCreate(&p->op, comp, CUDA_R_32F));
  LT(L->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &oa,
                                       sizeof oa));
  LT(L->cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &ob,
                                       sizeof ob));
  if (k->sm_target > 0)
    LT(L->cublasLtMatmulDescSetAttribute(p->op,
                                         CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
                                         &k->sm_target, sizeof k->sm_target));
  LT(L->cublasLtMatrixLayoutCreate(&p->a, it, k->tb ? k->k : k->n,
                                   k->tb ? k->n : k->k, k->ldb));
  LT(L->cublasLtMatrixLayoutCreate(&p->b, it, k->ta ? k->m : k->k,
                                   k->ta ? k->k : k->m, k->lda));
  LT(L->cublasLtMatrixLayoutCreate(&p->c, cuda_data_type((dtype)k->ct), k->n, k->m,
                                   k->ldc));
  LT(L->cublasLtMatmulPreferenceCreate(&pref));
  LT(L->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  LT(L->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align, sizeof align));
  LT(L->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align, sizeof align));
  LT(L->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof align));
  LT(L->cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align, sizeof align));
  LT(L->cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->a, p->b, p->c, p->c,
                                       pref, CANDIDATES, res, &nres));
  for (int i = 0; i < nres; i++)
    if (res[i].state == CUBLAS_STATUS_SUCCESS) {
      p->algo[p->nalgo] = res[i].algo;
      p->ws[p->nalgo++] = res[i].workspaceSize;
    }
  if (p->nalgo == 0) {
    err_set(ERR_FAIL, __FILE__, __LINE__,
            "cuBLASLt has no algorithm for a %dx%dx%d product (%s inputs, %s "
            "output, transposes %d/%d, leading dims %d/%d/%d, %d-byte "
            "aligned)", k->m, k->n, k->k, dtype_name((dtype)k->in_t),
            dtype_name((dtype)k->ct), k->ta, k->tb, k->lda, k->ldb, k->ldc,
            k->align);
    goto done;
  }
  rc = 0;
#undef LT
done:
  if (pref) (void)tl_cublas.cublasLtMatmulPreferenceDestroy(pref);
  if (rc < 0) {
    plan_free(p);
    return rc;
  }
  p->next = c->lt_plans;
  c->lt_plans = p;
  *out = p;
  return 0;
}

/* On stream s: the call's (cuda_stream), so a view's products run on its
 * stream. */
static cublasStatus_t run(cuda_engine *c, cudaStream_t s, struct lt_plan *p,
                          int i, const float *alpha, const void *A,
                          const void *B, const float *beta, void *C) {
  return tl_cublas.cublasLtMatmul(c->lt, p->op, alpha, B, p->a, A, p->b, beta,
                                  C, p->c, C, p->c, &p->algo[i], c->blas_ws,
                                  p->ws[i], s);
}

/* Time every candidate on these operands (beta = 0) and keep the fastest.
 * A candidate the library refuses at run time is skipped. */
static int tune(cuda_engine *c, cudaStream_t s, struct lt_plan *p,
                const float *alpha, const void *A, const void *B,
                const float *beta, void *C) {
  cudaEvent_t ev[2] = {NULL, NULL};
  float best_ms = -1;
  int rc = -1;
  for (int e = 0; e < 2; e++)
    if (cudaEventCreate(&ev[e]) != cudaSuccess) {
      err_set(ERR_FAIL, __FILE__, __LINE__, "cudaEventCreate failed: %s",
              cudaGetErrorString(cudaGetLastError()));
      goto done;
    }
  for (int i = 0; i < p->nalgo; i++) {
    if (run(c, s, p, i, alpha, A, B, beta, C) != CUBLAS_STATUS_SUCCESS) continue;
    cudaError_t ce = cudaEventRecord(ev[0], s);
    for (int r = 0; r < TIMED_RUNS && ce == cudaSuccess; r++)
      if (run(c, s, p, i, alpha, A, B, beta, C) != CUBLAS_STATUS_SUCCESS)
        ce = cudaErrorUnknown;
    if (ce == cudaSuccess) ce = cudaEventRecord(ev[1], s);
    if (ce == cudaSuccess) ce = cudaEventSynchronize(ev[1]);
    float ms = 0;
    if (ce == cudaSuccess) ce = cudaEventElapsedTime(&ms, ev[0], ev[1]);
    if (ce != cudaSuccess) {
      /* A fault inside a kernel is sticky: report it, do not skip it. */
      cudaError_t le = cudaGetLastError();
      if (le != cudaSuccess) {
        err_set(ERR_FAIL, __FILE__, __LINE__, "timing cuBLASLt algorithms: %s",
                cudaGetErrorString(le));
        goto done;
      }
      continue;
    }
    if (best_ms < 0 || ms < best_ms) {
      best_ms = ms;
      p->best = i;
    }
  }
  if (best_ms < 0) {
    err_set(ERR_FAIL, __FILE__, __LINE__,
            "cuBLASLt refused all %d candidate algorithms of a %dx%dx%d "
            "product", p->nalgo, p->key.m, p->key.n, p->key.k);
    goto done;
  }
  p->tuned = 1;
  rc = 0;
done:
  for (int e = 0; e < 2; e++)
    if (ev[e]) (void)cudaEventDestroy(ev[e]);
  return rc;
}

int cuda_matmul_lt(engine *e, int trans_a, int trans_b, int m, int n, int k,
                   float alpha, const void *A, int lda, const void *B, int ldb,
                   dtype in_t, float beta, void *C, int ldc, dtype ct,
                   int tf32) {
  cuda_engine *c = cuda_impl(e);
  lt_key key;
  memset(&key, 0, sizeof key);   /* compared with memcmp: no stray padding */
  key.ta = trans_a;
  key.tb = trans_b;
  key.m = m;
  key.n = n;
  key.k = k;
  key.lda = lda;
  key.ldb = ldb;
  key.ldc = ldc;
  key.in_t = (int)in_t;
  key.ct = (int)ct;
  key.tf32 = in_t == DT_F32 && tf32;
  key.sm_target = cuda_sm_target(e);
  int al = align_of(A), bl = align_of(B), cl = align_of(C);
  key.align = al < bl ? al : bl;
  if (cl < key.align) key.align = cl;
  struct lt_plan *p = c->lt_plans;
  while (p && memcmp(&p->key, &key, sizeof key) != 0) p = p->next;
  if (!p) TRY(plan_make(c, &key, &p));
  cudaStream_t s = cuda_stream(e);
  if (!p->tuned && beta == 0.0f) TRY(tune(c, s, p, &alpha, A, B, &beta, C));
  CHECK_CUBLAS(run(c, s, p, p->best, &alpha, A, B, &beta, C));
  return 0;
}
