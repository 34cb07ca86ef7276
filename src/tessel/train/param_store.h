// Parameters and their optimizer state, stored outside the activation arena
// in the device memory of the backend the programs run on (DeviceTensor).
//
// One entry per parameter of a graph, in the graph's order, keyed by name.
// Initial values come from Philox keyed by (seed, parameter name, global
// element index), so they are the same however a parameter is later sharded;
// they are computed on the host and copied in. Optimizer moments are
// allocated once, zeroed, and reused every step. Host code reads and writes
// any of them only through DeviceTensor::to_host / read / write.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/backend/device_tensor.h"
#include "tessel/ir/graph.h"

namespace tessel {

struct ParamEntry {
  std::string name;
  DeviceTensor value;
  DeviceTensor m, v;  // AdamW moments (allocated on first use of the optimizer)
  bool decay = true;  // weight decay applies (matrices and embeddings, not biases or norms)
};

class ParamStore {
 public:
  // One entry per parameter of `graph` in `backend`'s device memory,
  // initialised from `seed`.
  ParamStore(const Graph& graph, Backend& backend, uint64_t seed);
  // One zeroed entry per parameter of `graph` (a rank's local shards) in
  // `space` (pinned host with offload "weights"); the caller fills them
  // (write() of DistributedContext::slice_local of the full values).
  ParamStore(const Graph& graph, Backend& backend, MemorySpace space = MemorySpace::kDevice);

  std::vector<ParamEntry>& entries() { return entries_; }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  ParamEntry& at(const std::string& name);
  const ParamEntry* find(const std::string& name) const;
  int64_t parameter_count() const;
  Backend& backend() const { return *backend_; }

 private:
  Backend* backend_;
  std::vector<ParamEntry> entries_;
  std::map<std::string, size_t> index_;
};

// Fills `out` (numel elements) with the parameter's initial values.
void init_param(const std::string& name, const ParamInit& init, uint64_t seed, int64_t numel,
                float* out);

}  // namespace tessel
