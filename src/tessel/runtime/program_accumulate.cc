// Program's accumulated outputs (CompileOptions::accumulated_outputs): where
// each is added into its caller buffer, and the adding. A pipeline stage's
// parameter gradients go this way, so no micro-batch in flight holds them.
#include <map>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/runtime/program.h"

namespace tessel {

// Where each accumulated output is added into its caller buffer: right after
// the instruction that writes it, or after the buckets (a bucket member is
// final only once its all-reduce completes) of the run that wrote it.
void Program::plan_accumulations(const std::vector<int>& bucket_of, int end) {
  std::map<ValueId, int> writer;
  for (size_t i = 0; i < instructions_.size(); ++i)
    writer[instructions_[i].value] = static_cast<int>(i);
  for (ValueId out : options_.accumulated_outputs) {
    const ValueId root = alias_root_.at(out);
    TS_CHECK(graph_->node(out).dtype == DType::kF32 && !stored_bf16_[root], "accumulated output %",
             out, " ('", graph_->node(out).name, "') is not stored in f32");
    const auto it = writer.find(root);
    Accumulation a{out};
    a.after_buckets = it == writer.end() || bucket_of[root] >= 0;
    a.step = it == writer.end() ? end - 1 : it->second;
    if (!a.after_buckets) instructions_[a.step].accumulate.push_back(accumulations_.size());
    accumulations_.push_back(a);
  }
}

void Program::bind_accumulator(ValueId output, float* dst) {
  for (Accumulation& a : accumulations_)
    if (a.value == output) {
      a.dst = dst;
      return;
    }
  TS_THROW("value %", output, " is not an accumulated output of this program");
}

void Program::accumulate_output(const Accumulation& a) {
  TS_CHECK(a.dst, "accumulated output %", a.value, " ('", graph_->node(a.value).name,
           "') is not bound to a buffer");
  backend_->accumulate(a.dst, static_cast<const float*>(value_ptr_[a.value]),
                       graph_->node(a.value).shape.numel());
}

}  // namespace tessel
