#include "tessel/train/param_store.h"

#include "tessel/base/error.h"
#include "tessel/base/philox.h"

namespace tessel {

void init_param(const std::string& name, const ParamInit& init, uint64_t seed, int64_t numel,
                float* out) {
  switch (init.kind) {
    case ParamInit::kZeros:
      std::fill(out, out + numel, 0.0f);
      return;
    case ParamInit::kOnes:
      std::fill(out, out + numel, 1.0f);
      return;
    case ParamInit::kNormal: {
      PhiloxStream stream(seed, "init/" + name);
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < numel; ++i) out[i] = init.stddev * stream.normal(i);
      return;
    }
  }
}

ParamStore::ParamStore(const Graph& graph, Backend& backend, MemorySpace space)
    : backend_(&backend) {
  for (ValueId id : graph.params()) {
    const Node& node = graph.node(id);
    ParamEntry entry{
        node.name, DeviceTensor(backend, node.shape, space), {}, {}, node.shape.rank() >= 2};
    index_[node.name] = entries_.size();
    entries_.push_back(std::move(entry));
  }
}

ParamStore::ParamStore(const Graph& graph, Backend& backend, uint64_t seed)
    : ParamStore(graph, backend) {
  std::vector<float> host;
  for (ValueId id : graph.params()) {
    const Node& node = graph.node(id);
    host.resize(node.shape.numel());
    init_param(node.name, node.init, seed, node.shape.numel(), host.data());
    at(node.name).value.write(host.data());
  }
}

ParamEntry& ParamStore::at(const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) TS_THROW("no parameter named '", name, "'");
  return entries_[it->second];
}

const ParamEntry* ParamStore::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

int64_t ParamStore::parameter_count() const {
  int64_t n = 0;
  for (const ParamEntry& e : entries_) n += e.value.numel();
  return n;
}

}  // namespace tessel
