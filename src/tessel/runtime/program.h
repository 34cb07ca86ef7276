// A compiled program: the graph's live nodes in order, over one static arena.
//
// The constructor keeps the nodes the requested outputs need, gives every
// non-view, non-parameter value a buffer from the static memory plan (views
// alias their source; parameters live outside and are bound by name), and
// allocates the arena once, in its backend's device memory. run() issues the
// instructions to the backend's kernels; it never allocates. Outputs stay
// valid until the next run(). Inputs are written with write_input() and keep
// their values across runs; values are read with read(). Device memory is
// never dereferenced here: device_ptr() hands it to those that may (the
// backend, communicators, the engines that bind parameters).
// Move-only; not thread-safe (kernels parallelise internally).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/comm/communicator.h"
#include "tessel/ir/graph.h"
#include "tessel/kernels/einsum.h"
#include "tessel/kernels/einsum_bf16.h"
#include "tessel/passes/memory_plan.h"

namespace tessel {

class CommGroups;
struct SharedPhaseRegion;

struct CompileOptions {
  // The device the program runs on; nullptr: the CPU backend (backend.h).
  Backend* backend = nullptr;
  bool reference_kernels = false;  // run every op on its naive `_ref` twin
  // Einsums in bf16 with f32 accumulation (kernels/einsum_bf16.h); their
  // bf16 operand copies are per-instruction scratch in the memory plan, and
  // each weight's bf16 copy (one per phase) a planned buffer, or one for
  // all phases in the shared region (share_weight_copies).
  bool bf16 = false;
  // With bf16: a value whose every reader is an einsum (through views), and
  // that is no output or input of the program, is stored in bf16: its
  // producer writes it rounded (Backend::writes_bf16_itself; an
  // einsum's matmul), or writes f32 into per-instruction staging rounded
  // into the value's bf16 buffer, and the einsums read it as a bf16 operand.
  // They would round it to bf16 anyway, so the numbers are the same; the
  // buffer is half the size. Everything another op reads stays f32.
  bool bf16_activations = true;
  // With bf16 on oneDNN's route: an add of a parameter over an einsum's
  // output n dims to an einsum output nothing else reads runs inside the
  // einsum (oneDNN's bias argument: the same bits), so the einsum's own
  // output is never stored and the add never runs on its own.
  bool fuse_bias_adds = true;
  // Outputs (parameter gradients) whose overlapped all-reduce is carried in
  // bf16 and summed in f32 (Communicator::all_reduce_bf16): they fill their
  // own buckets, reduced blocking at the bucket's last member, each with a
  // planned work buffer. An output of a reduce-scatter (ZeRO's sharded
  // gradients) is reduce-scattered in bf16 and summed in f32
  // (Communicator::reduce_scatter_bf16), its work buffer the instruction's
  // scratch. Empty: every gradient reduction is f32 (grad_reduce_precision).
  std::set<ValueId> bf16_reduce{};
  // Tensor-parallel partial sums in bf16 (tp_comm_precision): every sum
  // all-reduce and reduce-scatter of a value that is no program output (so
  // not a parameter gradient, and never bucketed) carries bf16 and is added
  // in f32 (Communicator::all_reduce_bf16, reduce_scatter_bf16), with its
  // work buffer as the instruction's scratch.
  bool bf16_partial_sums = false;
  // Plan memory as a run with communicators would (gradient buckets
  // included) but allocate nothing (dry runs); run() refuses.
  bool plan_only = false;
  const CommGroups* comms = nullptr;  // per-axis communicators of a rank's local graph
  // The intra-op (OpenMP) threads the program runs on, which a kernel with a
  // working block per thread sizes its planned scratch for (OpCall::threads);
  // 0: OpenMP's count when the program is compiled.
  int threads = 0;
  // Output all-reduces (gradients) are packed into buckets of about this
  // size and reduced in the background while later instructions run.
  size_t bucket_bytes = 25u << 20;
  // Node ids where phases 1, 2, ... begin (increasing); phase 0 starts at
  // node 0. run_phase(k) runs phase k's instructions only, so a pipeline can
  // run a micro-batch's forward and, later, its backward on the same arena.
  std::vector<ValueId> phase_starts{};
  // With phases: buffers that live within one phase (a forward's or a
  // backward's temporaries) get their own plan in a separate region, which
  // programs that never run at the same time (a pipeline stage's instances)
  // can share: the first allocates it, the others pass its
  // shared_region(). Only values that cross a phase
  // boundary — the micro-batch's stashed activations — stay in the arena.
  bool separate_phase_local = false;
  // The region of the first instance (its shared_region()); null: this
  // program allocates it.
  std::shared_ptr<SharedPhaseRegion> shared_region{};
  // bf16, with separate_phase_local (a synchronous pipeline's stage, whose
  // weights stay the same for every micro-batch of a step): one bf16 copy of
  // each parameter an einsum reads, for every phase and instance, kept in
  // the shared region after the phase-local buffers (phase_local_bytes()
  // counts it). The first einsum of a phase that reads a parameter rounds it
  // unless it was rounded since the last weights_changed(), so a step
  // rounds each weight once rather than once per phase and micro-batch.
  bool share_weight_copies = false;
  // Outputs the program adds into caller buffers (bind_accumulator) as soon
  // as they are final, instead of keeping them to the end of the run: a
  // pipeline stage's parameter gradients, so that no micro-batch in flight
  // holds a copy of them. Each must be an f32 output; device_ptr refuses them.
  std::vector<ValueId> accumulated_outputs{};
  // Pipeline transfers, with phases and separate_phase_local: outputs sent
  // right after the phase that produces them live only to that phase's end,
  // and inputs written just before the phase of their first reader live
  // from that phase's start to their last reader. Both stay in the arena,
  // where a later phase's values may take their bytes, so the caller waits
  // for the sends before it writes a late input or runs a later phase.
  std::vector<ValueId> sent_outputs{}, late_inputs{};
  // offload "activations" (program_offload.cc): the node where the backward
  // begins; -1: nothing is offloaded. A value written before it and read at
  // or after it (not an input, output or pipeline transfer) is copied into
  // pinned host memory right after it is written, its device buffer lives
  // only to its last reader before the backward, and it is copied back into
  // a new device buffer ahead of the backward's first reader: just before
  // the first reader of the offloaded value the backward needs before it (a
  // prefetch one value ahead). The host buffers have their own plan
  // (offload_bytes()). Copies run in order with the kernels.
  ValueId offload_from = -1;
};

// What a pipeline stage's program instances share (CompileOptions::
// separate_phase_local): one block holding the phase-local plan and then
// the shared bf16 weight copies, and whether each copy is current.
struct SharedPhaseRegion {
  DeviceMemory memory;
  std::vector<char> copy_made;  // per shared weight copy: rounded since the weights last changed
};

class Program {
 public:
  Program(const Graph& graph, const std::vector<ValueId>& outputs, CompileOptions options = {});
  Program(Program&&) = default;
  Program& operator=(Program&&) = default;

