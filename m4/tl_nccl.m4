# TL_CHECK_NCCL: --with-nccl[=DIR]. Needs CUDA (for device buffers) and MPI
# (to share the NCCL id). Looks in DIR, then the CUDA toolkit's folders, then
# the system's; checks nccl.h and ncclGetVersion. Default: use if found; an
# error only when --with-nccl was given and it cannot be used.
# Sets NCCL_CFLAGS, NCCL_LIBS, HAVE_NCCL.
AC_DEFUN([TL_CHECK_NCCL], [
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
    [use NCCL between GPU ranks (needs CUDA and MPI) @<:@default: use if found@:>@])],
  [], [with_nccl=check])
tl_have_nccl=no
tl_nccl_summary=""
AS_IF([test "x$with_nccl" != xno], [
  AS_IF([test $tl_have_cuda = yes && test $tl_have_mpi = yes], [
    NCCL_CFLAGS=""
    NCCL_LIBS="-lnccl"
    AS_CASE(["$with_nccl"],
      [yes|check], [],
      [NCCL_CFLAGS="-I$with_nccl/include"
       tl_nccl_libdir="$with_nccl/lib"
       AS_IF([test -d "$with_nccl/lib64"], [tl_nccl_libdir="$with_nccl/lib64"])
       NCCL_LIBS="-L$tl_nccl_libdir -Wl,-rpath,$tl_nccl_libdir -lnccl"])
    tl_save_CPPFLAGS=$CPPFLAGS
    tl_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $NCCL_CFLAGS $CUDA_CFLAGS"
    LIBS="$NCCL_LIBS $CUDA_LIBS $LIBS"
    AC_MSG_CHECKING([whether NCCL programs link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
                      [[int v; ncclGetVersion(&v);]])],
      [tl_have_nccl=yes], [])
    AC_MSG_RESULT([$tl_have_nccl])
    CPPFLAGS=$tl_save_CPPFLAGS
    LIBS=$tl_save_LIBS
  ], [tl_nccl_summary="(needs both CUDA and MPI)"])
  AS_IF([test $tl_have_nccl = no && test "x$with_nccl" != xcheck],
    [AC_MSG_ERROR([--with-nccl given but NCCL cannot be used $tl_nccl_summary])])
])
AS_IF([test $tl_have_nccl = yes],
  [AC_DEFINE([HAVE_NCCL], [1], [Define to 1 if NCCL is available.])],
  [NCCL_CFLAGS=""; NCCL_LIBS=""])
AC_SUBST([NCCL_CFLAGS])
AC_SUBST([NCCL_LIBS])
AM_CONDITIONAL([HAVE_NCCL], [test $tl_have_nccl = yes])
])
