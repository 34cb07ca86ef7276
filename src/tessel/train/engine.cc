#include "tessel/train/engine.h"

#include <cstring>

#include "tessel/base/error.h"
#include "tessel/train/fault_inject.h"
#include "tessel/train/pipeline_engine.h"
#include "tessel/train/program_engine.h"

namespace tessel {

std::unique_ptr<Engine> Engine::create(CompiledRank compiled, DistributedContext& ctx,
                                       Optimizer optimizer) {
  TS_CHECK(compiled.mode == CompileMode::kRun, "an engine runs a program compiled to run");
  if (compiled.pipelined())
    return std::make_unique<PipelineEngine>(std::move(compiled), ctx, std::move(optimizer));
  return std::make_unique<ProgramEngine>(std::move(compiled), ctx, std::move(optimizer));
}

Engine::Engine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer)
    : compiled_(std::move(compiled)),
      ctx_(ctx),
      storage_(rank_storage(compiled_)),
      optimizer_(std::move(optimizer)),
      backend_(backend_for(compiled_.config.device)) {}

Engine::~Engine() = default;

void Engine::check_input_ids() {
  for (const StagedInput& in : storage_.inputs) {
    if (in.id_limit == 0) continue;
    const int32_t* ids = static_cast<const int32_t*>(staging_.at(in.name).raw());
    for (int64_t i = 0; i < in.shape.numel(); ++i)
      if (ids[i] < 0 || ids[i] >= in.id_limit)
        TS_THROW("input '", in.name, "': id ", ids[i], " at element ", i, " is outside [0, ",
                 in.id_limit, "), what ", in.id_reader, " takes; nothing of this step ran");
  }
}

void* Engine::input(const std::string& name) {
  auto it = staging_.find(name);
  if (it == staging_.end()) TS_THROW("the task wrote input '", name, "', which the model lacks");
  return it->second.raw();
}

int64_t Engine::parameter_count() const {
  int64_t n = 0;
  for (const StoredParam& p : storage_.params) n += p.shape.numel();
  return n;
}

void Engine::init_params() {
  Graph held;
  for (const StoredParam& p : storage_.params) {
    if (!p.held) continue;
    held.add_param(p.name, p.value.local_shape(p.shape, ctx_.mesh()), p.init);
    held_.push_back(&p);
  }
  params_ = std::make_unique<ParamStore>(held, backend_, weight_space(compiled_.config));
  // Initial values are computed on the host and copied into device memory.
  AlignedBuffer full;  // allocated for the first sharded parameter
  std::vector<float> local;
  for (size_t i = 0; i < held_.size(); ++i) {
    const StoredParam& p = *held_[i];
    DeviceTensor& value = params_->entries()[i].value;
    local.resize(value.numel());
    if (p.whole()) {
      init_param(p.name, p.init, compiled_.config.seed, p.shape.numel(), local.data());
    } else {
      if (full.size() == 0) full = AlignedBuffer(storage_.full_tensor);
      TS_CHECK(full.size() >= static_cast<size_t>(p.shape.numel()) * 4, "parameter '", p.name,
               "' is larger than the full-tensor buffer");
      init_param(p.name, p.init, compiled_.config.seed, p.shape.numel(), full.as<float>());
      ctx_.slice_local(p.shape, p.value, full.as<float>(), local.data());
    }
    value.write(local.data());
  }
  for (const StagedInput& in : storage_.inputs)
    staging_.emplace(in.name, Tensor(in.shape, in.dtype));
  slice_buffer_ = backend_.allocate(MemorySpace::kDevice, storage_.zero_slice);
  zero_block_ = backend_.allocate(MemorySpace::kDevice, storage_.zero_block);
  offload_staging_ = backend_.allocate(
      MemorySpace::kPinnedHost,
      storage_.offload_staging_buffers * storage_.offload_staging_elements * sizeof(float));
  zero_pad_.assign(ctx_.mesh().rank_count(), 0.0f);
}

UpdateSlot Engine::zero_slot(size_t i, const float* grad, bool grad_is_chunk) {
  const StoredParam& p = *held_[i];
  ParamEntry& e = params_->entries()[i];
  if (!p.zero) return {e.value.device_f32(), grad, e.value.numel(), &e};
  const int k = ctx_.coords()[p.zero->axis];
  return {e.value.device_f32() + p.zero->offset(k), grad_is_chunk ? grad : grad + p.zero->offset(k),
          p.zero->count(k), &e, p.zero->chunk()};
}

void Engine::gather_flat(const StoredParam& p, const float* mine, float* block) {
  const FlatShard& z = *p.zero;
  float* chunk = reinterpret_cast<float*>(slice_buffer_.data());
  const int64_t n = z.count(ctx_.coords()[z.axis]);
  backend_.copy(chunk, mine, n * sizeof(float));
  zero_pad(chunk + n, z.chunk() - n);
  Communicator& data = ctx_.groups().axis(ctx_.mesh().axis(z.axis).name);
  float* padded = z.padded() == z.block ? block : reinterpret_cast<float*>(zero_block_.data());
  {
    DeviceAccess access(backend_);  // the communicator reads and writes device memory
    data.all_gather(chunk, padded, z.chunk(), "zero parameter gather " + p.name);
  }
  if (padded != block) backend_.copy(block, padded, z.block * sizeof(float));
}

