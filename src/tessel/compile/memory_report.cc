#include "tessel/compile/memory_report.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "tessel/backend/backend.h"
#include "tessel/base/error.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/compile/distributed.h"
#include "tessel/compile/pipeline_model.h"
#include "tessel/compile/rank_storage.h"
#include "tessel/ir/model_contract.h"
#include "tessel/runtime/pipeline_executor.h"
#include "tessel/runtime/program.h"
#include "tessel/runtime/transfer_staging.h"
#include "tessel/schedule/schedule_check.h"
#include "tessel/sharding/lower.h"

namespace tessel {

bool holds_save_snapshot(const TrainConfig& c) {
  return c.async_save && c.checkpoint_every > 0 &&
         c.steps / c.checkpoint_every > c.first_step / c.checkpoint_every;
}

namespace {

// The host copy of the state that asynchronous periodic saves write from
// (checkpoint.h, CheckpointSnapshot), held from the first periodic save on:
// the whole state on rank 0; without a pipeline, the sharded tensors on
// every other rank too (they join the snapshot's one world sum). None when
// no periodic save falls in (first_step, steps].
int64_t snapshot_host_bytes(const TrainConfig& c, int rank, int64_t all_elements,
                            int64_t sharded_elements) {
  return holds_save_snapshot(c) ? (rank == 0 ? all_elements : sharded_elements) * 4 : 0;
}

// What the rank's engine stores outside its arenas (rank_storage.h): the
// same function the engine allocates from.
void add_storage(const CompiledRank& compiled, const RankStorage& s, bool pipelined,
                 bool asynchronous, RankMemory& m) {
  const TrainConfig& c = compiled.config;
  (offloads(c, "weights") ? m.host.weights : m.parameters) = s.value_bytes();
  if (c.optimizer == "adamw")
    (offloads(c, "optimizer") ? m.host.optimizer : m.optimizer) = 2 * s.state_bytes();
  m.host.offload_staging = s.offload_staging_buffers * s.offload_staging_elements * 4;
  if (stages_collectives(c))
    m.host.comm_staging = DistributedContext::staging_bytes(compiled.mesh, staging_piece(c));
  m.zero_slice = s.zero_slice;
  m.zero_block = s.zero_block;
  m.device_runtime = device_runtime_bytes(c.device);
  m.host.input_staging = s.input_staging;
  m.host.full_tensor = s.full_tensor;
  const int64_t parts = c.optimizer == "adamw" ? 3 : 1;
  int64_t elements = 0, sharded = 0;  // asynchronous pipelines save the tied copies too
  for (const StoredParam& p : s.params) {
    const int64_t n = p.shape.numel();
    elements += n * parts * (asynchronous ? static_cast<int64_t>(p.pipe_ranks.size()) : 1);
    if (pipelined || !p.held) continue;
    if (p.value_numel < n) sharded += n;
    if (parts == 3 && p.state_numel < n) sharded += 2 * n;
  }
  m.host.checkpoint_snapshot = snapshot_host_bytes(c, compiled.rank, elements, sharded);
}

// A pipelined rank: its stages' plans, times the micro-batches in flight.
RankMemory pipeline_rank_memory(const CompiledRank& compiled, const Schedule& schedule) {
  const PipelineModel& model = *compiled.pipeline;
  const RankStorage s = rank_storage(compiled);
  RankMemory m;
  m.rank = compiled.rank;
  add_storage(compiled, s, /*pipelined=*/true, schedule.asynchronous, m);
  m.accumulators = (s.accumulator_elements + s.zero_gradient_elements + s.tie_scratch_elements) * 4;
  m.eval_arena = static_cast<int64_t>(model.eval_arena_bytes());
  // Micro-batches in flight per stage, as the executor allocates instances.
  std::vector<int> instances;
  int in_flight = 0;
  for (size_t k = 0; k < model.stages().size(); ++k) {
    instances.push_back(instances_needed(schedule, model.pipe_rank(), static_cast<int>(k)));
    in_flight += instances.back();
  }
  if (schedule.asynchronous) {  // as PipelineEngine's WeightVersions allocates them
    const int versions = check_schedule(schedule).weight_versions[model.pipe_rank()];
    const int copies = schedule.name == "xpipe" ? 1 : std::min(in_flight, versions);
    m.weight_copies = copies * s.value_bytes();  // on the device, offloaded weights or not
  }
  m.arena = 0;
  for (size_t k = 0; k < model.stages().size(); ++k) {
    const PipelineModel::LocalStage& st = model.stages()[k];
    m.arena += instances[k] * static_cast<int64_t>(st.arena_bytes) +
               static_cast<int64_t>(st.phase_local_bytes);
    m.host.activations += instances[k] * static_cast<int64_t>(st.offload_bytes);
    m.stages.push_back(st.graph.stage);
    m.in_flight.push_back(instances[k]);
    m.stage_arena.push_back(static_cast<int64_t>(st.arena_bytes));
    m.stage_shared.push_back(static_cast<int64_t>(st.phase_local_bytes));
  }
  if (stages_collectives(compiled.config) && model.pipe_axis())
    m.host.comm_staging += TransferStaging::bytes(model.compiled_stages(), instances);
  return m;
}

}  // namespace

RankMemory predict_rank_memory(const CompiledRank& compiled, const Schedule* as_schedule) {
  if (compiled.pipelined())
    return pipeline_rank_memory(compiled,
                                as_schedule ? *as_schedule : compiled.pipeline->schedule());
  const RankStorage s = rank_storage(compiled);
  RankMemory m;
  m.rank = compiled.rank;
  m.arena = static_cast<int64_t>(compiled.train.program->arena_bytes());
  m.host.activations = static_cast<int64_t>(compiled.train.program->offload_bytes());
  m.eval_arena = static_cast<int64_t>(compiled.eval_arena_bytes);
  add_storage(compiled, s, /*pipelined=*/false, false, m);
  m.gradients = s.gradient_bytes();
  return m;
}

std::vector<RankMemory> predict_memory(const TrainConfig& c) {
  const Mesh mesh = Mesh::parse(c.mesh);
  const Layout layout = layout_for(c, mesh);
  GraphCache cache;
  std::vector<RankMemory> ranks;
  for (int r = 0; r < mesh.rank_count(); ++r)
    ranks.push_back(predict_rank_memory(
        compile_rank(c, mesh, layout, r, CompileMode::kPlanOnly, nullptr, &cache)));
  return ranks;
}

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) {
      std::istringstream in(line.substr(6));
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
  return -1;
}

