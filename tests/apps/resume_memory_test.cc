// The memory prediction of a resumed run: the host copy that asynchronous
// periodic saves write from is predicted only when a periodic save falls in
// the steps the run takes ((first step, steps]), and the prediction equals
// the measured peak of tensor storage to the byte on one process, with and
// without that copy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/run_cli.h"
#include "common/test_dir.h"

namespace {

namespace fs = std::filesystem;

class ResumeMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tessel::test_dir("tessel_resume_memory");
    nlohmann::json j = {{"model", "gpt"},  {"n_layer", 1},  {"n_head", 2},
                        {"d_model", 32},   {"context", 16}, {"batch", 4},
                        {"eval_every", 0}, {"threads", 1},  {"sample_chars", 0}};
    config_ = (dir_ / "config.json").string();
    std::ofstream(config_) << j.dump();
    // Saves at steps 2 and 4.
    const tessel::CliResult r =
        tessel::run_cli("train --config " + config_ + " --out " + (dir_ / "first").string() +
                        " --steps 4 --checkpoint-every 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Resumes from step 2 up to `steps` (a periodic save every 2 steps) and
  // returns rank 0's memory record from summary.json.
  nlohmann::json resume_to(int steps) {
    const fs::path out = dir_ / ("resumed_to_" + std::to_string(steps));
    const tessel::CliResult r =
        tessel::run_cli("train --config " + config_ + " --out " + out.string() + " --steps " +
                        std::to_string(steps) + " --checkpoint-every 2 --resume " +
                        (dir_ / "first" / "checkpoints" / "step-2").string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(out / "summary.json");
    return nlohmann::json::parse(in)["memory_per_rank"].at(0);
  }

  fs::path dir_;
  std::string config_;
};

TEST_F(ResumeMemory, NoPeriodicSaveLeftPredictsNoSnapshot) {
  const nlohmann::json m = resume_to(3);  // step 2 -> 3: no save at a multiple of 2
  EXPECT_EQ(m["predicted_bytes"]["checkpoint_snapshot"].get<int64_t>(), 0) << m.dump(2);
  EXPECT_EQ(m["measured_peak_tracked_bytes"].get<int64_t>(),
            m["predicted_bytes"]["total"].get<int64_t>())
      << m.dump(2);
}

TEST_F(ResumeMemory, PeriodicSaveLeftPredictsTheSnapshot) {
  const nlohmann::json m = resume_to(4);  // step 2 -> 4: a periodic save at step 4
  EXPECT_GT(m["predicted_bytes"]["checkpoint_snapshot"].get<int64_t>(), 0) << m.dump(2);
  EXPECT_EQ(m["measured_peak_tracked_bytes"].get<int64_t>(),
            m["predicted_bytes"]["total"].get<int64_t>())
      << m.dump(2);
}

}  // namespace
