// Predicted step time and memory of a compiled configuration.
//
// The cost model reads the programs compile_rank() built for one
// representative rank per role (plan-only: nothing allocated) and simulates
// one training step on a HardwareModel, the way the runtime executes it:
//   - each instruction in program order: an einsum as a GEMM of its plan's
//     (batch, m, n, k) plus the copies of operands it permutes into scratch
//     (einsum_seconds: the compiled kernel's on this machine, a device
//     GEMM's on a cluster), times the profile's in-situ factor for its
//     size on this machine (einsum_in_situ.h); any other kernel as a
//     memory-bound pass over its inputs and output, or its FLOPs at peak
//     when that is slower; views cost nothing; every kernel's time times
//     the ranks sharing a core
//     (HardwareModel::compute_share) when they outnumber the cores;
//   - a blocking collective (tensor- and sequence-parallel activations,
//     ZeRO-3 gathers) by alpha-beta on the link its mesh axis spans, on the
//     critical path;
//   - gradient buckets: each starts its all-reduce after its last member.
//     Background progress: it runs on its axis's channel behind the
//     following instructions. Polled progress (CommProgress): the buckets of
//     an axis advance one at a time, only at the polls the runtime makes
//     before each instruction, all_reduce_poll_bytes a poll, each poll
//     charging the rank its share (1 - overlap) of the bucket's time
//     (nonblocking_factor x the blocking all-reduce's); a bucket is done at
//     the poll that completes its polls, once overlap x its time has
//     passed. The step waits for every bucket at the end (what the polls did
//     not finish takes its remaining share of the time then); what is
//     charged or waited for is exposed;
//   - pipelines: per stage, the forward, backward-input and backward-weight
//     phases of its program (plus the gradient accumulation) become the
//     costs of the schedule's actions, activations and gradients cross the
//     pipe axis point to point, and the schedule simulator
//     (schedule_check.h) runs the action lists; the per-step data-axis
//     reduction of the accumulators and the tied-embedding sum follow.
//     Polled progress: a send costs its sender (1 - send_overlap) x its
//     time, charged to the F or B/BI that produced it, and arrives no sooner
//     than ceil(bytes / send_poll_bytes) of the sender's mean instruction
//     times. Ranks sharing cores fill each other's bubbles: the schedule
//     takes at least share x the pipeline ranks' mean compute;
//   - co-run (HardwareModel::co_run, measured by calibrate; 1 on a cluster):
//     a rank's kernels and memory passes take `computing` x their time
//     while other ranks of its node compute too: always in a single program
//     and the update, in a pipeline with other axes or shared cores too;
//     in a pipeline alone on its node an action takes
//     polling + (computing - polling) x (the share of it overlapped by
//     another rank's actions), re-simulated until the makespan settles;
//   - the optimizer: AdamW (or SGD) over the rank's state elements and the
//     gradient-norm all-reduce; the ZeRO-1/2 parameter all-gathers follow it
//     as exposed data-axis communication;
//   - offload (HardwareModel::host_copy_seconds, host_memory_seconds): an
//     instruction's activation copies (Program::InstructionInfo::
//     offload_bytes) add to it, in order; an offloaded update adds its
//     copies and runs at the host's memory rate.
// Memory is the exact static plan (predict_rank_memory), as the dry run
// prints it. Which ranks share a node follows the mesh's axis order: ranks
// are row-major, so an axis whose groups span at most devices_per_node
// consecutive ranks is intra-node.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessel/compile/compile_rank.h"
#include "tessel/plan/profile/hardware_model.h"

namespace tessel::plan {

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;  // kernels on the slowest rank's critical path
  // The update and the gradient norm (its 4-byte world all-reduce included).
  // The ZeRO-1/2 gathers and a pipeline's data-axis reduction and tied
  // parameters' sum after the schedule are exposed communication on their
  // axes, not optimizer time: step = compute + exposed + bubble + optimizer.
  double optimizer_s = 0;
  double bubble_s = 0;                   // pipelines: the slowest rank's idle time in the schedule
  std::map<std::string, double> comm_s;  // per mesh axis: time in collectives
  std::map<std::string, double> exposed_comm_s;  // per mesh axis: not hidden behind compute
  // Largest predicted device memory of any rank (tensor storage; host
  // buffers only where they are on the device: host_buffers_on_device).
  int64_t peak_bytes = 0;
  int peak_rank = 0;
  // Largest predicted host memory of any rank (RankMemory::host: pinned
  // offload, input staging, checkpoint buffers).
  int64_t host_bytes = 0;
};

struct CostOptions {
  int threads = 1;  // threads per rank (CPU hardware models)
  Precision precision = Precision::kF32;
  // Pipelines under background progress: each chunk's data-axis gradient
  // reduction starts after the chunk's last backward on the rank and runs
  // on the data axis's channel behind the rank's later actions, and the
  // ZeRO parameter gathers of the next step are prefetched chunk by chunk,
  // each needed only by its chunk's first forward (FSDP's asynchronous
  // prefetch and reduce). Tessel's pipeline engine does not do this (it
  // reduces after the schedule): a published run that states it turns it
  // on (`published.data_parallel_overlap`). Screening does not model it.
  bool overlap_data_parallel = false;
  // Offload "weights" where host memory is not the device's (a cluster
  // file): the programs' reads of parameter storage
  // (InstructionInfo::param_read_bytes, shared_copy_read_bytes) cross the
  // host link, in order with the kernels. Set from the config being costed.
  bool weights_on_host = false;
};

