// A pipeline's data-axis work overlapped with its schedule
// (CostOptions::overlap_data_parallel, data_parallel_overlap.h): the
// reductions queue on one channel from each chunk's last backward, the
// gathers of the next step each before its chunk's first forward; and the
// cost model with the option on a pipeline with chunks: less exposed, the
// step's parts still summing to it.
#include "tessel/plan/model/data_parallel_overlap.h"

#include <gtest/gtest.h>

#include "common/tiny_gpt.h"
#include "tessel/plan/model/cost_model.h"
#include "toy_hardware.h"

namespace tessel::plan {
namespace {

TEST(DataParallelOverlap, WorkDueAtTheEdgesOfTheScheduleIsAllExposed) {
  // Gradients complete at the makespan and parameters needed at once: as
  // if run after the schedule.
  const OverlappedDataWork w = overlapped_data_work({{10, 3, 0, 2}}, 10);
  EXPECT_DOUBLE_EQ(w.reduce_exposed_s, 3);
  EXPECT_DOUBLE_EQ(w.gather_exposed_s, 2);
  EXPECT_DOUBLE_EQ(w.comm_s, 5);
}

TEST(DataParallelOverlap, EarlyChunksHideTheirReductionsAndLateOnesTheirGathers) {
  // Chunk A: ready at 2, reduced by 5; chunk B: ready at 10, reduced by 11.
  // Gathers: A's 2 due at 0 (late by 2), B's 4 due at 5 (done at 6: late by 1).
  const OverlappedDataWork w = overlapped_data_work({{2, 3, 0, 2}, {10, 1, 5, 4}}, 10);
  EXPECT_DOUBLE_EQ(w.reduce_exposed_s, 1);
  EXPECT_DOUBLE_EQ(w.gather_exposed_s, 2);
  EXPECT_DOUBLE_EQ(w.comm_s, 10);
}

TEST(DataParallelOverlap, ReductionsShareOneChannel) {
  // A from 8 to 13, B waits for it: 13 to 14, 4 past the makespan.
  const OverlappedDataWork w = overlapped_data_work({{9, 1, 0, 0}, {8, 5, 0, 0}}, 10);
  EXPECT_DOUBLE_EQ(w.reduce_exposed_s, 4);
  EXPECT_DOUBLE_EQ(w.gather_exposed_s, 0);
}

// The toy hardware's slow links, one node of 8.
class SlowLinks : public ToyHardware {
 public:
  SlowLinks() : ToyHardware(8) {}
};

TEST(DataParallelOverlap, ThePipelineExposesLessOfItsDataAxisAndStillSumsToItsStep) {
  TrainConfig c = tiny_gpt_config(4, 8);
  c.mesh = "pipe=2,data=2";
  c.schedule = "interleaved";
  c.chunks = 2;
  c.microbatches = 4;
  for (int zero : {0, 1}) {
    c.zero = zero;
    const std::vector<int> ranks = representative_ranks(Mesh::parse(c.mesh), true);
    CostOptions on;
    on.overlap_data_parallel = true;
    const StepPrediction after = predict_step(c, ranks, SlowLinks(), {});
    const StepPrediction overlapped = predict_step(c, ranks, SlowLinks(), on);
    for (const StepPrediction* p : {&after, &overlapped}) {
      double exposed = 0;
      for (const auto& [axis, t] : p->exposed_comm_s) exposed += t;
      EXPECT_NEAR(p->step_s, p->compute_s + exposed + p->bubble_s + p->optimizer_s, 1e-12);
      EXPECT_LE(p->exposed_comm_s.at("data"), p->comm_s.at("data") + 1e-15);
    }
    EXPECT_LT(overlapped.exposed_comm_s.at("data"), after.exposed_comm_s.at("data"))
        << "zero " << zero;
    EXPECT_LT(overlapped.step_s, after.step_s) << "zero " << zero;
  }
}

}  // namespace
}  // namespace tessel::plan