void Engine::reduce_scatter_flat(const StoredParam& p, const float* block, float* chunk) {
  const FlatShard& z = *p.zero;
  if (z.padded() != z.block) {
    float* padded = reinterpret_cast<float*>(zero_block_.data());
    backend_.copy(padded, block, z.block * sizeof(float));
    zero_pad(padded + z.block, z.padded() - z.block);
    block = padded;
  }
  Communicator& data = ctx_.groups().axis(ctx_.mesh().axis(z.axis).name);
  data.reduce_scatter(block, chunk, z.chunk(), "zero gradients " + p.name);
}

void Engine::write_moment(const StoredParam& p, const float* block, DeviceTensor& moment) const {
  if (!p.zero) return moment.write(block);
  const FlatShard& z = *p.zero;
  const int k = ctx_.coords()[z.axis];
  std::vector<float> chunk(z.chunk(), 0.0f);
  std::memcpy(chunk.data(), block + z.offset(k), z.count(k) * sizeof(float));
  moment.write(chunk.data());
}

const float* Engine::moment_block(size_t i, const DeviceTensor& moment, float* block, float* host) {
  const StoredParam& p = *held_[i];
  if (!p.zero) {
    moment.read(host);
    return host;
  }
  gather_flat(p, moment.device_f32(), block);
  backend_.copy_to_host(host, block, p.value_numel * sizeof(float));
  return host;
}

void Engine::zero_pad(float* dst, int64_t n) {
  TS_CHECK(n <= static_cast<int64_t>(zero_pad_.size()), "a ZeRO pad of ", n,
           " elements is longer than the data ranks");
  if (n > 0) backend_.copy_from_host(dst, zero_pad_.data(), n * sizeof(float));
}

double Engine::sum_of_squares(const std::vector<double>& local_sq, bool stage_only) {
  float total = 0;
  for (size_t i = 0; i < local_sq.size(); ++i)
    total += static_cast<float>(local_sq[i] /
                                (stage_only ? held_[i]->stage_replicas() : held_[i]->replicas));
  fault_point(FaultPoint::kCollective, step_);
  if (!stage_only) {
    ctx_.world().all_reduce(&total, 1, ReduceKind::kSum, "grad_norm");
  } else {
    for (const MeshAxis& axis : compiled_.pipeline->stage_mesh().axes())
      ctx_.host_groups().axis(axis.name).all_reduce(&total, 1, ReduceKind::kSum, "grad_norm");
  }
  return static_cast<double>(total);
}

void Engine::update_slots(bool stage_only, int64_t updates) {
  float* staging = reinterpret_cast<float*>(offload_staging_.data());
  const int64_t capacity = storage_.offload_staging_elements;
  // The gradient's buffer first; the value's after it unless the weights live on the host.
  const OffloadStaging offload{storage_.offload_staging_buffers == 2 ? staging + capacity : nullptr,
                               staging, capacity};
  last_update_ = optimizer_(
      slots_,
      [this, stage_only](const std::vector<double>& sq) { return sum_of_squares(sq, stage_only); },
      updates, offload);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (held_[i]->zero)
      gather_flat(*held_[i], slots_[i].param, slots_[i].state->value.device_f32());
}

void Engine::load_shards(const std::string& dir) {
  std::vector<ShardRequest> requests;
  for (const StoredParam& p : storage_.params)
    requests.push_back({p.name, p.shape, p.held, block_of(p.shape, p.value),
                        block_of(p.shape, p.zero ? p.value : p.state)});
  ShardedCheckpoint loaded = load_checkpoint_shards(dir, requests);
  size_t k = 0;  // held_ and params_ list the held parameters in storage_'s order
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!storage_.params[i].held) continue;
    const StoredParam& p = *held_[k];
    ParamEntry& local = params_->entries()[k++];
    local.value.write(loaded.value[i].data());
    if (loaded.m[i].empty()) continue;
    for (auto [from, into] :
         {std::pair{&loaded.m[i], &local.m}, std::pair{&loaded.v[i], &local.v}}) {
      *into =
          DeviceTensor(backend_, Shape{{"state", p.state_numel}}, moment_space(compiled_.config));
      write_moment(p, from->data(), *into);  // a ZeRO moment: the value's block was read
    }
  }
}

TensorBlock Engine::block_of(const Shape& shape, const Sharding& s) const {
  return {s.local_offsets(shape, ctx_.mesh(), ctx_.coords()),
          s.local_shape(shape, ctx_.mesh()).sizes()};
}

}  // namespace tessel
