# TL_CHECK_MPI: --with-mpi[=DIR]. Finds mpicc (in DIR/bin, else PATH), takes
# its compile and link flags (OpenMPI --showme, MPICH -compile-info/-link-info)
# and checks that MPI_Init links. Default: use if found; an error only when
# --with-mpi was given and MPI is missing.
# Sets MPI_CFLAGS, MPI_LIBS, HAVE_MPI (config.h and AM_CONDITIONAL).
AC_DEFUN([TL_CHECK_MPI], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi@<:@=DIR@:>@],
    [use MPI (mpicc in DIR/bin or PATH) for multi-process jobs @<:@default: use if found@:>@])],
  [], [with_mpi=check])
tl_have_mpi=no
tl_mpi_summary=""
AS_IF([test "x$with_mpi" != xno], [
  tl_mpi_path=$PATH
  AS_IF([test "x$with_mpi" != xyes && test "x$with_mpi" != xcheck],
        [tl_mpi_path="$with_mpi/bin"])
  AC_PATH_PROG([MPICC], [mpicc], [], [$tl_mpi_path])
  AS_IF([test -n "$MPICC"], [
    AS_IF([MPI_CFLAGS=`$MPICC --showme:compile 2>/dev/null` && MPI_LIBS=`$MPICC --showme:link 2>/dev/null`], [],
      [MPI_CFLAGS=`$MPICC -compile-info 2>/dev/null | cut -d' ' -f2-`
       MPI_LIBS=`$MPICC -link-info 2>/dev/null | cut -d' ' -f2-`])
    tl_save_CPPFLAGS=$CPPFLAGS
    tl_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"
    LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether MPI programs link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
                      [[MPI_Init(0, 0); MPI_Finalize();]])],
      [tl_have_mpi=yes; tl_mpi_summary="($MPICC)"], [])
    AC_MSG_RESULT([$tl_have_mpi])
    CPPFLAGS=$tl_save_CPPFLAGS
    LIBS=$tl_save_LIBS
  ])
  AS_IF([test $tl_have_mpi = no && test "x$with_mpi" != xcheck],
    [AC_MSG_ERROR([--with-mpi given but no working mpicc found (Debian: apt-get install libopenmpi-dev openmpi-bin)])])
])
AS_IF([test $tl_have_mpi = yes],
  [AC_DEFINE([HAVE_MPI], [1], [Define to 1 if MPI is available.])],
  [MPI_CFLAGS=""; MPI_LIBS=""])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AM_CONDITIONAL([HAVE_MPI], [test $tl_have_mpi = yes])
])
