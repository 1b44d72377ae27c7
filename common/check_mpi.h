/* CHECK_MPI: an MPI call's error code with MPI's own error string. */
#ifndef TL_CHECK_MPI_H
#define TL_CHECK_MPI_H
#include "common/check.h"
#include <mpi.h>

#define CHECK_MPI(call)                                                      \
  do {                                                                       \
    int mpi_rc_ = (call);                                                    \
    if (mpi_rc_ != MPI_SUCCESS) {                                            \
      char mpi_msg_[MPI_MAX_ERROR_STRING];                                   \
      int mpi_len_ = 0;                                                      \
      MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                        \
      return err_set(ERR_FAIL, __FILE__, __LINE__, "%s: %s", #call,         \
                     mpi_msg_);                                              \
    }                                                                        \
  } while (0)
#endif