// One einsum instruction's time on `hw`: the GEMM of its plan plus the
// copies around it, times hw.einsum_in_situ_factor() at its FLOPs, the
// copies as hw.einsum_costing() says: the scratch this build's
// kernel stages (kCompiled: this machine), or the permutes a device's
// strided batched GEMM needs (kStridedDevice: device_einsum.h), which never
// reads ins.scratch_bytes, so a cluster's prediction does not depend on the
// kernels this CPU compiled (e.g. whether oneDNN has a bf16 matmul here).
double einsum_seconds(const HardwareModel& hw, const Graph& g, const Program::InstructionInfo& ins,
                      const CostOptions& options);

// One compute instruction alone on `hw`: an einsum's einsum_seconds; any
// other kernel's kernel_seconds over the bytes it reads and writes and its
// work (kernel_work.h), plus its Philox draws; at least hw.launch_seconds().
double instruction_seconds(const HardwareModel& hw, const Graph& g,
                           const Program::InstructionInfo& ins, const CostOptions& options);

// The optimizer over `state` elements (one pass reading and writing the
// parameter and both moments, reading the gradient), the gradient norm's
// pass and its all-reduce over `world` ranks on `link`; the passes times
// `share` (HardwareModel::compute_share). Offloaded (offload "optimizer"),
// the pass runs in host memory, after copying the gradient and the value
// out and before copying the value back (train/optimizer.h; the gradient
// alone with offload "weights").
double optimizer_seconds(const HardwareModel& hw, const TrainConfig& config, int threads,
                         double state, double share, int world, Link link);

// The link a collective on `axis` of `mesh` runs over.
Link link_of_axis(const Mesh& mesh, int axis, int devices_per_node);

// The ranks whose programs stand for every rank: rank 0 without a pipe
// axis, else the rank at coordinate 0 on every axis but `pipe`, one per
// pipeline rank up to 4 of them; past 4, only pipeline ranks 0, 1 and p-1
// are compiled, and every other (middle) rank takes rank 1's stage costs
// scaled by its stages' block counts (an approximation: its memory is not
// computed). With `every_rank` (small meshes), all of them.
std::vector<int> representative_ranks(const Mesh& mesh, bool every_rank);

// Predicts one step of `config` (recompute resolved, mesh and layout set)
// from plan-only compiles of `ranks` (see representative_ranks). Throws as
// compile_rank does for a configuration the model cannot take.
StepPrediction predict_step(const TrainConfig& config, const std::vector<int>& ranks,
                            const HardwareModel& hw, const CostOptions& options,
                            GraphCache* cache = nullptr);

// The two halves of predict_step: plan-only compiles of `ranks`, and the
// prediction from them. A pipeline compiled with one synchronous schedule
// has the same stage programs under any other with the same chunks and
// micro-batches (gpipe, 1f1b and zb-h1 differ only in the action lists and
// in how many micro-batches each stage keeps in flight), so `schedule`, when
// given, predicts the compiled stages under that schedule instead, exactly.
// `memo` (pipelines, optional): the stages' phase costs (stage_phase_costs,
// which depend only on the compiled stage programs, `hw` and `options`, not
// on the schedule or ZeRO stage), filled by the first prediction and read by
// later ones of the same `compiled` on the same `hw` and `options`.
struct StagePhaseCost;
using StagePhaseMemo = std::vector<std::optional<std::vector<StagePhaseCost>>>;
std::vector<CompiledRank> compile_ranks(const TrainConfig& config, const std::vector<int>& ranks,
                                        GraphCache* cache = nullptr);
StepPrediction predict_compiled(const std::vector<CompiledRank>& compiled, const HardwareModel& hw,
                                const CostOptions& options, const Schedule* schedule = nullptr,
                                StagePhaseMemo* memo = nullptr);

// What the cost model charges one compiled pipeline stage per micro-batch,
// as pipeline_steps feeds the schedule simulator: its forward,
// backward-input and backward-weight phases (kernels plus blocking
// collectives; `accumulate` is the weight phase's extra pass into the
// gradient accumulators), the bytes it sends each way, and its blocking
// communication per axis. The planner's screening (screen.h) composes
// stages of any block count from these. Timed as if the rank had a core of
// its own (no compute_share): screening ranks candidates before sharing;
// every collective and message on `link` (screening pins a unit's there).
struct StagePhaseCost {
  int chunk = 0;
  double f = 0, bi = 0, bw = 0, accumulate = 0;
  double act_bytes = 0, grad_bytes = 0;
  double param_grad_bytes = 0;  // the stage's parameter gradients (what it accumulates)
  double weight_copies = 0;     // once a step: its shared bf16 weight copies' host reads
  std::map<std::string, double> comm_f, comm_b;
  double poll_interval = 0;  // mean time between the program's polls (all phases)
};
std::vector<StagePhaseCost> stage_phase_costs(const CompiledRank& compiled, const HardwareModel& hw,
                                              const CostOptions& options, Link link);

}  // namespace tessel::plan
