/* cuBLAS and cuBLASLt, opened when the first CUDA engine is made rather than
 * when a program starts.
 *
 * Why: loading libcublasLt runs its initialisers over most of its 540 MB;
 * measured on a CPU-only machine, a program that links it and does nothing
 * takes 0.33 s and 210 MiB resident instead of 0 s and 1 MiB. Every worker
 * paid that, a CPU job included (and its peak_rss_mib counted it), and so
 * did every test program. Loaded here, only a process that makes a CUDA
 * engine pays, once.
 *
 * Every cuBLAS call goes through tl_cublas, whose members carry the
 * library's own names and types, declared once in the lists below:
 * `tl_cublas.cublasGemmEx(...)`. A function the code starts to use is one
 * more entry in its library's list. Names cublas_v2.h maps to a versioned
 * symbol (cublasCreate to cublasCreate_v2) are looked up by that symbol.
 *
 * Invariant: cublas_lib_open() has returned 0 before any member is called.
 * The engine opens it before it makes its handles (engine_cuda.c), and
 * every other cuBLAS call takes a handle or a status one of them gave.
 *
 * Only C files call cuBLAS (the products are in matmul.c and matmul_lt.c):
 * in C++ cublas_api.h overloads some of these names, which have no one
 * type, so a .cu file sees the library's types but not tl_cublas. */
#ifndef TL_KERNELS_CUDA_CUBLAS_LIB_H
#define TL_KERNELS_CUDA_CUBLAS_LIB_H

#include "common/check.h"

#include <cublas_v2.h>
#include <cublasLt.h>

#ifndef __cplusplus
/* The functions used, by library (libcublas.so.MAJOR, libcublasLt.so.MAJOR). */
#define CUBLAS_LIB_FUNCS(X)                                                  \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasGetStream)     \
  X(cublasSetWorkspace) X(cublasSetMathMode) X(cublasSetSmCountTarget)       \
  X(cublasGetSmCountTarget) X(cublasGetStatusString) X(cublasGetStatusName)  \
  X(cublasGemmEx) X(cublasGemmStridedBatchedEx)
#define CUBLASLT_LIB_FUNCS(X)                                                \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtMatmul)                     \
  X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)                   \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)            \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)           \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)

#define CUBLAS_LIB_STR_(x) #x
#define CUBLAS_LIB_STR(x) CUBLAS_LIB_STR_(x)
/* The libraries' sonames: the major version of the headers the build used
 * (another major version has another interface). */
#define CUBLAS_SONAME "libcublas.so." CUBLAS_LIB_STR(CUBLAS_VER_MAJOR)
#define CUBLASLT_SONAME "libcublasLt.so." CUBLAS_LIB_STR(CUBLAS_VER_MAJOR)

typedef struct cublas_lib {
/* cublasCreate is cublasCreate_v2 here (cublas_v2.h): the member has the
 * versioned symbol's name and type. */
#define CUBLAS_LIB_MEMBER(f) __typeof__(f) *f;
  CUBLAS_LIB_FUNCS(CUBLAS_LIB_MEMBER)
  CUBLASLT_LIB_FUNCS(CUBLAS_LIB_MEMBER)
#undef CUBLAS_LIB_MEMBER
} cublas_lib;

extern cublas_lib tl_cublas;

/* Loads both libraries and every function of the lists, the first call in a
 * process (later calls return the first one's outcome; thread-safe). On
 * failure: ERR_FAIL, with the library or symbol the loader could not find
 * and its message. */
int cublas_lib_open(void);

/* A cuBLAS call's status with the library's own message. Allocation
 * failures map to ERR_OOM so the job becomes an "oom" row. */
#define CHECK_CUBLAS(call)                                                   \
  do {                                                                       \
    cublasStatus_t cublas_rc_ = (call);                                      \
    if (cublas_rc_ != CUBLAS_STATUS_SUCCESS)                                 \
      return err_set(cublas_rc_ == CUBLAS_STATUS_ALLOC_FAILED ? ERR_OOM      \
                                                              : ERR_FAIL,    \
                     __FILE__, __LINE__, "%s: %s (%s)", #call,              \
                     tl_cublas.cublasGetStatusString(cublas_rc_),            \
                     tl_cublas.cublasGetStatusName(cublas_rc_));             \
  } while (0)
#endif /* !__cplusplus */
#endif
