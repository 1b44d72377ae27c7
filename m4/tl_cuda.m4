# TL_CHECK_CUDA: --with-cuda[=DIR] and --with-cuda-arch=FLAGS. Looks for the
# toolkit in DIR, $CUDA_HOME, /usr/local/cuda, or nvcc's folder on PATH;
# checks nvcc, cuda_runtime_api.h, libcudart and libcublas. Default: use if
# found; an error only when --with-cuda was given and something is missing.
# cuBLAS is checked here but not linked: the CUDA engine opens it when it is
# first made (kernels/cuda/cublas_lib.c), so a program that makes none does
# not pay its loading (0.3 s, 200 MiB); the run path still names the folder.
# Sets NVCC, NVCCFLAGS, CUDA_CFLAGS, CUDA_LIBS, HAVE_CUDA.
AC_DEFUN([TL_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the CUDA engine (toolkit in DIR) @<:@default: use if found@:>@])],
  [], [with_cuda=check])
AC_ARG_WITH([cuda-arch],
  [AS_HELP_STRING([--with-cuda-arch=FLAGS],
    [nvcc -gencode flags @<:@default: Hopper, sm_90a + compute_90 PTX@:>@])],
  [tl_cuda_arch=$withval],
  [tl_cuda_arch="-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90"])
tl_have_cuda=no
tl_cuda_summary=""
tl_engines_cuda=""
AS_IF([test "x$with_cuda" != xno], [
  tl_cuda_dir=""
  AS_CASE(["$with_cuda"],
    [yes|check], [
      for d in "$CUDA_HOME" /usr/local/cuda; do
        AS_IF([test -n "$d" && test -x "$d/bin/nvcc"], [tl_cuda_dir=$d; break])
      done
      AS_IF([test -z "$tl_cuda_dir"], [
        tl_nvcc=`command -v nvcc 2>/dev/null`
        AS_IF([test -n "$tl_nvcc"], [tl_cuda_dir=`dirname "$tl_nvcc"`; tl_cuda_dir=`dirname "$tl_cuda_dir"`])
      ])],
    [tl_cuda_dir=$with_cuda])
  AS_IF([test -n "$tl_cuda_dir" && test -x "$tl_cuda_dir/bin/nvcc"], [
    NVCC="$tl_cuda_dir/bin/nvcc"
    tl_cuda_libdir="$tl_cuda_dir/lib64"
    AS_IF([test -d "$tl_cuda_libdir"], [], [tl_cuda_libdir="$tl_cuda_dir/lib"])
    CUDA_CFLAGS="-I$tl_cuda_dir/include"
    CUDA_LIBS="-L$tl_cuda_libdir -Wl,-rpath,$tl_cuda_libdir -lcudart -lstdc++"
    tl_save_CPPFLAGS=$CPPFLAGS
    tl_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS"
    LIBS="-lcublasLt -lcublas $CUDA_LIBS $LIBS"
    AC_MSG_CHECKING([whether CUDA runtime and cuBLAS programs link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>
#include <cublas_v2.h>]],
                      [[int n; cublasHandle_t h; cudaGetDeviceCount(&n); cublasCreate(&h);]])],
      [tl_have_cuda=yes], [])
    AC_MSG_RESULT([$tl_have_cuda])
    CPPFLAGS=$tl_save_CPPFLAGS
    LIBS=$tl_save_LIBS
    AS_IF([test $tl_have_cuda = yes],
      [AC_SEARCH_LIBS([dlopen], [dl], [], [tl_have_cuda=no])])
  ])
  AS_IF([test $tl_have_cuda = no && test "x$with_cuda" != xcheck],
    [AC_MSG_ERROR([--with-cuda given but no usable CUDA toolkit (nvcc, cudart, cuBLAS) found])])
])
dnl CUPTI (the kernel-level profile): in the toolkit's lib folder or under
dnl extras/CUPTI; the activity record of CUDA 13 (CUpti_ActivityKernel10).
tl_have_cupti=no
AS_IF([test $tl_have_cuda = yes], [
  for tl_cupti in "$tl_cuda_dir" "$tl_cuda_dir/extras/CUPTI"; do
    tl_cupti_lib="$tl_cupti/lib64"
    AS_IF([test -d "$tl_cupti_lib"], [], [tl_cupti_lib="$tl_cupti/lib"])
    tl_save_CPPFLAGS=$CPPFLAGS
    tl_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CFLAGS -I$tl_cupti/include"
    LIBS="-L$tl_cupti_lib -lcupti $CUDA_LIBS $LIBS"
    AC_MSG_CHECKING([for CUPTI in $tl_cupti])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cupti.h>]],
                      [[CUpti_ActivityKernel10 k; (void)k;
                        cuptiActivityFlushAll(1);]])],
      [tl_have_cupti=yes], [])
    AC_MSG_RESULT([$tl_have_cupti])
    CPPFLAGS=$tl_save_CPPFLAGS
    LIBS=$tl_save_LIBS
    AS_IF([test $tl_have_cupti = yes], [
      CUDA_CFLAGS="$CUDA_CFLAGS -I$tl_cupti/include"
      CUDA_LIBS="-L$tl_cupti_lib -Wl,-rpath,$tl_cupti_lib -lcupti $CUDA_LIBS"
      AC_DEFINE([HAVE_CUPTI], [1], [Define to 1 when CUPTI is there: the kernel-level profile.])
      break])
  done
])
AS_IF([test $tl_have_cuda = yes], [
  AC_DEFINE([HAVE_CUDA], [1], [Define to 1 to build the CUDA engine.])
  AC_DEFINE_UNQUOTED([TL_CUDA_ARCH], ["$tl_cuda_arch"],
    [nvcc's -gencode flags of the build, named when a GPU cannot run its code.])
  tl_cuda_summary="($NVCC; $tl_cuda_arch)"
  tl_engines_cuda=" and CUDA"
], [NVCC=""; CUDA_CFLAGS=""; CUDA_LIBS=""])
NVCCFLAGS="$tl_cuda_arch"
AC_SUBST([NVCC])
AC_SUBST([NVCCFLAGS])
AC_SUBST([CUDA_CFLAGS])
AC_SUBST([CUDA_LIBS])
AM_CONDITIONAL([HAVE_CUDA], [test $tl_have_cuda = yes])
])
