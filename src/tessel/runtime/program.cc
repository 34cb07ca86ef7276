#include "tessel/runtime/program.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/comm/comm_groups.h"
#include "tessel/ir/attrs.h"
#include "tessel/ir/op_table.h"
#include "tessel/kernels/einsum_memo.h"
#include "tessel/runtime/program_uses.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {

namespace {

// The parameter a bias add adds to `einsum`'s output.
ValueId bias_of_add(const Graph& g, ValueId add, ValueId einsum) {
  const Node& a = g.node(add);
  return a.inputs[0] == einsum ? a.inputs[1] : a.inputs[0];
}

}  // namespace

std::vector<ValueId> Program::instruction_inputs(const Instruction& ins) const {
  std::vector<ValueId> in = graph_->node(ins.node).inputs;
  if (ins.bias >= 0) in.push_back(ins.bias);
  return in;
}

std::vector<ValueId> Program::bias_adds_to_fuse(const Graph& g, const std::vector<bool>& live,
                                                const std::vector<ValueId>& outputs) const {
  const int n = g.size();
  std::vector<ValueId> fused(n, -1);
  const kernels::Bf16Route route =
      options_.plan_only ? kernels::plan_bf16_route() : kernels::bf16_route();
  if (!options_.bf16 || !options_.fuse_bias_adds || options_.reference_kernels ||
      route != kernels::Bf16Route::kOneDnn)
    return fused;
  std::vector<int> readers(n, 0);
  for (ValueId out : outputs) ++readers[out];
  for (ValueId id = 0; id < n; ++id)
    if (live[id])
      for (ValueId in : g.node(id).inputs) ++readers[in];
  auto phase = [&](ValueId id) {
    return std::upper_bound(options_.phase_starts.begin(), options_.phase_starts.end(), id) -
           options_.phase_starts.begin();
  };
  for (ValueId add = 0; add < n; ++add) {
    const Node& a = g.node(add);
    if (!live[add] || a.kind != OpKind::kAdd) continue;
    for (ValueId e : a.inputs) {
      const Node& einsum = g.node(e);
      const Node& bias = g.node(bias_of_add(g, add, e));
      if (einsum.kind != OpKind::kEinsum || readers[e] != 1 || bias.kind != OpKind::kParam ||
          !(einsum.shape == a.shape) || phase(e) != phase(add))
        continue;
      // The bias must be exactly the output's n group (oneDNN's bias is a
      // row of N added to every row of the [batch.., M, N] product).
      const kernels::EinsumGroups groups = kernels::einsum_groups(
          g.node(einsum.inputs[0]).shape, g.node(einsum.inputs[1]).shape, einsum.shape);
      if (groups.n.empty() || bias.shape.names() != groups.n) continue;
      fused[e] = add;
      fused[add] = kAbsorbed;
      break;
    }
  }
  return fused;
}

Program::Program(const Graph& graph, const std::vector<ValueId>& outputs, CompileOptions options)
    : graph_(std::make_shared<const Graph>(graph)),
      options_(options),
      backend_(options.backend ? options.backend : &cpu_backend()) {
  if (options_.threads <= 0) options_.threads = omp_get_max_threads();
  live_ = live_nodes(outputs);
  flops_ = graph_->flops(live_);
  index_values();
  Uses uses(graph_->size());
  make_instructions(live_, outputs, uses);
  write_over_dying_inputs(outputs, uses);
  plan_offloads(uses);
  split_phases();
  bound_transfers(uses);
  choose_bf16_storage(outputs);
  plan_bf16_copies();
  make_buckets(uses);
  mark_bf16_sums(outputs);
  plan_accumulations(uses.bucket_of, uses.end);
  request_buffers(uses);
  if (!options_.plan_only) allocate(uses);
}

// The nodes the outputs depend on, and every input (inputs always get storage).
std::vector<bool> Program::live_nodes(const std::vector<ValueId>& outputs) const {
  const Graph& g = *graph_;
  for (ValueId out : outputs)
    TS_CHECK(out >= 0 && out < g.size(), "output %", out, " is not in the graph");
  std::vector<bool> live = ancestors(g, outputs);
  for (ValueId id : g.inputs()) live[id] = true;
  return live;
}

