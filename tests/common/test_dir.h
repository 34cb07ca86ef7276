// test_dir(prefix): a fresh directory for the running test, under the
// system's temporary directory, named by the prefix, the process id and the
// test's name (so parallel ctest runs and tests never share one). Created
// here; the fixture removes it in TearDown.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tessel {

inline std::filesystem::path test_dir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tessel
