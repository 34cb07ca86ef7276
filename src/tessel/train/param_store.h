// Parameters and their optimizer state, stored outside the activation arena.
//
// One entry per parameter of a graph, in the graph's order, keyed by name.
// Initial values come from Philox keyed by (seed, parameter name, global
// element index), so they are the same however a parameter is later sharded.
// Optimizer moments are allocated once, zeroed, and reused every step.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/tensor/tensor.h"

namespace tessel {

struct ParamEntry {
  std::string name;
  Tensor value;
  Tensor m, v;        // AdamW moments (allocated on first use of the optimizer)
  bool decay = true;  // weight decay applies (matrices and embeddings, not biases or norms)
};

class ParamStore {
 public:
  // One entry per parameter of `graph`, initialised from `seed`.
  ParamStore(const Graph& graph, uint64_t seed);
  // One zeroed entry per parameter of `graph` (a rank's local shards); the
  // caller fills them (DistributedContext::slice_local of the full values).
  explicit ParamStore(const Graph& graph);

  std::vector<ParamEntry>& entries() { return entries_; }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  ParamEntry& at(const std::string& name);
  const ParamEntry* find(const std::string& name) const;
  int64_t parameter_count() const;

 private:
  std::vector<ParamEntry> entries_;
  std::map<std::string, size_t> index_;
};

// Fills `out` (numel elements) with the parameter's initial values.
void init_param(const std::string& name, const ParamInit& init, uint64_t seed, int64_t numel,
                float* out);

}  // namespace tessel