// Each value's alias root (views alias their input), and parameters by name.
void Program::index_values() {
  const Graph& g = *graph_;
  alias_root_.resize(g.size());
  alias_offset_.assign(g.size(), 0);
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    const bool view = op_info(node.kind).is_view();
    alias_root_[id] = view ? alias_root_[node.inputs[0]] : id;
    alias_offset_[id] = view ? alias_offset_[node.inputs[0]] : 0;
    if (node.kind == OpKind::kTupleGet) {  // at its element's offset in the tuple (ir/tuple.h)
      const Node& tuple = g.node(node.inputs[0]);
      alias_offset_[id] += static_cast<size_t>(tuple.elements.at(tuple_index(node.attrs)).offset);
    }
    if (node.kind == OpKind::kParam) params_by_name_[node.name] = id;
  }
}

// One instruction per live node that computes (not a leaf, a view or a bias
// add fused into its einsum), and the steps at which each root is used.
void Program::make_instructions(const std::vector<bool>& live, const std::vector<ValueId>& outputs,
                                Uses& uses) {
  const Graph& g = *graph_;
  const std::vector<ValueId> fused_add = bias_adds_to_fuse(g, live, outputs);
  const bool transfers = options_.separate_phase_local && !options_.phase_starts.empty();
  std::set<ValueId> late, sent;
  if (transfers) {
    late.insert(options_.late_inputs.begin(), options_.late_inputs.end());
    for (ValueId out : options_.sent_outputs) sent.insert(alias_root_.at(out));
  }
  for (ValueId id : g.inputs())
    if (!late.count(id)) uses.touch(id, 0);
  for (ValueId id = 0; id < g.size(); ++id) {
    const Node& node = g.node(id);
    if (!live[id] || is_leaf(node) || op_info(node.kind).is_view()) continue;
    if (fused_add[id] == kAbsorbed) continue;  // runs inside its einsum's instruction
    const int step = static_cast<int>(instructions_.size());
    Instruction ins;
    ins.node = ins.value = id;
    if (fused_add[id] >= 0) {
      ins.value = fused_add[id];
      ins.bias = bias_of_add(g, fused_add[id], id);
    }
    if (node.kind == OpKind::kEinsum) {
      einsum_plans_.push_back(kernels::plan_einsum_memo(g.node(node.inputs[0]).shape,
                                                        g.node(node.inputs[1]).shape, node.shape));
      ins.einsum_plan = static_cast<int>(einsum_plans_.size()) - 1;
    }
    instructions_.push_back(ins);
    for (ValueId in : instruction_inputs(ins)) {
      uses.touch(alias_root_[in], step);
      uses.read[alias_root_[in]] = true;
    }
    uses.touch(alias_root_[ins.value], step);
  }
  uses.end = std::max<int>(1, static_cast<int>(instructions_.size()));
  // Accumulated outputs that an instruction writes live until it (and their
  // readers) are done; every other output lives to the end.
  std::set<ValueId> written;
  for (const Instruction& ins : instructions_) written.insert(ins.value);
  std::set<ValueId> accumulated;
  for (ValueId out : options_.accumulated_outputs) accumulated.insert(alias_root_.at(out));
  for (ValueId out : outputs)
    if ((!accumulated.count(alias_root_[out]) || !written.count(alias_root_[out])) &&
        !sent.count(alias_root_[out]))
      uses.touch(alias_root_[out], uses.end);
  // Inputs keep their values across runs (write once, run many times); a
  // late input is written anew before each run of its phase.
  for (ValueId id : g.inputs()) {
    TS_CHECK(!late.count(id) || uses.read[id], "late input %", id, " has no reader");
    if (!late.count(id)) uses.touch(id, uses.end);
  }
}

void Program::bound_transfers(Uses& uses) {
  if (!options_.separate_phase_local || options_.phase_starts.empty()) return;
  for (ValueId id : options_.late_inputs) uses.first[id] = phase_begin_[phase_of(uses.first[id])];
  for (ValueId out : options_.sent_outputs) {
    const ValueId root = alias_root_.at(out);
    TS_CHECK(uses.first[root] >= 0, "sent output %", out, " is never computed");
    const int end_of_phase = static_cast<int>(phase_begin_[phase_of(uses.first[root]) + 1]) - 1;
    uses.last[root] = std::max(uses.last[root], end_of_phase);
    transfer_roots_.insert(root);
  }
  transfer_roots_.insert(options_.late_inputs.begin(), options_.late_inputs.end());
}

