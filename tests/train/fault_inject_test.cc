// TESSEL_FAULT_INJECT (src/tessel/train/fault_inject.h): the spec is parsed
// strictly (every error names the variable and the key or value that is
// wrong), arms only the named rank on attempt 0, and `after_file=PATH` makes
// the fault wait until PATH exists before the kill.
#include "tessel/train/fault_inject.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "common/test_dir.h"
#include "tessel/base/error.h"

namespace tessel {
namespace {

// Sets TESSEL_FAULT_INJECT (and TESSEL_ATTEMPT) for one test; restores both
// and disarms on the way out.
class FaultEnv {
 public:
  FaultEnv(const std::string& spec, const char* attempt = nullptr) {
    save("TESSEL_FAULT_INJECT", fault_);
    save("TESSEL_ATTEMPT", attempt_);
    ::setenv("TESSEL_FAULT_INJECT", spec.c_str(), 1);
    if (attempt)
      ::setenv("TESSEL_ATTEMPT", attempt, 1);
    else
      ::unsetenv("TESSEL_ATTEMPT");
  }
  ~FaultEnv() {
    restore("TESSEL_FAULT_INJECT", fault_);
    restore("TESSEL_ATTEMPT", attempt_);
    const std::optional<std::string> spec = fault_;
    ::unsetenv("TESSEL_FAULT_INJECT");
    arm_fault_injection(0);  // disarmed
    restore("TESSEL_FAULT_INJECT", spec);
  }

 private:
  static void save(const char* name, std::optional<std::string>& into) {
    if (const char* v = std::getenv(name)) into = v;
  }
  static void restore(const char* name, const std::optional<std::string>& value) {
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  std::optional<std::string> fault_, attempt_;
};

// The error arm_fault_injection raises for `spec`, or "" if it parses.
std::string arm_error(const std::string& spec) {
  FaultEnv env(spec);
  try {
    arm_fault_injection(0);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(FaultInject, ArmsTheNamedRankWithItsAfterFile) {
  FaultEnv env("rank=1,step=3,point=forward,after_file=/run/out/.standby-1.ready");
  arm_fault_injection(1);
  EXPECT_TRUE(fault_armed(FaultPoint::kForward));
  EXPECT_FALSE(fault_armed(FaultPoint::kBackward));
  EXPECT_EQ(fault_after_file(), "/run/out/.standby-1.ready");
  arm_fault_injection(0);  // another rank: parsed, not armed
  EXPECT_FALSE(fault_armed(FaultPoint::kForward));
  EXPECT_EQ(fault_after_file(), "");
}

TEST(FaultInject, WithoutAfterFileTheFaultHasNone) {
  FaultEnv env("rank=0,step=2,point=backward");
  arm_fault_injection(0);
  EXPECT_TRUE(fault_armed(FaultPoint::kBackward));
  EXPECT_EQ(fault_after_file(), "");
}

TEST(FaultInject, LaterAttemptsRunCleanButStillCheckTheSpec) {
  {
    FaultEnv env("rank=0,step=2,point=forward,after_file=/x", "1");
    arm_fault_injection(0);
    EXPECT_FALSE(fault_armed(FaultPoint::kForward));
    EXPECT_EQ(fault_after_file(), "");
  }
  FaultEnv env("rank=0,step=2,point=forward,after_file=", "1");
  EXPECT_THROW(arm_fault_injection(0), Error);
}

TEST(FaultInject, RefusesMalformedSpecsNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rank=0,step=1,point=forward,after_file=", "'after_file' needs a path"},
      {"rank=0,step=1,point=forward,after_file", "'after_file' needs a path"},
      {"rank=0,step=1,point=forward,after_file=/a,after_file=/b", "'after_file' given twice"},
      {"rank=0,step=1,point=forward,after=/a", "unknown key 'after'"},
      {"rank=x,step=1,point=forward", "'rank' needs an integer, got 'x'"},
      {"rank=0,step=1,point=sideways", "unknown point 'sideways'"},
      {"rank=0,point=forward,after_file=/a", "needs rank=R,step=S,point=P"},
      {"rank=0,step=1,point=forward,lose=2", "lose must be 0 or 1"},
  };
  for (const auto& [spec, what] : cases) {
    const std::string message = arm_error(spec);
    EXPECT_NE(message.find("TESSEL_FAULT_INJECT"), std::string::npos) << spec << ": " << message;
    EXPECT_NE(message.find(what), std::string::npos) << spec << ": " << message;
  }
}

TEST(FaultInject, WaitForFileTimesOutOrSeesTheFileAppear) {
  const std::filesystem::path dir = test_dir("fault_inject_wait");
  const std::string path = (dir / "ready").string();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(wait_for_file(path, 0.05));
  EXPECT_GE(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 0.05);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ofstream(path) << "ready\n";
  });
  start = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for_file(path, 30));
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.join();
  EXPECT_GE(waited, 0.09);
  EXPECT_LT(waited, 10);
  std::filesystem::remove_all(dir);
}

// The whole fault: armed with after_file, fault_point waits for the file (a
// thread creates it 200 ms later) and then SIGKILLs the process.
TEST(FaultInject, FaultWaitsForItsAfterFileThenKills) {
  const std::filesystem::path dir = test_dir("fault_inject_kill");
  const std::string path = (dir / "go-ahead").string();
  std::filesystem::remove(path);
  FaultEnv env("rank=0,step=4,point=optimizer,after_file=" + path);
  EXPECT_EXIT(
      {
        arm_fault_injection(0);
        fault_point(FaultPoint::kOptimizer, 3);  // another step: returns
        std::thread writer([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          std::ofstream(path) << "ready\n";
        });
        writer.detach();
        fault_point(FaultPoint::kOptimizer, 4);
        std::exit(0);  // not reached
      },
      ::testing::KilledBySignal(SIGKILL), "waiting for .*go-ahead.*killing this rank");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel
