// Ending the process on an error, the same way with or without MPI.
//
// Under mpirun a rank that returns from main after an error would enter
// MPI_Finalize while its peers wait in their next collective, forever. So an
// error on any rank ends the whole job at once: the message is printed
// (prefixed with the rank) and, once MPI is running, MPI_Abort ends every
// rank with the exit code. Without MPI the message is printed and the caller
// returns the code from main.
#pragma once

#include <string>

namespace tessel {

// Prints "tessel: [rank R] error: MESSAGE" to stderr. If MPI is initialised
// (and not finalised) this never returns: it aborts the job with `code`.
// Otherwise it returns `code`, for main to return.
int report_fatal_error(const std::string& message, int code);

}  // namespace tessel
