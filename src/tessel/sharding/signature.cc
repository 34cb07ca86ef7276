#include "tessel/sharding/signature.h"

#include <algorithm>
#include <array>
#include <optional>

#include "tessel/ir/attrs.h"

namespace tessel {
namespace {

enum class Pins {
  kNone,
  kDim,         // attrs.dim must stay unsplit
  kDimAndDim2,  // attrs.dim and attrs.dim2
  kDims,        // every name in attrs.dims
  kSplit,       // split_dim: attrs.dim and the parts in attrs.shape
  kMerge,       // merge_dims: attrs.dims and attrs.dim2
};

struct OpView;

struct Rule {
  OpKind kind;
  // Appends the op's signatures; null for ops the lowering places directly
  // (inputs and parameters by the layout, fills anywhere, a tuple_get as its
  // tuple, collectives: only in local graphs).
  void (*add)(const OpView& op, std::vector<AxisSignature>& result);
  Pins pins;
  bool partial_ok;      // a split dim missing from the output yields P(sum)
  bool linear = false;  // P(sum) inputs give a P(sum) output (sums, scaling, views)
};

std::set<std::string> pinned_dims(const Node& node, Pins pins) {
  const Attrs& a = node.attrs;
  switch (pins) {
    case Pins::kNone:
      return {};
    case Pins::kDim:
      return {a.dim};
    case Pins::kDimAndDim2:
      return {a.dim, a.dim2};
    case Pins::kDims:
      return {a.dims.begin(), a.dims.end()};
    case Pins::kSplit: {
      std::set<std::string> p = {a.dim};
      for (const Dim& d : a.shape.dims()) p.insert(d.name);
      return p;
    }
    case Pins::kMerge: {
      std::set<std::string> p(a.dims.begin(), a.dims.end());
      p.insert(merged_dim(a));
      return p;
    }
  }
  return {};
}

bool divisible(const Shape& s, const std::string& dim, int n) {
  const std::optional<int> i = s.index_of(dim);
  return !i || s[*i].size % n == 0;
}

// One op as the families' candidates read it: its operands' shapes, the
// axis size and the dims other axes already split.
struct OpView {
  const Node& node;
  const std::vector<const Shape*>& in;
  const Shape& out;
  int n;
  const std::set<std::string>& taken;
  const Rule& rule;
  // Whether `d` may be split: not taken, and divisible in every holder.
  bool usable(const std::string& d, const std::vector<const Shape*>& holders) const {
    if (taken.count(d)) return false;
    for (const Shape* s : holders)
      if (!divisible(*s, d, n)) return false;
    return true;
  }
};

// Dims flow by name: a split dim splits every operand that has it.
void add_dimwise(const OpView& op, std::vector<AxisSignature>& result) {
  // The hot case of every lowering: no copies of dim names until a
  // signature is made, and each holder's dims looked up once: the
  // distinct dims of the inputs and the output in that order, with the
  // size each holder has of them (-1: it lacks the dim).
  const std::vector<const Shape*>& in = op.in;
  const Rule& rule = op.rule;
  const std::set<std::string> pinned =
      rule.pins == Pins::kNone ? std::set<std::string>() : pinned_dims(op.node, rule.pins);
  const size_t holders = in.size() + 1;  // the inputs, then the output
  std::vector<const std::string*> dims;
  std::vector<int64_t> size;  // size[j * holders + h]: holder h's size of dims[j]
  for (size_t h = 0; h < holders; ++h)
    for (const Dim& d : (h < in.size() ? *in[h] : op.out).dims()) {
      size_t j = 0;
      while (j < dims.size() && *dims[j] != d.name) ++j;
      if (j == dims.size()) {
        dims.push_back(&d.name);
        size.resize(size.size() + holders, -1);
      }
      size[j * holders + h] = d.size;
    }
  for (size_t j = 0; j < dims.size(); ++j) {
    const std::string& d = *dims[j];
    if (pinned.count(d) || op.taken.count(d)) continue;
    bool divides = true;
    for (size_t h = 0; h < holders; ++h)
      if (size[j * holders + h] >= 0 && size[j * holders + h] % op.n != 0) divides = false;
    if (!divides) continue;
    const bool in_out = size[j * holders + in.size()] >= 0;
    if (!in_out && !rule.partial_ok) continue;
    AxisSignature sig{d, {}, in_out ? Placement::split(d) : Placement::partial_sum()};
    sig.inputs.reserve(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      sig.inputs.push_back(size[j * holders + i] >= 0 ? Placement::split(d)
                                                      : Placement::broadcast());
    result.push_back(std::move(sig));
  }
}

// A dim changes name on the way: split before, split as renamed after.
void add_rename(const OpView& op, std::vector<AxisSignature>& result) {
  for (const Dim& d : op.in[0]->dims()) {
    std::string renamed = d.name == op.node.attrs.dim ? renamed_to(op.node.attrs) : d.name;
    if (op.taken.count(d.name) || op.taken.count(renamed) || d.size % op.n != 0) continue;
    result.push_back({d.name, {Placement::split(d.name)}, Placement::split(renamed)});
  }
}

// (table, ids): the ids' dims, the table's embedding dims, or its rows.
void add_embedding(const OpView& op, std::vector<AxisSignature>& result) {
  const Shape& table = *op.in[0];
  const Shape& ids = *op.in[1];
  for (const Dim& d : ids.dims())
    if (op.usable(d.name, {&ids}))
      result.push_back(
          {d.name, {Placement::broadcast(), Placement::split(d.name)}, Placement::split(d.name)});
  for (int i = 1; i < table.rank(); ++i)
    if (op.usable(table[i].name, {&table}))
      result.push_back({table[i].name,
                        {Placement::split(table[i].name), Placement::broadcast()},
                        Placement::split(table[i].name)});
  if (op.usable(table[0].name, {&table}))  // vocab-parallel: rows outside the shard give zeros
    result.push_back({table[0].name,
                      {Placement::split(table[0].name), Placement::broadcast()},
                      Placement::partial_sum()});
}

// (ids, dy) -> table: the ids' dims give partial tables; the table's dims split.
void add_embedding_grad(const OpView& op, std::vector<AxisSignature>& result) {
  const Shape& ids = *op.in[0];
  const Shape& dy = *op.in[1];
  const Shape& out = op.out;
  for (const Dim& d : ids.dims())
    if (op.usable(d.name, {&ids, &dy}))
      result.push_back(
          {d.name, {Placement::split(d.name), Placement::split(d.name)}, Placement::partial_sum()});
  for (int i = 1; i < out.rank(); ++i)
    if (op.usable(out[i].name, {&dy, &out}))
      result.push_back({out[i].name,
                        {Placement::broadcast(), Placement::split(out[i].name)},
                        Placement::split(out[i].name)});
  if (op.usable(out[0].name, {&out}))
    result.push_back({out[0].name,
                      {Placement::broadcast(), Placement::broadcast()},
                      Placement::split(out[0].name)});
}

// (logits, labels[, dloss]). Rows (the labels' dims) split: each rank's mean
// is scaled by its share of the rows; the loss is P(sum), its gradient stays
// split. The vocab split: the kernel reduces max and sum-exp across the axis
// itself.
void add_cross_entropy(const OpView& op, std::vector<AxisSignature>& result) {
  const Shape& logits = *op.in[0];
  const Shape& labels = *op.in[1];
  const bool is_grad = op.node.inputs.size() == 3;
  for (const Dim& d : labels.dims()) {
    if (!op.usable(d.name, {&labels})) continue;
    AxisSignature sig{d.name,
                      {Placement::split(d.name), Placement::split(d.name)},
                      is_grad ? Placement::split(d.name) : Placement::partial_sum()};
    if (is_grad) sig.inputs.push_back(Placement::broadcast());
    result.push_back(sig);
  }
  const std::string& vocab = op.node.attrs.dim;
  if (op.usable(vocab, {&logits})) {
    AxisSignature sig{vocab,
                      {Placement::split(vocab), Placement::broadcast()},
                      is_grad ? Placement::split(vocab) : Placement::broadcast()};
    if (is_grad) sig.inputs.push_back(Placement::broadcast());
    result.push_back(sig);
  }
}

// Fused attention: a dim other than the query, key and head dims (batch,
// heads) split on every operand and, through the tuple, every element. A
// split sequence (context parallelism) is not offered: the boxing gathers it.
void add_attention(const OpView& op, std::vector<AxisSignature>& result) {
  const std::vector<std::string>& pinned = attention_dims(op.node.attrs);
  for (const Dim& d : op.in[0]->dims()) {
    if (std::find(pinned.begin(), pinned.end(), d.name) != pinned.end()) continue;
    if (op.taken.count(d.name) || d.size % op.n != 0) continue;
    result.push_back({d.name,
                      std::vector<Placement>(op.node.inputs.size(), Placement::split(d.name)),
                      Placement::split(d.name)});
  }
}

// (h, w, labels[, lse, dloss]) -> tuple. A row dim (the labels') split on
// h, the labels and the log-sum-exp; or the vocab split on w, the kernel
// reducing each row's max and sum of exponentials across the axis. How each
// element is placed: tuple_element_sharding (signature.h).
// The embed dim is not split: the logits would be partial sums.
void add_linear_cross_entropy(const OpView& op, std::vector<AxisSignature>& result) {
  const Shape &h = *op.in[0], &w = *op.in[1], &labels = *op.in[2];
  const bool is_grad = op.node.inputs.size() == 5;
  for (const Dim& d : labels.dims()) {
    if (!op.usable(d.name, {&labels, &h})) continue;
    const Placement s = Placement::split(d.name), b = Placement::broadcast();
    AxisSignature sig{d.name, {s, b, s}, s};
    if (is_grad) sig.inputs.insert(sig.inputs.end(), {s, b});
    result.push_back(sig);
  }
  const std::string& vocab = op.node.attrs.dim;
  if (op.usable(vocab, {&w})) {
    const Placement b = Placement::broadcast();
    AxisSignature sig{vocab, {b, Placement::split(vocab), b}, Placement::split(vocab)};
    if (is_grad) sig.inputs.insert(sig.inputs.end(), {b, b});
    result.push_back(sig);
  }
}

constexpr std::array<Rule, static_cast<size_t>(OpKind::kCount)> kRules = {{
    {OpKind::kInput, nullptr, Pins::kNone, false},
    {OpKind::kParam, nullptr, Pins::kNone, false},
    {OpKind::kFill, nullptr, Pins::kNone, false},
    {OpKind::kEinsum, add_dimwise, Pins::kNone, true},
    {OpKind::kAdd, add_dimwise, Pins::kNone, false, true},
    {OpKind::kSub, add_dimwise, Pins::kNone, false, true},
    {OpKind::kMul, add_dimwise, Pins::kNone, false},
    {OpKind::kDiv, add_dimwise, Pins::kNone, false},
    {OpKind::kScale, add_dimwise, Pins::kNone, false, true},
    {OpKind::kGelu, add_dimwise, Pins::kNone, false},
    {OpKind::kRelu, add_dimwise, Pins::kNone, false},
    {OpKind::kExp, add_dimwise, Pins::kNone, false},
    {OpKind::kLog, add_dimwise, Pins::kNone, false},
    {OpKind::kTanh, add_dimwise, Pins::kNone, false},
    {OpKind::kBiasGelu, add_dimwise, Pins::kNone, false},
    {OpKind::kDropout, add_dimwise, Pins::kNone, false},
    {OpKind::kReduceSum, add_dimwise, Pins::kNone, true},
    {OpKind::kReduceMean, add_dimwise, Pins::kDims, false},
    {OpKind::kReduceMax, add_dimwise, Pins::kDims, false},
    {OpKind::kExpand, add_dimwise, Pins::kNone, false},
    {OpKind::kSoftmax, add_dimwise, Pins::kDimAndDim2, false},
    {OpKind::kLayerNorm, add_dimwise, Pins::kDim, false},
    {OpKind::kEmbedding, add_embedding, Pins::kNone, false},
    {OpKind::kCrossEntropy, add_cross_entropy, Pins::kNone, true},
    {OpKind::kSplitDim, add_dimwise, Pins::kSplit, false, true},
    {OpKind::kMergeDims, add_dimwise, Pins::kMerge, false, true},
    {OpKind::kRename, add_rename, Pins::kNone, false, true},
    {OpKind::kTupleGet, nullptr, Pins::kNone, false},
    {OpKind::kAttention, add_attention, Pins::kNone, false},
    {OpKind::kAttentionGrad, add_attention, Pins::kNone, false},
    {OpKind::kLinearCrossEntropy, add_linear_cross_entropy, Pins::kNone, false},
    {OpKind::kLinearCrossEntropyGrad, add_linear_cross_entropy, Pins::kNone, false},
    {OpKind::kGeluGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kReluGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kTanhGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kBiasGeluGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kReduceMaxGrad, add_dimwise, Pins::kDims, false},
    {OpKind::kSoftmaxGrad, add_dimwise, Pins::kDimAndDim2, false},
    {OpKind::kLayerNormGradInput, add_dimwise, Pins::kDim, false},
    {OpKind::kLayerNormGradGamma, add_dimwise, Pins::kDim, true},
    {OpKind::kEmbeddingGrad, add_embedding_grad, Pins::kNone, true},
    {OpKind::kCrossEntropyGrad, add_cross_entropy, Pins::kNone, false},
    {OpKind::kSilu, add_dimwise, Pins::kNone, false},
    {OpKind::kSigmoid, add_dimwise, Pins::kNone, false},
    {OpKind::kSqrt, add_dimwise, Pins::kNone, false},
    {OpKind::kRsqrt, add_dimwise, Pins::kNone, false},
    {OpKind::kRmsNorm, add_dimwise, Pins::kDim, false},
    {OpKind::kRotary, add_dimwise, Pins::kDim, false, true},  // positions: attrs.offsets
    {OpKind::kSiluGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kSigmoidGrad, add_dimwise, Pins::kNone, false},
    {OpKind::kRmsNormGradInput, add_dimwise, Pins::kDim, false},
    {OpKind::kRmsNormGradGamma, add_dimwise, Pins::kDim, true},
    {OpKind::kRotaryGrad, add_dimwise, Pins::kDim, false, true},
    {OpKind::kShardSlice, nullptr, Pins::kNone, false},
    {OpKind::kAllGather, nullptr, Pins::kNone, false},
    {OpKind::kReduceScatter, nullptr, Pins::kNone, false},
    {OpKind::kAllReduce, nullptr, Pins::kNone, false},
    {OpKind::kAllToAll, nullptr, Pins::kNone, false},
    {OpKind::kZeroUnlessRoot, nullptr, Pins::kNone, false},
}};

static_assert(lists_every_kind_in_order(kRules), "kRules must list every OpKind in enum order");

}  // namespace

Sharding tuple_element_sharding(const Node& tuple, const Sharding& s, int index) {
  const bool attention = tuple.kind == OpKind::kAttention || tuple.kind == OpKind::kAttentionGrad;
  const bool loss = tuple.kind == OpKind::kLinearCrossEntropy;
  if (!attention && !loss && tuple.kind != OpKind::kLinearCrossEntropyGrad) return s;
  const Shape& element = tuple.elements.at(index).shape;
  Sharding out = s;
  for (int a = 0; a < s.axis_count(); ++a) {
    if (!s[a].is_split() || element.has(s[a].dim)) continue;
    if (attention && s[a].dim == attention_dims(tuple.attrs)[0])
      out = out.with(a, Placement::split(attention_dims(tuple.attrs)[1]));
    else if (!attention)
      out = out.with(a, loss && s[a].dim == tuple.attrs.dim ? Placement::broadcast()
                                                            : Placement::partial_sum());
  }
  return out;
}

bool passes_partial(OpKind kind) { return kRules.at(static_cast<size_t>(kind)).linear; }

std::vector<AxisSignature> candidates(const Graph& graph, const Node& node, int n,
                                      const std::set<std::string>& taken) {
  const Rule& rule = kRules.at(static_cast<size_t>(node.kind));
  std::vector<const Shape*> in;
  for (ValueId i : node.inputs) in.push_back(&graph.node(i).shape);
  const Shape& out = node.shape;
  std::vector<AxisSignature> result;
  result.reserve(8);  // a block's ops offer up to about 6
  result.push_back(AxisSignature{"", std::vector<Placement>(in.size()), Placement::broadcast()});
  // Linear ops pass partial sums through (a broadcast operand of a sum joins
  // as B -> P, kept on one coordinate). Offered first, so a tie defers the
  // reduction to the output, where a gradient's all-reduce can be bucketed.
  if (rule.linear)
    result.insert(result.begin(),
                  AxisSignature{"", std::vector<Placement>(in.size(), Placement::partial_sum()),
                                Placement::partial_sum()});
  if (rule.add) rule.add(OpView{node, in, out, n, taken, rule}, result);
  return result;
}

}  // namespace tessel
