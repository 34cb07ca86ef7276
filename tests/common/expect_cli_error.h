// expect_error(result, needle): a run of the tessel CLI (run_cli) failed and
// its output holds `needle`. Shared by the command-line tests (one definition,
// so they can share a unity-build batch).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "common/run_cli.h"

namespace tessel {

inline void expect_error(const CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(needle), std::string::npos) << "missing '" << needle << "' in:\n"
                                                      << r.output;
}

}  // namespace tessel
