#include "tessel/sharding/layout.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "tessel/base/error.h"
#include "tessel/ir/model_contract.h"

namespace tessel {
namespace {

struct ParsedEntry {
  std::string dim;
  int axis;
};

std::vector<ParsedEntry> parse_entries(const std::string& text, const Mesh& mesh,
                                       const std::string& what) {
  std::vector<ParsedEntry> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == part.size())
      TS_THROW(what, " '", text, "': '", part, "' must look like dim=axis (e.g. batch=data)");
    std::string dim = part.substr(0, eq), axis = part.substr(eq + 1);
    int a = mesh.axis_index(axis);
    if (a < 0)
      TS_THROW(what, " '", text, "': dim '", dim, "' is mapped to axis '", axis,
               "', which is not an axis of mesh ", mesh.to_string());
    for (const ParsedEntry& e : out)
      if (e.dim == dim)
        TS_THROW(what, " '", text, "': dim '", dim, "' is mapped to two axes ('",
                 mesh.axis(e.axis).name, "' and '", axis, "')");
    out.push_back({dim, a});
  }
  return out;
}

// The dims of the graph's tensors in order of first appearance, each with
// every extent it has.
std::vector<std::pair<std::string, std::set<int64_t>>> dims_of(const Graph& graph) {
  std::vector<std::pair<std::string, std::set<int64_t>>> dims;
  std::map<std::string, size_t> index;
  for (const Node& n : graph.nodes())
    for (const Dim& d : n.shape.dims()) {
      auto [it, added] = index.emplace(d.name, dims.size());
      if (added) dims.push_back({d.name, {}});
      dims[it->second].second.insert(d.size);
    }
  return dims;
}

// The error for mesh axis `axis`, which no dim maps to: the dims of the
// model it could split (not mapped elsewhere, every extent divisible by the
// axis), and a --layout that keeps `mapped` (the layout so far) and adds one.
std::string unmapped_axis_error(const Graph& graph, const MeshAxis& axis,
                                const std::set<std::string>& mapped_dims,
                                const std::string& mapped) {
  std::vector<std::string> fit, all;
  for (const auto& [dim, sizes] : dims_of(graph)) {
    if (mapped_dims.count(dim)) continue;
    all.push_back(dim);
    if (std::all_of(sizes.begin(), sizes.end(),
                    [&](int64_t size) { return size % axis.size == 0; }))
      fit.push_back(dim);
  }
  std::string example;
  if (!fit.empty()) {
    std::string dim = fit.front();  // data or tensor parallelism first, if they fit
    for (const std::string& preferred : {std::string("hidden"), std::string("heads"), kBatchDim})
      if (std::find(fit.begin(), fit.end(), preferred) != fit.end()) dim = preferred;
    example = str_cat(", e.g. --layout ", mapped.empty() ? "" : mapped + ",", dim, "=", axis.name);
  }
  return str_cat("mesh axis '", axis.name, "' has no dim mapped to it, so its ", axis.size,
                 " ranks would each do the whole job: map one with --layout", example,
                 fit.empty()
                     ? str_cat(" (no dim of the model divides by ", axis.size,
                               "; the model's dims: ", str_join(all, ", "), ")")
                     : str_cat(" (the model's dims it divides: ", str_join(fit, ", "), ")"));
}

}  // namespace

ContextParallel parse_context_parallel(const std::string& text) {
  if (text == "all_to_all") return ContextParallel::kAllToAll;
  if (text == "ring") return ContextParallel::kRing;
  TS_THROW("context_parallel must be \"all_to_all\" or \"ring\", got \"", text, "\"");
}

Layout Layout::parse(const std::string& text, const Mesh& mesh) {
  Layout l;
  const std::vector<ParsedEntry> parsed = parse_entries(text, mesh, "layout");
  bool keys_mapped = false;
  for (const ParsedEntry& e : parsed) keys_mapped |= e.dim == kKeySeqDim;
  for (const ParsedEntry& e : parsed) {
    l.entries_.push_back({e.dim, e.axis, mesh.axis(e.axis).name});
    if (e.dim == kSeqDim && !keys_mapped)
      l.entries_.push_back({kKeySeqDim, e.axis, mesh.axis(e.axis).name, true, true});
  }
  return l;
}

Layout Layout::defaults(const Mesh& mesh) {
  std::string text;
  for (const MeshAxis& a : mesh.axes()) {
    if (a.name == "data") text += kBatchDim + "=data,";
    if (a.name == "model") text += "heads=model,kv_heads=model,hidden=model,vocab=model,";
  }
  Layout l = parse(text, mesh);
  for (Entry& e : l.entries_) e.by_default = true;
  return l;
}

void Layout::drop_absent_defaults(const Graph& graph) {
  std::set<std::string> dims;
  for (const Node& n : graph.nodes())
    for (const Dim& d : n.shape.dims()) dims.insert(d.name);
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                [&](const Entry& e) { return e.by_default && !dims.count(e.dim); }),
                 entries_.end());
}

