/* cuBLAS is opened when a CUDA engine is made, not when a program starts
 * (kernels/cuda/cublas_lib.h), and opening it needs no GPU: before
 * cublas_lib_open neither library is in the process; after it both are,
 * every function of the lists is found and answers; a second call gives
 * the same outcome. Skipped (77) in a build without CUDA. */
#include "config.h"
#include "tests/testlib.h"

#include <stdio.h>

#ifndef HAVE_CUDA
int main(void) {
  printf("SKIP: this build has no CUDA\n");
  return 77;
}
#else
#include "kernels/cuda/cublas_lib.h"

#include <dlfcn.h>
#include <string.h>

/* Whether the process has the library loaded already (loads nothing). */
static int loaded(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != NULL;
}

int main(void) {
  check(!loaded(CUBLASLT_SONAME) && !loaded(CUBLAS_SONAME),
        "at start, neither %s nor %s is loaded", CUBLASLT_SONAME,
        CUBLAS_SONAME);
  hard(cublas_lib_open(), "cublas_lib_open");
  check(loaded(CUBLASLT_SONAME) && loaded(CUBLAS_SONAME),
        "after cublas_lib_open, both are");
  int n = 0, missing = 0;
#define FOUND(f)                                                             \
  n++;                                                                       \
  if (!tl_cublas.f) {                                                        \
    missing++;                                                               \
    printf("# no %s\n", CUBLAS_LIB_STR(f));                                  \
  }
  CUBLAS_LIB_FUNCS(FOUND)
  CUBLASLT_LIB_FUNCS(FOUND)
#undef FOUND
  check(n > 0 && missing == 0, "all %d functions of the lists found "
        "(%d missing)", n, missing);
  check(cublas_lib_open() == 0, "a second call succeeds too");
  /* Calls that need no GPU: the library's names of two statuses. */
  const char *name = tl_cublas.cublasGetStatusName(CUBLAS_STATUS_ALLOC_FAILED);
  check(name && strcmp(name, "CUBLAS_STATUS_ALLOC_FAILED") == 0,
        "cublasGetStatusName answers through the table (\"%s\")",
        name ? name : "(null)");
  const char *text = tl_cublas.cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
  check(text && *text, "cublasGetStatusString answers (\"%s\")",
        text ? text : "(null)");
  return tl_finish();
}
#endif