// The instruction index where each phase begins (CompileOptions::phase_starts).
void Program::split_phases() {
  phase_begin_ = {0};
  for (ValueId start : options_.phase_starts) {
    size_t i = phase_begin_.back();
    while (i < instructions_.size() && instructions_[i].node < start) ++i;
    phase_begin_.push_back(i);
  }
  phase_begin_.push_back(instructions_.size());
}

int Program::phase_of(int instruction) const {
  int k = 0;
  while (k + 1 < phase_count() && instruction >= static_cast<int>(phase_begin_[k + 1])) ++k;
  return k;
}

// Gradient buckets: overlapped output all-reduces, grouped per axis in
// instruction order until a bucket reaches bucket_bytes. Only values no
// instruction reads may complete after later instructions run.
void Program::make_buckets(Uses& uses) {
  const Graph& g = *graph_;
  std::map<std::pair<std::string, bool>, int> open;  // by axis and bf16
  std::set<ValueId> bf16_roots;
  for (ValueId v : options_.bf16_reduce) bf16_roots.insert(alias_root_.at(v));
  int phase = 0;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    // A bucket never spans phases: a phase's reader (a pipeline reads the
    // loss after the forward phase) finds its values reduced at its end.
    if (phase_of(static_cast<int>(i)) != phase) {
      phase = phase_of(static_cast<int>(i));
      open.clear();
    }
    const ValueId id = instructions_[i].node;
    const Node& node = g.node(id);
    if (node.kind != OpKind::kAllReduce || !node.attrs.overlap ||
        (!options_.comms && !options_.plan_only) || uses.read[id])
      continue;
    const bool bf16 = bf16_roots.count(id) > 0;
    auto it = open.find({node.attrs.axis, bf16});
    if (it == open.end()) {
      it = open.emplace(std::make_pair(node.attrs.axis, bf16), static_cast<int>(buckets_.size()))
               .first;
      buckets_.emplace_back().axis = node.attrs.axis;
      buckets_.back().bf16 = bf16;
    }
    Bucket& b = buckets_[it->second];
    instructions_[i].bucket = it->second;
    uses.bucket_of[id] = it->second;
    uses.bucket_offset[id] = b.bytes;
    b.bytes += static_cast<size_t>(node.shape.numel()) * sizeof(float);
    b.last_instruction = static_cast<int>(i);
    if (b.bytes >= options_.bucket_bytes) open.erase(it);
  }
}

// One buffer per root value that is neither a parameter nor unused nor in a
// bucket; the bf16 copies outside the shared region; each instruction's
// staging and scratch; the buckets. Then the memory plans.
void Program::request_buffers(const Uses& uses) {
  const Graph& g = *graph_;
  value_buffer_.assign(g.size(), -1);
  for (ValueId id = 0; id < g.size(); ++id) {
    if (alias_root_[id] != id || uses.first[id] < 0) continue;
    const Node& node = g.node(id);
    if (node.kind == OpKind::kParam || uses.bucket_of[id] >= 0) continue;
    value_buffer_[id] = static_cast<int>(requests_.size());
    requests_.push_back({static_cast<size_t>(node.shape.numel()) *
                             (stored_bf16_[id] ? sizeof(uint16_t) : dtype_size(node.dtype)),
                         uses.first[id], uses.last[id]});
  }
  for (Bf16Copy& c : bf16_copies_) {
    if (c.shared >= 0) continue;  // in the shared region
    c.buffer = static_cast<int>(requests_.size());
    requests_.push_back({static_cast<size_t>(c.numel) * sizeof(uint16_t), c.first, c.last});
  }
  request_offload_buffers();
  request_instruction_buffers();
  for (ValueId id : g.params())
    if (uses.first[id] >= 0) used_params_.push_back(id);
  request_bucket_buffers(uses);

  // Phase-local buffers (first and last use in one phase) in their own plan;
  // pipeline transfers stay in the arena (the shared region is another
  // instance's while a send is in flight).
  std::set<size_t> transfer_requests;
  for (ValueId root : transfer_roots_)
    if (value_buffer_[root] >= 0) transfer_requests.insert(value_buffer_[root]);
  local_index_.assign(requests_.size(), -1);
  arena_index_.assign(requests_.size(), -1);
  std::vector<BufferRequest> arena_requests, local_requests;
  for (size_t r = 0; r < requests_.size(); ++r) {
    const BufferRequest& q = requests_[r];
    if (options_.separate_phase_local && phase_count() > 1 && q.last < uses.end &&
        phase_of(q.first) == phase_of(q.last) && !transfer_requests.count(r)) {
      local_index_[r] = static_cast<int>(local_requests.size());
      local_requests.push_back(q);
    } else {
      arena_index_[r] = static_cast<int>(arena_requests.size());
      arena_requests.push_back(q);
    }
  }
  plan_ = plan_memory(arena_requests);
  local_plan_ = plan_memory(local_requests);
}