void Layout::set_override(const std::string& label, const std::string& spec, const Mesh& mesh) {
  std::vector<Entry> entries;
  std::set<int> axes;
  for (const ParsedEntry& e : parse_entries(spec, mesh, "override for '" + label + "'")) {
    if (!axes.insert(e.axis).second)
      TS_THROW("override for '", label, "': two dims of one tensor are placed on axis '",
               mesh.axis(e.axis).name, "' ('", spec, "')");
    entries.push_back({e.dim, e.axis, mesh.axis(e.axis).name});
  }
  overrides_[label] = std::move(entries);
}

int Layout::axis_of(const std::string& dim) const {
  for (const Entry& e : entries_)
    if (e.dim == dim) return e.axis;
  return -1;
}

int Layout::zero_axis() const {
  if (const int data = axis_of(kBatchDim); data >= 0) return data;
  const int ctx = axis_of(kSeqDim);
  if (ctx < 0) return -1;
  for (const Entry& e : entries_)
    if (e.axis == ctx && e.dim != kSeqDim && e.dim != kKeySeqDim) return -1;
  return ctx;
}

Sharding Layout::target(const Shape& shape, const std::string& label, const Mesh& mesh) const {
  Sharding s = Sharding::replicated(static_cast<int>(mesh.axes().size()));
  auto it = overrides_.find(label);
  const std::vector<Entry>& entries = it != overrides_.end() ? it->second : entries_;
  for (const Entry& e : entries) {
    if (!shape.has(e.dim) || s[e.axis].is_split()) continue;
    if (it != overrides_.end() || shape.size(e.dim) % mesh.axis(e.axis).size == 0)
      s = s.with(e.axis, Placement::split(e.dim));
  }
  return s;
}

void Layout::validate(const Graph& graph, const Mesh& mesh) const {
  if (context_parallel_asked_ &&
      std::none_of(graph.nodes().begin(), graph.nodes().end(),
                   [](const Node& n) { return n.kind == OpKind::kAttention; }))
    TS_THROW("context_parallel \"",
             context_parallel_ == ContextParallel::kRing ? "ring" : "all_to_all",
             "\" is set, but the model has no fused attention op to run it (the built-in GPT "
             "and Llama have one with attention \"fused\")");
  std::set<std::string> dims;
  for (const Node& n : graph.nodes())
    for (const Dim& d : n.shape.dims()) dims.insert(d.name);
  for (const Entry& e : entries_) {
    if (dims.count(e.dim) || e.by_default) continue;  // a default the model lacks maps nothing
    TS_THROW("layout maps dim '", e.dim, "' to axis '", mesh.axis(e.axis).name,
             "', but no tensor of the model has that dim (dims: ", str_join(dims, ", "), ")");
  }
  // A mapped dim that an axis does not divide is an error, not a silent
  // fallback to replication: name the first value where it happens.
  for (const Node& n : graph.nodes())
    for (const Entry& e : entries_)
      if (!e.implicit && n.shape.has(e.dim) && n.shape.size(e.dim) % mesh.axis(e.axis).size != 0)
        TS_THROW("layout maps ", n.shape.dim(e.dim), " to mesh axis '", mesh.axis(e.axis).name,
                 "' of size ", mesh.axis(e.axis).size, ", which does not divide it (value '",
                 n.name, "' ", n.shape, ")");
  for (const auto& [label, entries] : overrides_) {
    bool found = false;
    for (const Node& n : graph.nodes()) {
      if (n.name != label) continue;
      found = true;
      target(n.shape, label, mesh).local_shape(n.shape, mesh);  // throws if uneven
      for (const Entry& e : entries)
        if (!n.shape.has(e.dim))
          TS_THROW("override for '", label, "' splits dim '", e.dim, "', which ", n.shape,
                   " does not have");
    }
    if (!found) TS_THROW("override for '", label, "': no value has that label");
  }
  // Every axis but the pipeline's splits something; else its ranks would
  // each do the whole job (`--mesh dp=2` with no layout for `dp`).
  std::set<int> mapped_axes;
  std::set<std::string> mapped_dims;
  std::string mapped;
  for (const Entry& e : entries_)
    if (dims.count(e.dim) && !e.implicit) {
      mapped_axes.insert(e.axis);
      mapped_dims.insert(e.dim);
      mapped += (mapped.empty() ? "" : ",") + e.dim + "=" + e.axis_name;
    }
  for (const auto& [label, entries] : overrides_)
    for (const Entry& e : entries) mapped_axes.insert(e.axis);
  for (int a = 0; a < static_cast<int>(mesh.axes().size()); ++a) {
    const MeshAxis& axis = mesh.axis(a);
    if (axis.size > 1 && axis.name != kPipeAxis && !mapped_axes.count(a))
      throw Error(unmapped_axis_error(graph, axis, mapped_dims, mapped));
  }
}

std::string Layout::to_string() const {
  std::string s;
  for (const Entry& e : entries_)
    if (!e.implicit) s += (s.empty() ? "" : ",") + e.dim + "=" + e.axis_name;
  return s;
}

}  // namespace tessel
