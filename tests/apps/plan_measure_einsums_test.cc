// `tessel plan --measure-einsums`: the einsums of the plans for a config
// that the profile has not measured are timed and written into the
// profile's file; a second run finds none left; with --cluster it is
// refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/run_cli.h"
#include "plan/synthetic_profile.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

TEST(PlanCli, MeasureEinsumsAddsThePlansEinsumsToTheProfile) {
  const fs::path file =
      fs::temp_directory_path() / ("tessel_plan_einsums_" + std::to_string(getpid()) + ".json");
  MachineProfile(synthetic_profile_data(), file.string()).save(file.string());
  const std::string config = std::string(TESSEL_SOURCE_DIR) + "/examples/gpt-tiny.json";
  const std::string args = "plan --config " + config +
                           " --ranks 2 --threads 1 --measure-einsums --profile " + file.string();
  CliResult r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("einsums of these plans not in"), std::string::npos) << r.output;
  const MachineProfile p = MachineProfile::load(file.string());
  ASSERT_FALSE(p.data().einsums.empty());
  for (const MeasuredEinsum& e : p.data().einsums) {
    EXPECT_EQ(e.shapes.threads, 1);
    EXPECT_GT(e.seconds, 0);
  }
  r = run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plan: 0 einsums of these plans not in"), std::string::npos) << r.output;
  EXPECT_EQ(MachineProfile::load(file.string()).data().einsums.size(), p.data().einsums.size());
  fs::remove(file);

  r = run_cli("plan --config " + config + " --ranks 8 --measure-einsums --cluster " +
              std::string(TESSEL_SOURCE_DIR) + "/examples/clusters/dgx-a100-128.json");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("does not apply to --cluster"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessel::plan
