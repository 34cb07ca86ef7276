// A compiled training step on this rank, as the Trainer's loop drives it.
//
// Two implementations share this interface: ProgramEngine (one program per
// phase: train/program_engine.h) and PipelineEngine (a `pipe` axis or
// several micro-batches: train/pipeline_engine.h). Both store what
// rank_storage() derives from the compile (the memory prediction sums the
// same thing), start every parameter from its full initial values (Philox by
// global index) sliced to this rank, and reduce the gradient norm's sum of
// squares with each rank's share weighted by 1 / replicas, so any layout
// trains to the same losses and weights as one process.
//
// The trainer owns the loop, the data, the optimizer (passed in as
// `Optimizer`: the engine decides when to update and over which gradients),
// checkpoints and metrics. Per step the trainer fills the full batch through
// input(), then train_step(step) copies this rank's blocks in, runs, and
// calls the optimizer. Storage is fixed after construction: a step builds
// nothing.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/compile/compile_rank.h"
#include "tessel/compile/distributed.h"
#include "tessel/compile/rank_storage.h"
#include "tessel/tensor/aligned_buffer.h"
#include "tessel/tensor/tensor.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/shard_load.h"
#include "tessel/train/optimizer.h"
#include "tessel/train/param_store.h"

namespace tessel {

class Engine {
 public:
  // One optimizer update of `slots`; `updates` counts this rank's updates
  // including this one when several share a step (asynchronous pipelines),
  // else 0.
  // `staging`: the pinned host buffers of offload "optimizer" (empty without).
  using Optimizer =
      std::function<UpdateStats(const std::vector<UpdateSlot>& slots, const GlobalSumOfSquares& sum,
                                int64_t updates, const OffloadStaging& staging)>;

  // The engine for `compiled` (kRun, compiled with `ctx`).
  static std::unique_ptr<Engine> create(CompiledRank compiled, DistributedContext& ctx,
                                        Optimizer optimizer);
  virtual ~Engine();

  const CompiledRank& compiled() const { return compiled_; }
  // This rank's parameter shards, aligned with the held entries of its storage's params.
  ParamStore& params() { return *params_; }
  // The staged full-batch input `name`, for the task to fill; throws naming
  // it when the model has no such input.
  void* input(const std::string& name);
  // Every staged input (full batch), by name.
  std::map<std::string, Tensor>& staged_inputs() { return staging_; }
  // Throws naming the input, the element and the op when a staged id is
  // outside what the op reading it takes (StagedInput::id_limit): checked
  // on the host before any compute, since a device kernel cannot throw.
  void check_input_ids();

  // One training step on the staged batch (`step` counts from 0); the mean loss.
  virtual double train_step(int64_t step) = 0;
  // The statistics of the step's (last) optimizer update.
  const UpdateStats& last_update() const { return last_update_; }
  // Forward of the staged batch; the loss. With `logits`, the full logits on
  // every rank (collective).
  virtual double evaluate(std::vector<float>* logits) = 0;
  // Full tensors for a checkpoint (collective; `state` left empty).
  virtual CheckpointSource checkpoint_source(int64_t step) = 0;
  // Restores this rank's shards from the checkpoint in `dir`, saved after `step` steps.
  virtual void load(const std::string& dir, int64_t step) = 0;
  // Bytes of this rank's gradients: reduced (slices) or accumulated.
  virtual int64_t gradient_bytes() const = 0;
  virtual size_t arena_bytes() const = 0;
  virtual size_t eval_arena_bytes() const = 0;
  // Parameters of the whole model (every shard, a tied one once).
  int64_t parameter_count() const;

 protected:
  Engine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer);
  // Allocates the held parameters at their local shapes, each from its full
  // initial values (a sharded one through the full-tensor buffer).
  void init_params();
  // Sum of squares of the whole gradient from each slot's local one: every
  // rank's share weighted by 1 / replicas, all-reduced over the world, or
  // (`stage_only`, asynchronous pipelines) over this stage's mesh axes.
  double sum_of_squares(const std::vector<double>& local_sq, bool stage_only);
  // One optimizer update of slots_ (its norm by sum_of_squares(..,
  // stage_only); `updates` as Optimizer's) into last_update_. After a ZeRO
  // update every rank of the data axis holds one updated chunk of each
  // parameter; an all-gather restores the whole block everywhere. A
  // parameter ZeRO-3 stores as its shard was updated whole, so nothing is
  // gathered for it: the next step gathers on use.
  void update_slots(bool stage_only, int64_t updates);
  // Every held parameter's shards (value, and moments if saved) from the
  // checkpoint in `dir`, reading only this rank's byte ranges
  // (checkpoint/shard_load.h); parameters other pipeline ranks hold are checked.
  void load_shards(const std::string& dir);
  // This rank's block of a tensor of global `shape` laid out by `s`.
  TensorBlock block_of(const Shape& shape, const Sharding& s) const;

  // ZeRO's flat shards (compile/zero.h), over `p.zero`'s data axis; all
  // collective over it. The update slot of held parameter `i`: its chunk of
  // the parameter and of `grad` (the whole block's gradient, or already the
  // chunk where `grad_is_chunk`).
  UpdateSlot zero_slot(size_t i, const float* grad, bool grad_is_chunk);
  // Every data rank's chunk (`mine`: this rank's real elements) gathered
  // into the whole local `block` (all device memory).
  void gather_flat(const StoredParam& p, const float* mine, float* block);
  // A whole local `block` of partial sums reduce-scattered into this rank's chunk.
  void reduce_scatter_flat(const StoredParam& p, const float* block, float* chunk);
  // A moment read from a checkpoint as the local block `block` (host memory)
  // written into `moment`: this rank's ZeRO chunk of it, or all of it.
  void write_moment(const StoredParam& p, const float* block, DeviceTensor& moment) const;
  // The local block of parameter `i`'s `moment` (the value's layout) copied
  // into the host buffer `host` (at least value_numel or state_numel
  // elements); when ZeRO shards it flat, first gathered over data into the
  // device buffer `block` (value_numel elements). Returns `host`.
  const float* moment_block(size_t i, const DeviceTensor& moment, float* block, float* host);
  // Zeroes `n` floats of device memory at `dst` from zero_pad_ (n under its size).
  void zero_pad(float* dst, int64_t n);

  CompiledRank compiled_;
  DistributedContext& ctx_;
  RankStorage storage_;
  Optimizer optimizer_;
  Backend& backend_;  // the programs' backend: it holds the parameters and moments
  std::unique_ptr<ParamStore> params_;
  std::vector<const StoredParam*> held_;  // aligned with params_->entries() and slots_
  std::vector<UpdateSlot> slots_;
  std::map<std::string, Tensor> staging_;  // full inputs, by name
  // ZeRO's buffers, in device memory: an updated chunk, sent to the
  // all-gather; a padded block (storage_.zero_block); and host zeros for the
  // pads (a pad is under one element per data rank).
  DeviceMemory slice_buffer_;
  DeviceMemory zero_block_;
  std::vector<float> zero_pad_;
  DeviceMemory offload_staging_;  // pinned host (offload "optimizer"): a slot's value, gradient
  UpdateStats last_update_;
  int64_t step_ = 0;  // the step running (fault points)
};

}  // namespace tessel