// Per instruction: f32 staging, rounded after it, for a producer of a
// bf16-stored value that cannot write bf16 itself; and its kernel's scratch.
void Program::request_instruction_buffers() {
  const Graph& g = *graph_;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    Instruction& ins = instructions_[i];
    const Node& node = g.node(ins.node);
    const bool bf16_gather = node.kind == OpKind::kAllGather && stored_bf16_[ins.node];
    if (stored_bf16_[ins.value] && !bf16_gather && ins.einsum_bf16 < 0 &&
        !backend_->writes_bf16_itself(node)) {
      ins.stage = static_cast<int>(requests_.size());
      requests_.push_back({static_cast<size_t>(node.shape.numel()) * sizeof(float),
                           static_cast<int>(i), static_cast<int>(i)});
    }
    const kernels::EinsumPlan* einsum =
        ins.einsum_plan >= 0 ? &einsum_plans_[ins.einsum_plan] : nullptr;
    const size_t scratch =
        ins.einsum_bf16 >= 0 ? einsum_bf16_[ins.einsum_bf16].scratch_bytes()
        : bf16_gather        ? backend_->bf16_all_gather_scratch_bytes(
                                   g, node, stored_bf16_[alias_root_[node.inputs[0]]])
        : ins.bf16_sum ? backend_->bf16_sum_scratch_bytes(g, node)
                       : backend_->scratch_bytes(g, node, einsum, options_.threads,
                                                 options_.bf16 && !options_.reference_kernels);
    if (scratch == 0) continue;
    ins.scratch = static_cast<int>(requests_.size());
    requests_.push_back({scratch, static_cast<int>(i), static_cast<int>(i)});
  }
}

// A bucket's buffer lives from its first member to the end; a bf16 bucket's
// work buffer only at its last member, where it is reduced.
void Program::request_bucket_buffers(const Uses& uses) {
  const Graph& g = *graph_;
  std::vector<int> bucket_first(buckets_.size(), -1);
  for (size_t i = 0; i < instructions_.size(); ++i)
    if (instructions_[i].bucket >= 0 && bucket_first[instructions_[i].bucket] < 0)
      bucket_first[instructions_[i].bucket] = static_cast<int>(i);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    buckets_[b].buffer = static_cast<int>(requests_.size());
    requests_.push_back({buckets_[b].bytes, bucket_first[b], uses.end});
    if (!buckets_[b].bf16) continue;
    const Node& last = g.node(instructions_[buckets_[b].last_instruction].node);
    buckets_[b].work = static_cast<int>(requests_.size());
    requests_.push_back(
        {all_reduce_bf16_work_bytes(static_cast<int64_t>(buckets_[b].bytes / sizeof(float)),
                                    static_cast<int>(last.attrs.count)),
         buckets_[b].last_instruction, buckets_[b].last_instruction});
  }
}

