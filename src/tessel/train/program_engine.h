// The engine of a run with no pipeline and one micro-batch: the compile's
// training program (forward, backward and every collective, over one static
// arena) and its forward-only evaluation program, both reading the same
// parameter storage.
//
// A step copies this rank's block of each staged input into the program,
// runs it, and hands the gradients it left to the optimizer (ZeRO: this
// rank's flat chunk of each, compile/zero.h); after a ZeRO update an
// all-gather over the data axis restores every parameter's block (the
// parameters stage 3 stores as shards are gathered on use inside the program).
#pragma once

#include "tessel/train/engine.h"

namespace tessel {

class ProgramEngine : public Engine {
 public:
  ProgramEngine(CompiledRank compiled, DistributedContext& ctx, Optimizer optimizer);

  double train_step(int64_t step) override;
  double evaluate(std::vector<float>* logits) override;
  CheckpointSource checkpoint_source(int64_t step) override;
  void load(const std::string& dir, int64_t step) override;
  int64_t gradient_bytes() const override { return storage_.gradient_bytes(); }
  size_t arena_bytes() const override { return compiled_.train.program->arena_bytes(); }
  size_t eval_arena_bytes() const override { return compiled_.eval.program->arena_bytes(); }

 private:
  // Copies this rank's block of every staged input into `c`'s program.
  void feed(CompiledProgram& c);

  std::vector<float> feed_block_;  // this rank's block of an input, on its way to the program
};

}  // namespace tessel
