// The engines allocate exactly what the memory prediction sums: both read
// compile/rank_storage.h. On one process, for the single program
// (ProgramEngine) and for micro-batches (PipelineEngine), the tracked peak of
// a short run that ends in a checkpoint save equals predict_memory's total
// to the byte, and the trainer's model-state bytes equal the prediction's
// parts. (tests/layout's MeasuredMemory checks the same under mpirun.)
#include <gtest/gtest.h>

#include <filesystem>

#include "common/tiny_gpt.h"
#include "tessel/compile/memory_report.h"
#include "tessel/tensor/aligned_buffer.h"
#include "tessel/train/trainer.h"

namespace tessel {
namespace {

struct EngineCase {
  const char* name;
  int64_t microbatches;
  const char* optimizer;
};
void PrintTo(const EngineCase& c, std::ostream* out) { *out << c.name; }

class EngineStorage : public ::testing::TestWithParam<EngineCase> {};

TEST_P(EngineStorage, TrackedPeakEqualsThePrediction) {
  const EngineCase& p = GetParam();
  TrainConfig c = tiny_gpt_config(2, 8);
  c.model = "gpt";
  c.steps = 2;
  c.eval_batches = 1;
  c.threads = 1;
  c.microbatches = p.microbatches;
  c.optimizer = p.optimizer;
  const RankMemory predicted = predict_memory(c).at(0);
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (std::string("tessel_engine_test_") + p.name);
  std::filesystem::remove_all(dir);
  const int64_t before = allocation_stats().live_bytes;
  reset_allocation_peak();
  {
    Trainer t(c);
    EXPECT_EQ(t.pipeline() != nullptr, p.microbatches > 1) << "the engine for the config";
    t.step();
    t.step();
    t.evaluate();
    const Trainer::ModelStateBytes state = t.model_state_bytes();
    EXPECT_EQ(state.parameters, predicted.parameters);
    EXPECT_EQ(state.optimizer, predicted.optimizer);
    EXPECT_EQ(static_cast<int64_t>(t.arena_bytes()), predicted.arena);
    EXPECT_EQ(static_cast<int64_t>(t.eval_arena_bytes()), predicted.eval_arena);
    if (!t.pipeline()) {
      EXPECT_EQ(state.gradients, predicted.gradients);
    }
    t.save_checkpoint(dir.string());
  }
  const int64_t measured = allocation_stats().peak_bytes - before;
  EXPECT_EQ(measured, predicted.total()) << memory_breakdown(predicted);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineStorage,
                         ::testing::Values(EngineCase{"program_adamw", 1, "adamw"},
                                           EngineCase{"program_sgd", 1, "sgd"},
                                           EngineCase{"microbatches_adamw", 2, "adamw"}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace tessel