// The arena and (unless an instance passed it) the shared region, in the
// backend's device memory, and every value's, scratch's and copy's address.
void Program::allocate(const Uses& uses) {
  arena_ = backend_->allocate(MemorySpace::kDevice, plan_.peak_bytes);
  shared_region_ = options_.shared_region;
  if (!shared_region_ && phase_local_bytes() > 0) {
    shared_region_ = std::make_shared<SharedPhaseRegion>();
    shared_region_->memory = backend_->allocate(MemorySpace::kDevice, phase_local_bytes());
    shared_region_->copy_made.assign(shared_copy_offset_.size(), 0);
  }
  if (shared_region_) {
    TS_CHECK(shared_region_->memory.size() == phase_local_bytes() &&
                 shared_region_->copy_made.size() == shared_copy_offset_.size(),
             "program instances sharing a region must be the same program");
  }
  // The phase-local plan, then the shared weight copies.
  uint8_t* const local_base = shared_region_ ? shared_region_->memory.data() : nullptr;
  uint8_t* const shared_copies =
      local_base ? local_base + round_up(local_plan_.peak_bytes) : nullptr;
  auto address = [&](int r) {  // where request r lives
    return local_index_[r] >= 0 ? local_base + local_plan_.offsets[local_index_[r]]
                                : arena_.data() + plan_.offsets[arena_index_[r]];
  };
  const int n = graph_->size();
  value_ptr_.assign(n, nullptr);
  for (ValueId id = 0; id < n; ++id) {
    const ValueId root = alias_root_[id];
    if (value_buffer_[root] >= 0) value_ptr_[id] = address(value_buffer_[root]) + alias_offset_[id];
    if (const int b = uses.bucket_of[root]; b >= 0)
      value_ptr_[id] = address(*buckets_[b].buffer) + uses.bucket_offset[root];
  }
  for (Instruction& ins : instructions_) {
    if (ins.scratch >= 0) ins.scratch_ptr = address(ins.scratch);
    if (ins.stage >= 0) ins.stage_ptr = address(ins.stage);
  }
  for (Bucket& b : buckets_) {
    b.region = address(*b.buffer);
    if (b.work) b.work_ptr = address(*b.work);
  }
  for (Bf16Copy& c : bf16_copies_)
    c.data = c.shared >= 0 ? shared_copies + shared_copy_offset_[c.shared] : address(*c.buffer);
  place_offloads(address);
}

size_t Program::phase_local_bytes() const {
  if (shared_copy_bytes_ == 0) return local_plan_.peak_bytes;
  return round_up(local_plan_.peak_bytes) + shared_copy_bytes_;
}

void Program::weights_changed() {
  if (shared_region_)
    std::fill(shared_region_->copy_made.begin(), shared_region_->copy_made.end(), 0);
}

std::vector<Program::InstructionInfo> Program::instruction_info() const {
  std::vector<InstructionInfo> out;
  for (size_t i = 0; i < instructions_.size(); ++i) {
    const Instruction& ins = instructions_[i];
    const Node& node = graph_->node(ins.node);
    const bool bf16_gather = node.kind == OpKind::kAllGather && stored_bf16_[ins.node];
    size_t offload_bytes = 0;
    for (int k : ins.offload_before)
      if (offloads_[k].reload == static_cast<int>(i)) offload_bytes += offloads_[k].bytes;
    for (int k : ins.offload_after) offload_bytes += offloads_[k].bytes;
    out.push_back({ins.node, ins.einsum_plan >= 0 ? &einsum_plans_[ins.einsum_plan] : nullptr,
                   ins.bucket, phase_of(static_cast<int>(i)),
                   ins.scratch >= 0 ? requests_[ins.scratch].bytes : 0, bf16_gather || ins.bf16_sum,
                   offload_bytes, param_read_bytes(ins)});
  }
  return out;
}

size_t Program::param_read_bytes(const Instruction& ins) const {
  const Node& node = graph_->node(ins.node);
  const std::vector<ValueId> read = instruction_inputs(ins);  // a fused bias add's parameter too
  size_t bytes = 0;
  for (size_t k = 0; k < read.size(); ++k) {
    const Node& root = graph_->node(alias_root_[read[k]]);
    if (root.kind != OpKind::kParam || (k < 2 && ins.bf16_copy[k] >= 0)) continue;
    const int64_t read = node.kind == OpKind::kEmbedding && k == 0
                             ? std::min(root.shape.numel(), node.shape.numel())
                             : root.shape.numel();
    bytes += static_cast<size_t>(read) * sizeof(float);
  }
  for (int c : ins.make_copies)
    if (bf16_copies_[c].shared < 0) bytes += copy_read_bytes(bf16_copies_[c]);
  return bytes;
}

size_t Program::copy_read_bytes(const Bf16Copy& copy) const {
  if (graph_->node(copy.value).kind != OpKind::kParam) return 0;
  return static_cast<size_t>(copy.numel) * sizeof(float);
}

size_t Program::shared_copy_read_bytes() const {
  size_t bytes = 0;
  for (const Bf16Copy& copy : bf16_copies_)
    if (copy.shared >= 0) bytes += copy_read_bytes(copy);
  return bytes;
}

std::vector<Program::BucketInfo> Program::bucket_info() const {
  std::vector<BucketInfo> out;
  for (const Bucket& b : buckets_) out.push_back({b.axis, b.bytes, b.last_instruction, b.bf16});
  return out;
}

