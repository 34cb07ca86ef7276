// The graph IR: a list of nodes in SSA form, each defining one value.
//
// A node with several outputs is a tuple (ir/tuple.h) read through
// tuple_get views, so a value is always one node.
//
// Invariants: a node's inputs are earlier nodes (the node list is a
// topological order); every value has a named-dim shape and a dtype checked
// by the op table's shape rule when the node is added; parameter and input
// names are unique. Graphs are built through GraphBuilder and read by passes;
// passes that rewrite build a new graph. Not thread-safe.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"
#include "tessel/ir/op.h"
#include "tessel/ir/tuple.h"

namespace tessel {

using ValueId = int;

// How a parameter is initialised; values come from a Philox stream keyed by
// (seed, parameter name, global element index), so they do not depend on
// how the parameter is later sharded.
struct ParamInit {
  enum Kind { kNormal, kZeros, kOnes } kind = kNormal;
  float stddev = 0.02f;
};

struct Node {
  OpKind kind;
  std::vector<ValueId> inputs;
  Attrs attrs;
  Shape shape;
  DType dtype = DType::kF32;
  std::string name;  // for parameters and inputs the unique name; otherwise a label
  ParamInit init;    // parameters only
  // A multi-output op's elements (ir/tuple.h); empty for a single value.
  // `shape` is then the packed (tuple=W) and `dtype` f32.
  std::vector<TupleElement> elements;
};

inline bool is_tuple(const Node& n) { return !n.elements.empty(); }

class Graph {
 public:
  // Runs the op table's shape rule; throws naming the op and dims on error.
  ValueId add(OpKind kind, std::vector<ValueId> inputs, Attrs attrs, std::string name = "");
  // Leaves, with unique names.
  ValueId add_input(const std::string& name, Shape shape, DType dtype);
  ValueId add_param(const std::string& name, Shape shape, ParamInit init);

  const Node& node(ValueId id) const { return nodes_.at(id); }
  const std::vector<Node>& nodes() const { return nodes_; }
  int size() const { return static_cast<int>(nodes_.size()); }
  const std::vector<ValueId>& params() const { return params_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  ValueId find(const std::string& leaf_name) const;  // -1 if absent; O(1)

  // Number of floating-point operations of one evaluation of `ids`' nodes
  // (einsum: 2 per multiply-add; elementwise ops: a few per element).
  double flops(const std::vector<bool>& live) const;
  double node_flops(ValueId id) const;

  // Readable listing, one node per line: `%12 = einsum(%3, %4) -> (batch=8, seq=128, hidden=1536)`.
  std::string to_string() const;

 private:
  std::vector<Node> nodes_;
  std::vector<ValueId> params_;
  std::vector<ValueId> inputs_;
  std::unordered_map<std::string, ValueId> leaves_;  // name -> input or param, for find()
};

// The nodes `seeds` are computed from: the seeds and, transitively, their inputs.
std::vector<bool> ancestors(const Graph& g, const std::vector<ValueId>& seeds);

// Inputs and parameters: the graph's leaves, which no op computes.
inline bool is_leaf(const Node& n) { return n.kind == OpKind::kInput || n.kind == OpKind::kParam; }

// Bytes of one value (its shape's elements times its dtype's size).
inline double value_bytes(const Graph& g, ValueId id) {
  const Node& n = g.node(id);
  return static_cast<double>(n.shape.numel()) * static_cast<double>(dtype_size(n.dtype));
}

}  // namespace tessel
