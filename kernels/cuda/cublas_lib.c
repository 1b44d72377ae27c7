/* cuBLAS and cuBLASLt opened at first use (see cublas_lib.h for why).
 *
 * The libraries are found by their sonames (CUBLAS_SONAME, CUBLASLT_SONAME)
 * the way the loader finds a linked one: LD_LIBRARY_PATH, the program's run
 * path (configure puts the toolkit's lib folder there), then the system's
 * cache. They stay loaded until the process ends. */
#include "kernels/cuda/cublas_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

cublas_lib tl_cublas;

static pthread_once_t open_once = PTHREAD_ONCE_INIT;
/* The first call's failure, for every later call; empty on success. */
static char open_error[512];

static void *open_lib(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(open_error, sizeof open_error,
             "cannot load %s, which the CUDA engine needs (%s); it comes "
             "with the CUDA toolkit the build used: put its lib folder on "
             "LD_LIBRARY_PATH", soname, why ? why : "no reason given");
  }
  return h;
}

/* Fills one member; 0, or -1 with open_error set. */
static int find(void *lib, const char *soname, const char *name, void **fn) {
  (void)dlerror();
  *fn = dlsym(lib, name);
  if (*fn) return 0;
  const char *why = dlerror();
  snprintf(open_error, sizeof open_error,
           "%s has no function %s (%s): the library is not the one the "
           "build's headers describe", soname, name,
           why ? why : "a null symbol");
  return -1;
}

static void open_both(void) {
  void *lt = open_lib(CUBLASLT_SONAME);
  if (!lt) return;
  void *blas = open_lib(CUBLAS_SONAME);
  if (!blas) return;
#define CUBLAS_LIB_FIND(f)                                                   \
  if (find(blas, CUBLAS_SONAME, CUBLAS_LIB_STR(f), (void **)&tl_cublas.f))   \
    return;
#define CUBLASLT_LIB_FIND(f)                                                 \
  if (find(lt, CUBLASLT_SONAME, CUBLAS_LIB_STR(f), (void **)&tl_cublas.f))   \
    return;
  CUBLAS_LIB_FUNCS(CUBLAS_LIB_FIND)
  CUBLASLT_LIB_FUNCS(CUBLASLT_LIB_FIND)
#undef CUBLAS_LIB_FIND
#undef CUBLASLT_LIB_FIND
}

int cublas_lib_open(void) {
  int rc = pthread_once(&open_once, open_both);
  if (rc != 0) FAIL(ERR_FAIL, "cublas_lib_open: pthread_once: error %d", rc);
  if (open_error[0]) FAIL(ERR_FAIL, "%s", open_error);
  return 0;
}