void Program::run_bucket_member(const Instruction& ins, size_t index) {
  const Node& node = graph_->node(ins.node);
  backend_->copy(value_ptr_[ins.node], value_ptr_[node.inputs[0]],
                 static_cast<size_t>(node.shape.numel()) * sizeof(float));
  Bucket& b = buckets_[ins.bucket];
  if (static_cast<int>(index) != b.last_instruction) return;
  float* region = reinterpret_cast<float*>(b.region);
  if (b.bf16) {
    auto t0 = std::chrono::steady_clock::now();
    options_.comms->axis(b.axis).all_reduce_bf16(
        region, static_cast<int64_t>(b.bytes / sizeof(float)), b.work_ptr, "gradient bucket");
    collective_seconds_ += seconds_since(t0);
    return;
  }
  b.pending = options_.comms->axis(b.axis).start_all_reduce(
      region, static_cast<int64_t>(b.bytes / sizeof(float)), "gradient bucket");
}

void Program::bind_param(const std::string& name, float* data) {
  auto it = params_by_name_.find(name);
  if (it == params_by_name_.end()) TS_THROW("program has no parameter named '", name, "'");
  for (ValueId id = 0; id < graph_->size(); ++id)
    if (alias_root_[id] == it->second) value_ptr_[id] = data;
  weights_changed();
}

void* Program::device_ptr(ValueId value) {
  TS_CHECK(value >= 0 && value < graph_->size(), "value %", value, " is not in the graph");
  if (stored_bf16_[alias_root_[value]])
    TS_THROW("value %", value, " ('", graph_->node(value).name,
             "') is stored in bf16 (only einsums read it), not as f32");
  for (const Accumulation& a : accumulations_)
    if (alias_root_[a.value] == alias_root_[value])
      TS_THROW("value %", value, " ('", graph_->node(value).name,
               "') is added into its accumulator as it is computed; read the accumulator");
  if (!value_ptr_[value])
    TS_THROW("value %", value, " ('", graph_->node(value).name,
             "') has no storage in this program (not an output, or an unbound parameter)");
  return value_ptr_[value];
}

size_t Program::value_bytes(ValueId value) const {
  TS_CHECK(value >= 0 && value < graph_->size(), "value %", value, " is not in the graph");
  const Node& node = graph_->node(value);
  return static_cast<size_t>(node.shape.numel()) * dtype_size(node.dtype);
}

void Program::read(ValueId value, void* host) {
  backend_->copy_to_host(host, device_ptr(value), value_bytes(value));
}

void Program::write(ValueId value, const void* host) {
  backend_->copy_from_host(device_ptr(value), host, value_bytes(value));
}

std::vector<float> Program::read_f32(ValueId value) {
  TS_CHECK(graph_->node(value).dtype == DType::kF32, "value %", value, " ('",
           graph_->node(value).name, "') is not f32");
  std::vector<float> out(graph_->node(value).shape.numel());
  read(value, out.data());
  return out;
}

float Program::read_scalar(ValueId value) {
  TS_CHECK(graph_->node(value).dtype == DType::kF32 && graph_->node(value).shape.numel() == 1,
           "value %", value, " ('", graph_->node(value).name, "') is not an f32 scalar");
  float x = 0;
  read(value, &x);
  return x;
}

ValueId Program::input_id(const std::string& name) const {
  const ValueId id = graph_->find(name);
  if (id < 0 || graph_->node(id).kind != OpKind::kInput)
    TS_THROW("program has no input named '", name, "'");
  return id;
}

void Program::write_input(const std::string& name, const void* host, size_t bytes) {
  const ValueId id = input_id(name);
  if (bytes != value_bytes(id))
    TS_THROW("input '", name, "' ", graph_->node(id).shape, " takes ", value_bytes(id),
             " bytes, given ", bytes);
  write(id, host);
}

void Program::run() { run_instructions(0, instructions_.size()); }

void Program::run_phase(int phase) {
  TS_CHECK(phase >= 0 && phase < phase_count(), "phase ", phase, " of a program with ",
           phase_count(), " phases");
  run_instructions(phase_begin_[phase], phase_begin_[phase + 1]);
}

