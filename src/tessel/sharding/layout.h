// Layout: which dims are spread over which mesh axes (Mesh-TensorFlow style).
//
// A layout maps dim names to mesh axes: `batch=data` is data parallelism;
// `heads=model,hidden=model,vocab=model` is Megatron tensor parallelism;
// adding `seq=model` is sequence parallelism. Several dims may map to one
// axis; their order is a priority: a value holding two of them is split on
// the first (so `seq` is split only where no `heads`/`hidden`/`vocab` is —
// around the norms and residuals, exactly Megatron's sequence parallelism).
// A dim maps to at most one axis. Per-value overrides (GShard-style
// annotations, keyed by node label) say what a layout cannot.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/base/shape.h"
#include "tessel/ir/graph.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

class Layout {
 public:
  Layout() = default;
  // "batch=data,heads=model"; errors name unknown axes and doubly mapped dims.
  static Layout parse(const std::string& text, const Mesh& mesh);
  // Defaults by axis name: data -> batch; model -> heads, kv_heads (Llama), hidden, vocab;
  // any other axis maps nothing. They are resolved against a model by
  // drop_absent_defaults: a default dim the model lacks maps nothing.
  static Layout defaults(const Mesh& mesh);
  // Removes the default entries (not those parsed from text) whose dim no
  // tensor of `graph` has (the MLP has no `heads`).
  void drop_absent_defaults(const Graph& graph);

  // Override for the value labelled `label`: "seq=model,..." or "" (all B).
  void set_override(const std::string& label, const std::string& spec, const Mesh& mesh);

  // The sharding a value of this shape and label should have.
  Sharding target(const Shape& shape, const std::string& label, const Mesh& mesh) const;
  // The axis a dim maps to, or -1.
  int axis_of(const std::string& dim) const;

  // Before any compute: every mapped dim exists somewhere in the graph (a
  // default the model lacks is skipped), every value's target divides
  // evenly, and every mesh axis of size > 1 but `pipe` (the pipeline's) has a
  // dim mapped to it, by the layout or an override: otherwise every rank along
  // it would do the same work. Throws naming dim, axis and sizes (for an
  // unmapped axis: the model's dims it could split).
  void validate(const Graph& graph, const Mesh& mesh) const;

  std::string to_string() const;

 private:
  struct Entry {
    std::string dim;
    int axis;
    std::string axis_name;
    bool by_default = false;  // from defaults(), not from the user's text
  };
  std::vector<Entry> entries_;  // in priority order
  std::map<std::string, std::vector<Entry>> overrides_;
};

}  // namespace tessel