  // Parameters are stored by the caller; bind each before the first run.
  // Binding counts as weights_changed().
  void bind_param(const std::string& name, float* data);
  // Where an accumulated output (CompileOptions::accumulated_outputs) is
  // added, in this backend's device memory; bind each before the first run.
  void bind_accumulator(ValueId output, float* dst);
  // The parameters' values changed (an optimizer step, a checkpoint load):
  // shared bf16 weight copies (CompileOptions::share_weight_copies) are
  // rounded again before their next use, by whichever instance runs first.
  // Without shared copies there is nothing to do: each phase rounds its own.
  void weights_changed();
  // Device storage of a graph input or any kept value, for code that may
  // dereference device memory (communicators, pipeline transfers); host code
  // uses read() and write(). Throws for a value stored in bf16 (never an
  // output: see bf16_activations) or one without storage.
  void* device_ptr(ValueId value);
  float* device_f32(ValueId value) { return static_cast<float*>(device_ptr(value)); }
  // Bytes of a value's storage (its elements at its dtype's size).
  size_t value_bytes(ValueId value) const;
  // Copies a whole value to host memory (value_bytes(value) bytes) or from it.
  void read(ValueId value, void* host);
  void write(ValueId value, const void* host);
  std::vector<float> read_f32(ValueId value);
  float read_scalar(ValueId value);
  // A graph input by name: throws unless `bytes` is the input's size.
  void write_input(const std::string& name, const void* host, size_t bytes);
  Backend& backend() const { return *backend_; }
  // Whether a value (or the value it is a view of) is stored in bf16.
  bool stored_bf16(ValueId value) const;
  // Bytes of the values stored in bf16 (at 2 bytes per element), for reports.
  size_t bf16_value_bytes() const;
  // Whether a copy of `param` gathered for phases [first_phase, last_phase]
  // and read there as this program reads the parameter (views included)
  // would be stored, and so all-gathered, in bf16: the rule that decides a
  // ZeRO-3 gather's precision (stores_in_bf16 in program_bf16.cc), applied to this
  // program's readers of the parameter; none if nothing reads it there (a
  // ZeRO-3 lowering gathers it there not at all). Screening asks it of ZeRO-0
  // programs.
  std::optional<bool> gathered_in_bf16(ValueId param, int first_phase, int last_phase) const;
  ValueId input_id(const std::string& name) const;

