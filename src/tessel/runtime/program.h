// A compiled program: the graph's live nodes in order, over one static arena.
//
// compile() keeps the nodes the requested outputs need, gives every non-view,
// non-parameter value a buffer from the static memory plan (views alias their
// source; parameters live outside and are bound by name), and allocates the
// arena once. run() executes the instructions; it never allocates. Outputs
// stay valid until the next run(). Inputs are written through input() and
// keep their values across runs. Move-only; not thread-safe (kernels parallelise internally).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/comm/communicator.h"
#include "tessel/ir/graph.h"
#include "tessel/kernels/einsum.h"
#include "tessel/passes/memory_plan.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {

class CommGroups;

struct CompileOptions {
  bool reference_kernels = false;  // run every op on its naive `_ref` twin
  // Plan memory as a run with communicators would (gradient buckets
  // included) but allocate nothing (dry runs); run() refuses.
  bool plan_only = false;
  const CommGroups* comms = nullptr;  // per-axis communicators of a rank's local graph
  // Output all-reduces (gradients) are packed into buckets of about this
  // size and reduced in the background while later instructions run.
  size_t bucket_bytes = 25u << 20;
};

class Program {
 public:
  Program(const Graph& graph, const std::vector<ValueId>& outputs, CompileOptions options = {});
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;

  // Parameters are stored by the caller; bind each before the first run.
  void bind_param(const std::string& name, float* data);
  // Storage of a graph input (write before run) or any kept value (read after).
  void* data(ValueId value);
  float* f32(ValueId value) { return static_cast<float*>(data(value)); }
  void* input(const std::string& name);

  void run();

  const Graph& graph() const { return *graph_; }
  size_t arena_bytes() const { return plan_.peak_bytes; }
  double flops_per_run() const { return flops_; }
  int instruction_count() const { return static_cast<int>(instructions_.size()); }
  int bucket_count() const { return static_cast<int>(buckets_.size()); }
  // Wall time spent inside collectives (blocking ones, and waiting for
  // gradient buckets) over all runs so far.
  double collective_seconds() const { return collective_seconds_; }
  // The buffer requests and plan, for checking the plan (tests, inspect).
  const std::vector<BufferRequest>& buffer_requests() const { return requests_; }
  const MemoryPlan& memory_plan() const { return plan_; }

 private:
  struct Instruction {
    ValueId node;
    int einsum_plan = -1;  // index into einsum_plans_
    int scratch = -1;      // buffer index of per-instruction scratch
    int bucket = -1;       // gradient bucket this all-reduce belongs to
  };
  // Outputs of overlapped all-reduces on one axis, packed back to back in one
  // buffer; one non-blocking all-reduce once the last member is written.
  struct Bucket {
    std::string axis;
    int buffer = -1;
    size_t bytes = 0;
    int last_instruction = -1;
    std::unique_ptr<CommRequest> pending;
  };
  void run_bucket_member(const Instruction& ins, size_t index);

  std::shared_ptr<const Graph> graph_;
  CompileOptions options_;
  std::vector<Instruction> instructions_;
  std::vector<kernels::EinsumPlan> einsum_plans_;
  std::vector<int> value_buffer_;  // buffer index per value, -1 if none
  std::vector<ValueId> alias_root_;
  std::vector<BufferRequest> requests_;
  MemoryPlan plan_;
  AlignedBuffer arena_;
  std::vector<void*> value_ptr_;
  std::map<std::string, ValueId> params_by_name_;
  std::vector<ValueId> used_params_;  // parameters some instruction reads
  std::vector<Bucket> buckets_;
  double collective_seconds_ = 0;
  double flops_ = 0;
};

}  // namespace tessel
