// `tessel inspect` for a pipelined (or micro-batched) config: each stage's
// blocks, parameters, FLOPs and predicted time (the partition's roofline
// estimate), the schedule's peak micro-batches in flight, and the chosen
// rank's stages with their memory plans. Offline: no MPI, nothing runs.
#include <cstdio>

#include "commands.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/memory_report.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel::cli {

int inspect_pipeline(const CompiledRank& compiled) {
  const Mesh& mesh = compiled.mesh;
  const int rank = compiled.rank;
  const PipelineModel& model = *compiled.pipeline;
  const Schedule& s = model.schedule();
  const StagePartition& p = model.partition();
  std::printf(
      "mesh %s, rank %d of %d; pipeline of %d ranks x %d chunks = %d stages, schedule %s, "
      "%d micro-batches\n",
      mesh.to_string().c_str(), rank, mesh.rank_count(), s.ranks, s.chunks, s.stages(),
      s.name.c_str(), s.microbatches);
  std::printf(
      "\nstages (blocks, parameters read, forward GFLOP per micro-batch, predicted "
      "forward+backward ms per micro-batch at 100 GFLOP/s, 10 GB/s):\n");
  for (int k = 0; k < p.stages; ++k) {
    const int last = k + 1 < p.stages ? p.first_block[k + 1] - 1 : p.blocks - 1;
    std::printf("  stage %-2d on pipe rank %d: blocks %d-%d%s%s  %lld  %.3f GFLOP  %.3f ms\n", k,
                s.rank_of_stage(k), p.first_block[k], last, k == 0 ? " +embeddings" : "",
                k == p.stages - 1 ? " +head" : "",
                static_cast<long long>(model.stage_parameters()[k]), p.flops[k] / 1e9,
                p.predicted_seconds[k] * 1e3);
  }
  std::printf("\nparameters by pipeline rank (a tied parameter counts on each rank holding it):\n");
  for (int r = 0; r < s.ranks; ++r) {
    int64_t n = 0;
    for (const PipelineParam& q : model.params())
      for (int h : q.pipe_ranks)
        if (h == r) n += q.shape.numel();
    std::printf("  pipe rank %d: %lld\n", r, static_cast<long long>(n));
  }
  for (const PipelineParam& q : model.params())
    if (q.pipe_ranks.size() > 1) {
      std::printf("  tied: %s on pipe ranks", q.name.c_str());
      for (int r : q.pipe_ranks) std::printf(" %d", r);
      std::printf(" (gradients summed over the pipe axis)\n");
    }
  const ScheduleReport report = check_schedule(s);
  const SimulatedTimeline sim = simulate_schedule(s);
  std::printf("\nschedule: peak micro-batches in flight and bubble (unit costs) per pipe rank:\n");
  for (int r = 0; r < s.ranks; ++r)
    std::printf("  pipe rank %d: %d in flight, %d weight versions, bubble %.3f\n", r,
                report.peak_in_flight[r], report.weight_versions[r], sim.bubble_fraction[r]);
  const RankMemory m = predict_rank_memory(compiled);
  std::printf("\nrank %d memory plan:\n", rank);
  for (size_t i = 0; i < m.stages.size(); ++i)
    std::printf("  stage %d: %d in flight x %s stashed + %s shared temporaries\n", m.stages[i],
                m.in_flight[i], format_bytes(m.stage_arena[i]).c_str(),
                format_bytes(m.stage_shared[i]).c_str());
  std::printf("  parameters %s, accumulators %s, optimizer %s, eval arena %s; peak %s\n",
              format_bytes(m.parameters).c_str(), format_bytes(m.accumulators).c_str(),
              format_bytes(m.optimizer).c_str(), format_bytes(m.eval_arena).c_str(),
              format_bytes(m.total()).c_str());
  return 0;
}

}  // namespace tessel::cli