  void run();
  // The step and micro-batch the next runs key dropout masks by
  // (backend/cpu/dropout_op.h): set per step and per micro-batch, no recompiling.
  void set_step(int64_t step) { position_.step = step; }
  void set_microbatch(int64_t microbatch) { position_.microbatch = microbatch; }
  // Phases must run in order (0, 1, ...) for the values to be there; other
  // programs may run in between.
  void run_phase(int phase);
  // Called before each instruction (e.g. to drive non-blocking sends that
  // MPI progresses only inside MPI calls) and once more after a run's (or a
  // phase's) last instruction, before it waits for gradient buckets; empty
  // by default.
  void set_progress_hook(std::function<void()> hook) { progress_ = std::move(hook); }
  // The node of the instruction about to run when the progress hook is
  // called; none at its call after the last instruction (and before any run).
  std::optional<ValueId> running_node() const { return running_node_; }
  int phase_count() const { return static_cast<int>(phase_begin_.size()) - 1; }

  const Graph& graph() const { return *graph_; }
  size_t arena_bytes() const { return plan_.peak_bytes; }
  // Pinned host bytes of the offloaded values (CompileOptions::offload_from),
  // and how many values are offloaded.
  size_t offload_bytes() const { return host_plan_.peak_bytes; }
  int offloaded_values() const { return static_cast<int>(offloads_.size()); }
  // The shared region's bytes (0 unless separate_phase_local): the
  // phase-local plan, and the shared weight copies after it.
  size_t phase_local_bytes() const;
  // The f32 bytes share_weight_copies rounds from parameter storage, once a step.
  size_t shared_copy_read_bytes() const;
  const std::shared_ptr<SharedPhaseRegion>& shared_region() const { return shared_region_; }
  double flops_per_run() const { return flops_; }
  int instruction_count() const { return static_cast<int>(instructions_.size()); }
  // Whether the program computes `node`: the outputs need it (or it is an
  // input). A conversion the lowering made that no output needs is not run.
  bool computes(ValueId node) const { return live_.at(node); }
  // Wall time spent inside collectives (blocking ones, and waiting for
  // gradient buckets) over all runs so far.
  double collective_seconds() const { return collective_seconds_; }
  // What a cost model reads (plan/model/cost_model.h), in execution order: each
  // instruction's node in graph(), its einsum plan (null unless einsum), the
  // gradient bucket it is a member of (-1: none), its phase and its scratch.
  struct InstructionInfo {
    ValueId node;
    const kernels::EinsumPlan* einsum;
    int bucket;
    int phase;
    size_t scratch_bytes;
    // A collective that carries bf16 (2 bytes per element on the wire): an
    // all-gather of a bf16-stored value, or a partial sum under
    // bf16_partial_sums.
    bool carries_bf16;
    // Bytes offload_from copies between host and device around it:
    // reloads before it and copies out after it.
    size_t offload_bytes;
    // Bytes it reads from parameter storage: the f32 parameters it reads
    // (an embedding: the rows it gathers) and those it rounds into bf16
    // copies just before it, except shared copies (shared_copy_read_bytes).
    size_t param_read_bytes;
  };
  std::vector<InstructionInfo> instruction_info() const;
  // A gradient bucket: one non-blocking all-reduce on `axis` of `bytes`
  // (its f32 gradients), started right after instruction `last_instruction`,
  // waited for at the end; `bf16`: carried in bf16 (bytes / 2 on the wire),
  // blocking.
  struct BucketInfo {
    std::string axis;
    size_t bytes;
    int last_instruction;
    bool bf16;
  };
  std::vector<BucketInfo> bucket_info() const;
  // What a memory plan holds at its peak (the instruction where the most
  // bytes are live), by kind: the arena (under separate_phase_local, what
  // crosses phases: a micro-batch's stash) or the shared phase-local region
  // (its shared bf16 weight copies counted apart). `values` are activations
  // and gradients; `largest` the biggest of them, largest first.
  struct MemoryBreakdown {
    size_t planned = 0;         // the plan's size (>= the sum below: fragmentation)
    int peak_instruction = -1;  // -1: nothing is live
    ValueId peak_node = -1;     // that instruction's node
    size_t values = 0, bf16_copies = 0, staging = 0, scratch = 0, buckets = 0;
    size_t shared_weight_copies = 0;  // the shared region only
    std::vector<std::pair<ValueId, size_t>> largest;
  };
  MemoryBreakdown memory_breakdown(bool phase_local) const;
  // The buffer requests and plan, for checking the plan (tests, inspect).
  const std::vector<BufferRequest>& buffer_requests() const { return requests_; }
  const MemoryPlan& memory_plan() const { return plan_; }