// The kernel call for an instruction, with the bf16 operands it reads.
OpCall Program::op_call(const Instruction& ins) const {
  const Node& node = graph_->node(ins.node);
  OpCall call{*graph_,
              node,
              value_ptr_,
              ins.stage_ptr ? ins.stage_ptr : value_ptr_[ins.value],
              ins.scratch_ptr,
              ins.einsum_plan >= 0 ? &einsum_plans_[ins.einsum_plan] : nullptr,
              options_.reference_kernels,
              options_.comms,
              ins.einsum_bf16 >= 0 ? &einsum_bf16_[ins.einsum_bf16] : nullptr};
  call.position = position_;
  call.threads = options_.threads;
  call.bf16_sum = ins.bf16_sum;
  call.bf16_out = stored_bf16_[ins.value] && !ins.stage_ptr;
  call.bf16_operands = options_.bf16 && !options_.reference_kernels;
  if (ins.bias >= 0) call.bias = static_cast<const float*>(value_ptr_[ins.bias]);
  if (node.kind == OpKind::kAllGather && stored_bf16_[ins.node] &&
      stored_bf16_[alias_root_[node.inputs[0]]])
    call.bf16_in[0] = value_ptr_[node.inputs[0]];
  if (node.kind == OpKind::kAttention || node.kind == OpKind::kAttentionGrad)
    for (size_t k = 0; k < node.inputs.size() && k < 5; ++k)
      if (k != 3 && stored_bf16_[alias_root_[node.inputs[k]]])
        call.bf16_in[k < 3 ? k : 3] = value_ptr_[node.inputs[k]];
  for (int k = 0; k < 2; ++k) {
    if (ins.bf16_copy[k] >= 0) call.bf16_in[k] = bf16_copies_[ins.bf16_copy[k]].data;
    if (ins.einsum_bf16 >= 0 && stored_bf16_[alias_root_[node.inputs[k]]])
      call.bf16_in[k] = value_ptr_[node.inputs[k]];
  }
  return call;
}

// The bf16 copies made just before an instruction; a shared weight copy
// only if no instance has made it since the weights changed.
void Program::make_bf16_copies(const Instruction& ins) {
  for (int c : ins.make_copies) {
    const Bf16Copy& copy = bf16_copies_[c];
    if (copy.shared >= 0) {
      char& made = shared_region_->copy_made[copy.shared];
      if (made) continue;
      made = 1;
    }
    backend_->round_to_bf16(static_cast<const float*>(value_ptr_[copy.value]),
                            reinterpret_cast<uint16_t*>(copy.data), copy.numel);
  }
}

void Program::run_instructions(size_t begin, size_t end) {
  const Graph& g = *graph_;
  if (options_.plan_only) TS_THROW("this program was compiled to plan memory only (a dry run)");
  for (ValueId id : used_params_)
    if (!value_ptr_[id]) TS_THROW("parameter '", g.node(id).name, "' is not bound to storage");
  // The kernels and the collectives they issue reach device memory.
  DeviceAccess access(*backend_);
  for (size_t i = begin; i < end; ++i) {
    const Instruction& ins = instructions_[i];
    point_offloads(ins, static_cast<int>(i));
    if (ins.bucket >= 0) {
      run_bucket_member(ins, i);
      continue;
    }
    // Let buckets in flight progress while compute goes on.
    for (Bucket& b : buckets_)
      if (b.pending && b.pending->test()) b.pending.reset();
    running_node_ = ins.node;
    if (progress_) progress_();
    make_bf16_copies(ins);
    const OpCall call = op_call(ins);
    if (communicates(call.node.kind)) {  // only collectives read the clock
      const auto t0 = std::chrono::steady_clock::now();
      backend_->execute(call);
      collective_seconds_ += seconds_since(t0);
    } else {
      backend_->execute(call);
    }
    if (ins.stage_ptr)
      backend_->round_to_bf16(reinterpret_cast<const float*>(ins.stage_ptr),
                              static_cast<uint16_t*>(value_ptr_[ins.value]),
                              call.node.shape.numel());
    for (int a : ins.accumulate) accumulate_output(accumulations_[a]);
    for (int k : ins.offload_after)
      backend_->copy(offloads_[k].host, offloads_[k].forward, offloads_[k].bytes);
  }
  running_node_.reset();
  if (progress_) progress_();
  auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_)
    if (b.pending) {
      b.pending->wait();
      b.pending.reset();
    }
  collective_seconds_ += seconds_since(t0);
  for (const Accumulation& a : accumulations_)
    if (a.after_buckets && a.step >= static_cast<int>(begin) && a.step < static_cast<int>(end))
      accumulate_output(a);
}

}  // namespace tessel
