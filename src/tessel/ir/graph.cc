#include "tessel/ir/graph.h"

#include <sstream>

#include "tessel/base/error.h"
#include "tessel/ir/op_table.h"

namespace tessel {

ValueId Graph::add(OpKind kind, std::vector<ValueId> inputs, Attrs attrs, std::string name) {
  const OpInfo& info = op_info(kind);
  if (static_cast<int>(inputs.size()) != info.arity)
    TS_THROW(info.name, " '", name, "': takes ", info.arity, " inputs, got ", inputs.size());
  ShapeRuleInput rule_in{kind, name, attrs, {}, {}, {}};
  for (ValueId id : inputs) {
    TS_CHECK(id >= 0 && id < size(), "input %", id, " of ", info.name, " is not in the graph");
    const Node& in = nodes_[id];
    if (is_tuple(in) && kind != OpKind::kTupleGet)
      TS_THROW(info.name, " '", name, "': input %", id, " ('", in.name, "') is a tuple of ",
               in.elements.size(), " values; read one with tuple_get");
    rule_in.shapes.push_back(&in.shape);
    rule_in.dtypes.push_back(in.dtype);
    rule_in.elements.push_back(&in.elements);
  }
  ShapeRuleOutput out = info.shape_rule(rule_in);
  if (!out.elements.empty()) {
    out.shape = pack_tuple(out.elements);
    out.dtype = DType::kF32;
  }
  nodes_.push_back(Node{kind,
                        std::move(inputs),
                        std::move(attrs),
                        std::move(out.shape),
                        out.dtype,
                        std::move(name),
                        {},
                        std::move(out.elements)});
  return size() - 1;
}

std::vector<bool> ancestors(const Graph& g, const std::vector<ValueId>& seeds) {
  std::vector<bool> marked(g.size(), false);
  for (ValueId s : seeds) marked.at(s) = true;
  for (ValueId id = g.size() - 1; id >= 0; --id)
    if (marked[id])
      for (ValueId in : g.node(id).inputs) marked[in] = true;
  return marked;
}

ValueId Graph::find(const std::string& leaf_name) const {
  auto it = leaves_.find(leaf_name);
  return it == leaves_.end() ? -1 : it->second;
}

ValueId Graph::add_input(const std::string& name, Shape shape, DType dtype) {
  if (find(name) >= 0) TS_THROW("input '", name, "': the name is already used in this graph");
  nodes_.push_back(Node{OpKind::kInput, {}, {}, std::move(shape), dtype, name, {}, {}});
  inputs_.push_back(size() - 1);
  leaves_.emplace(name, size() - 1);
  return size() - 1;
}

ValueId Graph::add_param(const std::string& name, Shape shape, ParamInit init) {
  if (find(name) >= 0) TS_THROW("param '", name, "': the name is already used in this graph");
  nodes_.push_back(Node{OpKind::kParam, {}, {}, std::move(shape), DType::kF32, name, init, {}});
  params_.push_back(size() - 1);
  leaves_.emplace(name, size() - 1);
  return size() - 1;
}

double Graph::node_flops(ValueId id) const {
  std::vector<const Shape*> in;
  for (ValueId i : nodes_[id].inputs) in.push_back(&nodes_[i].shape);
  return op_info(nodes_[id].kind).flops(in, nodes_[id].shape);
}

double Graph::flops(const std::vector<bool>& live) const {
  double total = 0;
  for (ValueId id = 0; id < size(); ++id)
    if (live[id]) total += node_flops(id);
  return total;
}

std::string Graph::to_string() const {
  std::ostringstream out;
  for (ValueId id = 0; id < size(); ++id) {
    const Node& n = nodes_[id];
    out << "%" << id << " = " << op_name(n.kind) << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) out << (i ? ", " : "") << "%" << n.inputs[i];
    out << ")";
    const Attrs& a = n.attrs;
    if (!a.dims.empty()) {
      out << " [";
      for (size_t i = 0; i < a.dims.size(); ++i) out << (i ? "," : "") << a.dims[i];
      out << "]";
    }
    if (!a.dim.empty()) out << " dim=" << a.dim;
    if (!a.dim2.empty()) out << " dim2=" << a.dim2;
    if (a.scalar != 0.0f) out << " scalar=" << a.scalar;
    if (a.scalar2 != 0.0f) out << " scalar2=" << a.scalar2;
    if (n.kind == OpKind::kTupleGet) out << " index=" << a.offset;
    if (is_tuple(n)) {
      out << " -> (";
      for (size_t i = 0; i < n.elements.size(); ++i)
        out << (i ? ", " : "") << dtype_name(n.elements[i].dtype) << n.elements[i].shape;
      out << ")";
    } else {
      out << " -> " << dtype_name(n.dtype) << n.shape;
    }
    if (!n.name.empty()) out << "  # " << n.name;
    out << "\n";
  }
  return out.str();
}

}  // namespace tessel