 private:
  struct Instruction {
    ValueId node;                  // the op it runs
    ValueId value;                 // the value it writes: node, or the bias add fused into it
    ValueId bias = -1;             // a fused bias add's parameter, added to the einsum's output
    int einsum_plan = -1;          // index into einsum_plans_
    int einsum_bf16 = -1;          // index into einsum_bf16_ (bf16 programs)
    int bf16_copy[2] = {-1, -1};   // bf16 copy each einsum input reads (bf16 programs)
    std::vector<int> make_copies;  // bf16 copies made just before this instruction
    int scratch = -1;              // buffer index of per-instruction scratch
    int bucket = -1;               // gradient bucket this all-reduce belongs to
    bool bf16_sum = false;         // a partial sum carried in bf16 (bf16_partial_sums)
    uint8_t* scratch_ptr = nullptr;
    int stage = -1;  // buffer index of the f32 staging of a bf16-stored output
    uint8_t* stage_ptr = nullptr;
    std::vector<int> accumulate;  // accumulations_ made right after it
    // offloads_ whose pointers are set (restored to the forward buffer at
    // the value's first use, or reloaded) before it, copied out after it.
    std::vector<int> offload_before, offload_after;
  };
  // An accumulated output: added into `dst` after the instruction that
  // writes it, or, for a member of a gradient bucket (or a value no
  // instruction writes), after the buckets of the run that ran `step`.
  struct Accumulation {
    ValueId value;
    int step = 0;
    bool after_buckets = false;
    float* dst = nullptr;
  };
  // Outputs of overlapped all-reduces on one axis, packed back to back in one
  // buffer; one non-blocking all-reduce once the last member is written.
  struct Bucket {
    std::string axis;
    int last_instruction = 0;   // its last member (set as each member joins)
    std::optional<int> buffer;  // request index, once the buffers are requested
    size_t bytes = 0;
    uint8_t* region = nullptr;
    std::unique_ptr<CommRequest> pending;
    bool bf16 = false;        // carried in bf16 (CompileOptions::bf16_reduce)
    std::optional<int> work;  // bf16: buffer index of all_reduce_bf16's work
    uint8_t* work_ptr = nullptr;
  };
  // The constructor's steps, in order, and what passes between them.
  struct Uses;
  std::vector<bool> live_nodes(const std::vector<ValueId>& outputs) const;
  void index_values();
  void make_instructions(const std::vector<bool>& live, const std::vector<ValueId>& outputs,
                         Uses& uses);
  // An instruction whose kernel may write over its first input, where that
  // input dies there, writes into the input's buffer (program_in_place.cc).
  void write_over_dying_inputs(const std::vector<ValueId>& outputs, Uses& uses);
  void split_phases();
  // Bounds the lifetimes of sent outputs and late inputs by their phases.
  void bound_transfers(Uses& uses);
  int phase_of(int instruction) const;
  void choose_bf16_storage(const std::vector<ValueId>& outputs);
  void plan_bf16_copies();
  void make_buckets(Uses& uses);
  void mark_bf16_sums(const std::vector<ValueId>& outputs);
  // `bucket_of`: each value's gradient bucket (-1: none); `end`: one past
  // the last instruction.
  void plan_accumulations(const std::vector<int>& bucket_of, int end);
  // An offloaded value (CompileOptions::offload_from): its device buffer in
  // the forward, its host copy and its device buffer in the backward.
  struct Offload {
    ValueId root;
    int first = 0, written = 0, reload = 0, last = 0;  // instructions
    int buffer = -1;                                   // request of the backward's buffer
    uint8_t *forward = nullptr, *backward = nullptr, *host = nullptr;
    size_t bytes = 0;
    std::vector<ValueId> aliases;  // the root and its views
  };
  void plan_offloads(Uses& uses);
  void request_offload_buffers();
  void place_offloads(const std::function<uint8_t*(int)>& address);
  // Before instruction i: each listed value's pointers set to its forward
  // buffer, or (at its reload) to its backward buffer, copied back first.
  void point_offloads(const Instruction& ins, int i);
  void accumulate_output(const Accumulation& a);
  void request_buffers(const Uses& uses);
  void request_instruction_buffers();
  void request_bucket_buffers(const Uses& uses);
  void allocate(const Uses& uses);
  OpCall op_call(const Instruction& ins) const;
  void make_bf16_copies(const Instruction& ins);
  // InstructionInfo::param_read_bytes, and the f32 bytes a copy rounds from
  // parameter storage (0 for a copy of another value).
  size_t param_read_bytes(const Instruction& ins) const;

