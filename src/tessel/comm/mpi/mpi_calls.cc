#include "tessel/comm/mpi/mpi_calls.h"

#include "tessel/base/error.h"

namespace tessel::mpi_detail {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return str_cat("MPI error code ", code);
  return std::string(text, static_cast<size_t>(len));
}

bool mpi_finalized() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  return finalized != 0;
}

// Throws a tessel::Error naming the call, group, op and element count.
void check_mpi(int code, const char* collective, const std::string& group, const std::string& op,
               int64_t n) {
  if (code == MPI_SUCCESS) return;
  TS_THROW("MPI ", collective, " failed on group '", group, "' (op '", op, "', ", n,
           " elements): ", mpi_error_string(code));
}

}  // namespace tessel::mpi_detail