std::string format_bytes(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  return buf;
}

int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  const std::map<std::string, double> units = {
      {"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
  auto it = units.find(unit);
  if (used == 0 || it == units.end() || value <= 0)
    TS_THROW("memory size '", text,
             "' must be a positive number with an optional unit B, KiB, MiB or GiB");
  return static_cast<int64_t>(value * it->second);
}

int64_t limited_bytes(const RankMemory& m, const std::string& device) {
  return device == "cpu" ? m.total() : m.device();
}

namespace {

int64_t worst_total(const std::vector<RankMemory>& ranks, const std::string& device,
                    int* worst_rank) {
  int64_t worst = -1;
  for (const RankMemory& m : ranks)
    if (limited_bytes(m, device) > worst) worst = limited_bytes(m, device), *worst_rank = m.rank;
  return worst;
}

}  // namespace

void check_memory_limit(const TrainConfig& c) {
  if (c.memory_limit.empty()) return;
  const int64_t limit = parse_bytes(c.memory_limit);
  std::vector<RankMemory> ranks = predict_memory(c);
  int rank = 0;
  const int64_t worst = worst_total(ranks, c.device, &rank);
  if (worst <= limit) return;
  const RankMemory& m = ranks[rank];
  // What would fit: the same run with more sharding or recomputation.
  std::string fits;
  Mesh mesh = Mesh::parse(c.mesh);
  Layout layout = layout_for(c, mesh);
  const bool has_data_axis = layout.zero_axis() >= 0;
  if (uses_pipeline(c, mesh)) {
    // Fewer micro-batches in flight (1F1B) and recomputation shrink the arenas.
    for (const std::string& schedule : {c.schedule, std::string("1f1b")})
      for (const std::string& recompute : {c.recompute, std::string("blocks")}) {
        if (schedule == c.schedule && recompute == c.recompute) continue;
        TrainConfig alt = c;
        alt.schedule = schedule;
        alt.chunks = schedule == "interleaved" ? c.chunks : 1;
        alt.recompute = recompute;
        int r = 0;
        const int64_t total = worst_total(predict_memory(alt), c.device, &r);
        fits += str_cat("\n  --schedule ", schedule, " --recompute ", recompute, ": ",
                        format_bytes(total), total <= limit ? " (fits)" : " (does not fit)");
      }
  }
  for (int zero = c.zero; zero <= 3; ++zero) {  // this stage, then the higher ones
    if (uses_pipeline(c, mesh) || (zero != c.zero && !has_data_axis)) break;
    for (const std::string& recompute : {c.recompute, std::string("blocks")}) {
      if (zero == c.zero && recompute == c.recompute) continue;
      if (recompute != c.recompute && c.recompute == "blocks") continue;
      TrainConfig alt = c;
      alt.zero = zero;
      alt.recompute = recompute;
      int r = 0;
      const int64_t total = worst_total(predict_memory(alt), c.device, &r);
      fits += str_cat("\n  --zero ", zero, " --recompute ", recompute, ": ", format_bytes(total),
                      total <= limit ? " (fits)" : " (does not fit)");
    }
  }
  if (c.recompute != "auto")
    fits += "\n  --recompute auto: the recomputation with the fewest recomputed FLOPs that fits";
  TS_THROW("predicted ", c.device == "cpu" ? "" : str_cat(c.device, " device "), "memory on rank ",
           rank, " is ", format_bytes(worst), ", over the limit of ", format_bytes(limit), " ('",
           c.memory_limit, "'): ", memory_breakdown(m), ". Alternatives:",
           fits.empty() ? std::string("\n  none of --zero / --recompute applies; use more ranks")
                        : fits);
}

std::string memory_breakdown(const RankMemory& m) {
  return str_cat(
      "parameters ", format_bytes(m.parameters), ", optimizer state ", format_bytes(m.optimizer),
      ", training arena ", format_bytes(m.arena), " (of which gradients ",
      format_bytes(m.gradients), "), evaluation arena ", format_bytes(m.eval_arena),
      m.accumulators > 0 ? str_cat(", gradient accumulators ", format_bytes(m.accumulators))
                         : std::string(),
      m.weight_copies > 0 ? str_cat(", weight copies ", format_bytes(m.weight_copies))
                          : std::string(),
      m.zero_slice + m.zero_block > 0
          ? str_cat(", ZeRO buffers ", format_bytes(m.zero_slice + m.zero_block))
          : std::string(),
      m.device_runtime > 0 ? str_cat(", backend workspace ", format_bytes(m.device_runtime))
                           : std::string(),
      " (device ", format_bytes(m.device()), "), host buffers ", format_bytes(m.host.total()),
      m.host.weights > 0
          ? str_cat(" (of which offloaded weights ", format_bytes(m.host.weights), ")")
          : std::string(),
      m.host.activations > 0
          ? str_cat(" (of which offloaded activations ", format_bytes(m.host.activations), ")")
          : std::string(),
      m.host.comm_staging > 0
          ? str_cat(" (of which collective staging ", format_bytes(m.host.comm_staging), ")")
          : std::string());
}

}  // namespace tessel