  void run_bucket_member(const Instruction& ins, size_t index);
  // What an instruction reads: its node's inputs, and a fused bias.
  std::vector<ValueId> instruction_inputs(const Instruction& ins) const;
  // Per node: for an einsum whose output only a bias add reads, that add
  // (the einsum writes the sum itself, oneDNN's bias argument); kAbsorbed
  // for such an add; -1 otherwise. Only on oneDNN's bf16 route.
  static constexpr ValueId kAbsorbed = -2;
  std::vector<ValueId> bias_adds_to_fuse(const Graph& g, const std::vector<bool>& live,
                                         const std::vector<ValueId>& outputs) const;
  void run_instructions(size_t begin, size_t end);

  std::shared_ptr<const Graph> graph_;
  CompileOptions options_;
  Backend* backend_;
  std::vector<Instruction> instructions_;
  std::vector<kernels::EinsumPlan> einsum_plans_;
  std::vector<kernels::EinsumBf16> einsum_bf16_;
  // bf16 programs: one bf16 copy per parameter an einsum reads, and per f32
  // activation several einsums read, per phase, made before the phase's
  // first such einsum and planned like any buffer; a parameter's copies in
  // the shared region (share_weight_copies) are one slot for every phase.
  struct Bf16Copy {
    ValueId value;              // a root value
    int first, last;            // instructions of its first and last use
    std::optional<int> buffer;  // request index, once the buffers are requested
    int64_t numel = 0;          // elements, rounded by round_to_bf16 (base/bf16.h)
    uint8_t* data = nullptr;
    int shared = -1;  // share_weight_copies: its slot (flag, offset) in the shared region
  };
  std::vector<Bf16Copy> bf16_copies_;
  size_t copy_read_bytes(const Bf16Copy& copy) const;
  std::vector<size_t> shared_copy_offset_;  // per slot, from the end of the phase-local plan
  size_t shared_copy_bytes_ = 0;
  std::vector<int> value_buffer_;     // buffer index per value, -1 if none
  std::set<ValueId> transfer_roots_;  // sent outputs' roots and late inputs (bound_transfers)
  std::vector<bool> stored_bf16_;     // per root value: stored in bf16 (bf16_activations)
  std::vector<bool> live_;            // per node: computes()
  std::vector<ValueId> alias_root_;
  std::vector<size_t> alias_offset_;  // bytes from the root's start (a tuple's elements)
  std::vector<BufferRequest> requests_;
  MemoryPlan plan_;
  DeviceMemory arena_;
  // Phase-local buffers: request index -> index in local_plan_ (-1: in the arena).
  std::vector<int> local_index_;
  std::vector<int> arena_index_;  // request index -> index in plan_ (-1: phase-local)
  MemoryPlan local_plan_;
  std::vector<Offload> offloads_;
  std::vector<BufferRequest> host_requests_;  // one per offload, in order
  MemoryPlan host_plan_;
  DeviceMemory host_arena_;
  std::optional<ValueId> running_node_;
  DropoutPosition position_;
  std::shared_ptr<SharedPhaseRegion> shared_region_;
  std::vector<void*> value_ptr_;
  std::map<std::string, ValueId> params_by_name_;
  std::vector<ValueId> used_params_;  // parameters some instruction reads
  std::vector<Bucket> buckets_;
  std::vector<Accumulation> accumulations_;
  std::vector<size_t> phase_begin_;
  std::function<void()> progress_;  // instruction index per phase, plus the end
  double collective_seconds_ = 0;
  double flops_ = 0;
};

}  // namespace tessel
