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
  // Defaults by axis name: data -> batch; model -> heads, hidden, vocab;
  // any other axis maps nothing.
  static Layout defaults(const Mesh& mesh);

  // Override for the value labelled `label`: "seq=model,..." or "" (all B).
  void set_override(const std::string& label, const std::string& spec, const Mesh& mesh);

  // The sharding a value of this shape and label should have.
  Sharding target(const Shape& shape, const std::string& label, const Mesh& mesh) const;
  // The axis a dim maps to, or -1.
  int axis_of(const std::string& dim) const;

  // Before any compute: every mapped dim exists somewhere in the graph, and
  // every value's target divides evenly. Throws naming dim, axis and sizes.
  void validate(const Graph& graph, const Mesh& mesh) const;

  std::string to_string() const;

 private:
  struct Entry {
    std::string dim;
    int axis;
    std::string axis_name;
  };
  std::vector<Entry> entries_;  // in priority order
  std::map<std::string, std::vector<Entry>> overrides_;
};

}  // namespace tessel
