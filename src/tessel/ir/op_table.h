// The op table: one entry per OpKind, in enum order, read top to bottom.
//
// An entry holds the op's printed name, its arity, where its output lives
// (OutputBuffer), its shape rule and its cost in floating-point operations. Shape rules see the
// input shapes and the attributes and either return the output shape and dtype or throw a
// tessel::Error naming the op, the node's label and the dims with sizes.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"
#include "tessel/ir/op.h"
#include "tessel/ir/tuple.h"

namespace tessel {

struct ShapeRuleInput {
  OpKind kind;
  const std::string& label;
  const Attrs& attrs;
  std::vector<const Shape*> shapes;
  std::vector<DType> dtypes;
  std::vector<const std::vector<TupleElement>*> elements;  // per input: a tuple's, or empty
};

// One value, or (elements non-empty) a tuple of them: the graph packs it.
struct ShapeRuleOutput {
  ShapeRuleOutput(Shape s, DType t) : shape(std::move(s)), dtype(t) {}
  explicit ShapeRuleOutput(std::vector<TupleElement> e) : elements(std::move(e)) {}
  Shape shape;
  DType dtype = DType::kF32;
  std::vector<TupleElement> elements;
};

// Where an op's output lives.
enum class OutputBuffer {
  kOwn,   // a buffer of its own
  kView,  // a view of its first input: no data movement
  // Its own buffer, or its first input's where that input dies there and is a
  // whole computed value of the output's shape and dtype (the program
  // decides: runtime/program_in_place.cc). Contract for every backend's
  // kernel of such a kind: it reads each element of its first input before
  // writing that element of its output, and never reads an element another
  // thread may already have written.
  kOwnOrFirstInput,
};

struct OpInfo {
  OpKind kind;
  const char* name;
  int arity;  // number of inputs
  OutputBuffer output;
  ShapeRuleOutput (*shape_rule)(const ShapeRuleInput& in);
  // FLOPs for one evaluation, given input shapes and output shape.
  double (*flops)(const std::vector<const Shape*>& inputs, const Shape& out);

  bool is_view() const { return output == OutputBuffer::kView; }
};

const OpInfo& op_info(OpKind kind);

// attention_grad's work in attention's (one process and the ring): five
// forward-sized block products to the forward's two, FlashAttention's
// count. Measured rates (machine profiles) state the count they used.
inline constexpr double kAttentionGradForwards = 2.5;

}  // namespace tessel
