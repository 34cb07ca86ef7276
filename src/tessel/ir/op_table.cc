#include "tessel/ir/op_table.h"

#include <algorithm>
#include <array>

#include "tessel/base/error.h"
#include "tessel/base/rotary_frequencies.h"
#include "tessel/ir/attrs.h"

namespace tessel {
namespace {

// "einsum 'block0.attn.q'" — how errors name the node at fault.
std::string where(const ShapeRuleInput& in) {
  std::string s = op_name(in.kind);
  if (!in.label.empty()) s += " '" + in.label + "'";
  return s;
}

void expect_dtype(const ShapeRuleInput& in, size_t i, const char* role, DType want = DType::kF32) {
  if (in.dtypes[i] != want)
    TS_THROW(where(in), ": ", role, " must be ", dtype_name(want), ", got ",
             dtype_name(in.dtypes[i]), " ", *in.shapes[i]);
}

// Binary ops: f32 operands whose shared dims have the same sizes.
void expect_binary_operands(const ShapeRuleInput& in, const Shape& a, const Shape& b) {
  expect_dtype(in, 0, "lhs");
  expect_dtype(in, 1, "rhs");
  for (const Dim& d : a.dims())
    if (auto j = b.index_of(d.name); j && b[*j].size != d.size)
      TS_THROW(where(in), ": dim '", d.name, "' is ", d.size, " in lhs ", a, " but ", b[*j].size,
               " in rhs ", b);
}

void expect_dim(const ShapeRuleInput& in, const Shape& s, const std::string& dim,
                const char* role) {
  if (dim.empty()) TS_THROW(where(in), ": no dim given for ", role);
  if (!s.has(dim)) TS_THROW(where(in), ": ", role, " dim '", dim, "' is not in ", s);
}

void expect_last(const ShapeRuleInput& in, const Shape& s, const std::string& dim) {
  expect_dim(in, s, dim, "the normalised");
  if (s[s.rank() - 1].name != dim)
    TS_THROW(where(in), ": needs '", dim, "' to be the last (contiguous) dim of ", s);
}

void expect_same(const ShapeRuleInput& in, const Shape& a, const Shape& b, const char* what) {
  if (!(a == b)) TS_THROW(where(in), ": ", what, " shapes differ: ", a, " vs ", b);
}

double free_op(const std::vector<const Shape*>&, const Shape&) { return 0.0; }
template <int kFlopsPerElement>
double elementwise_cost(const std::vector<const Shape*>&, const Shape& out) {
  return static_cast<double>(kFlopsPerElement) * out.numel();
}
template <int kFlopsPerElement>
double input_cost(const std::vector<const Shape*>& in, const Shape&) {
  return static_cast<double>(kFlopsPerElement) * in[0]->numel();
}
constexpr auto per_element = elementwise_cost<1>;
constexpr auto per_input_element = input_cost<1>;

// ---- shape rules ----------------------------------------------------------

ShapeRuleOutput leaf_rule(const ShapeRuleInput& in) { return {in.attrs.shape, DType::kF32}; }

ShapeRuleOutput einsum_rule(const ShapeRuleInput& in) {
  const Shape& a = *in.shapes[0];
  const Shape& b = *in.shapes[1];
  expect_binary_operands(in, a, b);
  const std::vector<std::string>& out_names = in.attrs.dims;
  std::vector<Dim> out;
  for (const std::string& n : out_names) {
    if (!a.has(n) && !b.has(n))
      TS_THROW(where(in), ": output dim '", n, "' is in neither lhs ", a, " nor rhs ", b);
    out.push_back(a.has(n) ? a.dim(n) : b.dim(n));
  }
  auto in_out = [&](const std::string& n) {
    return std::find(out_names.begin(), out_names.end(), n) != out_names.end();
  };
  struct Side {
    const Shape* self;
    const Shape* other;
    const char* name;
  };
  for (const Side& side : {Side{&a, &b, "lhs"}, Side{&b, &a, "rhs"}}) {
    for (const Dim& d : side.self->dims()) {
      if (side.other->has(d.name) || in_out(d.name)) continue;
      std::string unmatched;
      for (const Dim& o : side.other->dims())
        if (!side.self->has(o.name) && !in_out(o.name))
          unmatched += " " + o.name + "=" + std::to_string(o.size);
      TS_THROW(where(in), ": ", side.name, " dim ", d,
               " is neither in the other operand nor in the output; a contraction pairs dims by"
               " name",
               unmatched.empty() ? "" : " (the other side has unmatched dims:", unmatched,
               unmatched.empty() ? "" : ")", ". Rename one side or reduce the dim first.");
    }
  }
  return {Shape(out), DType::kF32};
}

// Elementwise binary: one operand's dims contain the other's (same sizes);
// the output takes the larger operand's shape (the lhs when equal).
ShapeRuleOutput broadcast_rule(const ShapeRuleInput& in) {
  const Shape& a = *in.shapes[0];
  const Shape& b = *in.shapes[1];
  expect_binary_operands(in, a, b);
  if (a.contains_all(b)) return {a, DType::kF32};
  if (b.contains_all(a)) return {b, DType::kF32};
  TS_THROW(where(in), ": cannot broadcast ", a, " with ", b,
           ": one operand's dims must include all of the other's");
}

ShapeRuleOutput unary_rule(const ShapeRuleInput& in) {
  expect_dtype(in, 0, "input");
  return {*in.shapes[0], DType::kF32};
}

ShapeRuleOutput dropout_rule(const ShapeRuleInput& in) {
  const float p = dropout_p(in.attrs);
  if (p < 0.0f || p >= 1.0f) TS_THROW(where(in), ": drop probability ", p, " is outside [0, 1)");
  if (dropout_stream(in.attrs).empty()) TS_THROW(where(in), ": needs a stream key");
  return unary_rule(in);
}

ShapeRuleOutput grad_like_first(const ShapeRuleInput& in) {
  for (size_t i = 0; i < in.shapes.size(); ++i) expect_dtype(in, i, "operand");
  expect_same(in, *in.shapes[0], *in.shapes.back(), "value and gradient");
  return {*in.shapes[0], DType::kF32};
}

ShapeRuleOutput bias_gelu_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  const Shape& bias = *in.shapes[1];
  expect_dtype(in, 0, "input");
  expect_dtype(in, 1, "bias");
  bool suffix = bias.rank() <= x.rank();
  for (int i = 0; suffix && i < bias.rank(); ++i) suffix = x[x.rank() - bias.rank() + i] == bias[i];
  if (!suffix) TS_THROW(where(in), ": bias ", bias, " must be the trailing dims of input ", x);
  if (in.shapes.size() == 3) expect_same(in, x, *in.shapes[2], "input and gradient");
  return {x, DType::kF32};
}

ShapeRuleOutput reduce_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_dtype(in, 0, "input");
  if (in.attrs.dims.empty()) TS_THROW(where(in), ": no dims to reduce over in ", x);
  for (const std::string& d : in.attrs.dims) expect_dim(in, x, d, "reduced");
  return {x.without(in.attrs.dims), DType::kF32};
}

ShapeRuleOutput reduce_max_grad_rule(const ShapeRuleInput& in) {
  ShapeRuleOutput reduced = reduce_rule(in);
  expect_same(in, reduced.shape, *in.shapes[1], "reduced value");
  expect_same(in, reduced.shape, *in.shapes[2], "reduced gradient");
  return {*in.shapes[0], DType::kF32};
}

ShapeRuleOutput expand_rule(const ShapeRuleInput& in) {
  expect_dtype(in, 0, "input");
  if (!in.attrs.shape.contains_all(*in.shapes[0]))
    TS_THROW(where(in), ": cannot expand ", *in.shapes[0], " to ", in.attrs.shape);
  return {in.attrs.shape, DType::kF32};
}

ShapeRuleOutput softmax_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_dtype(in, 0, "input");
  expect_dim(in, x, in.attrs.dim, "softmax");
  if (const std::string& query = causal_query_dim(in.attrs); !query.empty()) {
    expect_last(in, x, in.attrs.dim);
    expect_dim(in, x, query, "causal query");
    if (x.size(query) != x.size(in.attrs.dim))
      TS_THROW(where(in), ": causal mask needs query dim ", x.dim(query), " and key dim ",
               x.dim(in.attrs.dim), " of equal size");
  }
  if (in.shapes.size() == 2) expect_same(in, x, *in.shapes[1], "value and gradient");
  return {x, DType::kF32};
}

// LayerNorm (x, gamma, beta) and RMSNorm (x, gamma) over x's last dim.
ShapeRuleOutput norm_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  for (size_t i = 0; i < in.shapes.size(); ++i) expect_dtype(in, i, "operand");
  expect_last(in, x, in.attrs.dim);
  Shape param{x.dim(in.attrs.dim)};
  expect_same(in, *in.shapes[1], param, "gamma and normalised dim");
  if (in.shapes.size() == 3) expect_same(in, *in.shapes[2], param, "beta and normalised dim");
  return {x, DType::kF32};
}

ShapeRuleOutput layernorm_grad_input_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_last(in, x, in.attrs.dim);
  expect_same(in, *in.shapes[1], Shape{x.dim(in.attrs.dim)}, "gamma and normalised dim");
  expect_same(in, x, *in.shapes[2], "input and gradient");
  return {x, DType::kF32};
}

ShapeRuleOutput layernorm_grad_gamma_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_last(in, x, in.attrs.dim);
  expect_same(in, x, *in.shapes[1], "input and gradient");
  return {Shape{x.dim(in.attrs.dim)}, DType::kF32};
}

// The rotated dim is the last (pairs are adjacent elements) and even; the
// position dim is another dim of x.
ShapeRuleOutput rotary_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_dtype(in, 0, "input");
  expect_last(in, x, in.attrs.dim);
  if (x.size(in.attrs.dim) % 2 != 0)
    TS_THROW(where(in), ": the rotated dim ", x.dim(in.attrs.dim), " must have an even size");
  expect_dim(in, x, rotary_position_dim(in.attrs), "position");
  if (rotary_position_dim(in.attrs) == in.attrs.dim)
    TS_THROW(where(in), ": the position dim and the rotated dim are both '", in.attrs.dim, "'");
  if (!(rotary_theta(in.attrs) > 1.0f))
    TS_THROW(where(in), ": theta must be above 1, got ", rotary_theta(in.attrs));
  try {
    parse_rotary_scaling(rotary_scaling(in.attrs));
  } catch (const Error& e) {
    TS_THROW(where(in), ": ", e.what());
  }
  return {x, DType::kF32};
}

ShapeRuleOutput embedding_rule(const ShapeRuleInput& in) {
  const Shape& table = *in.shapes[0];
  const Shape& ids = *in.shapes[1];
  expect_dtype(in, 0, "table");
  expect_dtype(in, 1, "ids", DType::kI32);
  if (table.rank() < 2 || table[0].name != in.attrs.dim)
    TS_THROW(where(in), ": table ", table, " must lead with the vocab dim '", in.attrs.dim, "'");
  std::vector<Dim> out = ids.dims();
  for (int i = 1; i < table.rank(); ++i) {
    if (ids.has(table[i].name))
      TS_THROW(where(in), ": ids ", ids, " and table ", table, " share dim '", table[i].name, "'");
    out.push_back(table[i]);
  }
  return {Shape(out), DType::kF32};
}

ShapeRuleOutput embedding_grad_rule(const ShapeRuleInput& in) {
  const Shape& ids = *in.shapes[0];
  const Shape& dy = *in.shapes[1];
  const Shape& table = in.attrs.shape;
  expect_dtype(in, 0, "ids", DType::kI32);
  if (table.rank() < 2 || table[0].name != in.attrs.dim)
    TS_THROW(where(in), ": table ", table, " must lead with the vocab dim '", in.attrs.dim, "'");
  std::vector<Dim> expected = ids.dims();
  for (int i = 1; i < table.rank(); ++i) expected.push_back(table[i]);
  expect_same(in, dy, Shape(expected), "gradient");
  return {table, DType::kF32};
}

ShapeRuleOutput cross_entropy_rule(const ShapeRuleInput& in) {
  const Shape& logits = *in.shapes[0];
  const Shape& labels = *in.shapes[1];
  expect_dtype(in, 0, "logits");
  expect_dtype(in, 1, "labels", DType::kI32);
  expect_last(in, logits, in.attrs.dim);
  expect_same(in, labels, logits.without({in.attrs.dim}), "labels and logits without vocab");
  if (in.shapes.size() == 3) {
    if (in.shapes[2]->rank() != 0) TS_THROW(where(in), ": loss gradient must be a scalar");
    return {logits, DType::kF32};
  }
  return {Shape{}, DType::kF32};
}

ShapeRuleOutput split_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_dim(in, x, in.attrs.dim, "split");
  const Shape& parts = in.attrs.shape;
  if (parts.numel() != x.size(in.attrs.dim))
    TS_THROW(where(in), ": cannot split ", x.dim(in.attrs.dim), " into ", parts,
             " (sizes multiply to ", parts.numel(), ")");
  std::vector<Dim> out;
  for (const Dim& d : x.dims()) {
    if (d.name != in.attrs.dim) {
      out.push_back(d);
      continue;
    }
    for (const Dim& p : parts.dims()) out.push_back(p);
  }
  return {Shape(out), in.dtypes[0]};
}

ShapeRuleOutput merge_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  const auto& names = in.attrs.dims;
  if (names.size() < 2) TS_THROW(where(in), ": needs at least two dims to merge");
  if (merged_dim(in.attrs).empty()) TS_THROW(where(in), ": needs a name for the merged dim");
  expect_dim(in, x, names[0], "merged");
  int first = *x.index_of(names[0]);
  int64_t size = 1;
  for (size_t k = 0; k < names.size(); ++k) {
    expect_dim(in, x, names[k], "merged");
    if (*x.index_of(names[k]) != first + static_cast<int>(k))
      TS_THROW(where(in), ": dims to merge must be adjacent and in order in ", x);
    size *= x.size(names[k]);
  }
  std::vector<Dim> out;
  for (int i = 0; i < x.rank(); ++i) {
    if (i == first) out.push_back({merged_dim(in.attrs), size});
    if (i < first || i >= first + static_cast<int>(names.size())) out.push_back(x[i]);
  }
  return {Shape(out), in.dtypes[0]};
}

ShapeRuleOutput rename_rule(const ShapeRuleInput& in) {
  const Shape& x = *in.shapes[0];
  expect_dim(in, x, in.attrs.dim, "renamed");
  std::vector<Dim> out = x.dims();
  for (Dim& d : out)
    if (d.name == in.attrs.dim) d.name = renamed_to(in.attrs);
  return {Shape(out), in.dtypes[0]};
}

// Local shape rules of the collectives: a split dim shrinks or grows by the axis size.
Shape resize_dim(const ShapeRuleInput& in, const Shape& x, const std::string& dim, bool grow) {
  expect_dim(in, x, dim, "sharded");
  if (in.attrs.count < 1)
    TS_THROW(where(in), ": axis '", in.attrs.axis, "' has size ", in.attrs.count);
  std::vector<Dim> dims = x.dims();
  for (Dim& d : dims) {
    if (d.name != dim) continue;
    if (!grow && d.size % in.attrs.count != 0)
      TS_THROW(where(in), ": dim ", d, " does not divide over axis '", in.attrs.axis, "' of size ",
               in.attrs.count);
    d.size = grow ? d.size * in.attrs.count : d.size / in.attrs.count;
  }
  return Shape(dims);
}

// Moves that only copy 32-bit words accept i32 (token ids, labels) too.
ShapeRuleOutput slice_rule(const ShapeRuleInput& in) {
  return {resize_dim(in, *in.shapes[0], in.attrs.dim, false), in.dtypes[0]};
}

ShapeRuleOutput reduce_scatter_rule(const ShapeRuleInput& in) {
  expect_dtype(in, 0, "input");
  return slice_rule(in);
}

ShapeRuleOutput gather_rule(const ShapeRuleInput& in) {
  return {resize_dim(in, *in.shapes[0], in.attrs.dim, true), in.dtypes[0]};
}

ShapeRuleOutput all_to_all_rule(const ShapeRuleInput& in) {
  Shape grown = resize_dim(in, *in.shapes[0], in.attrs.dim, true);
  return {resize_dim(in, grown, all_to_all_dim(in.attrs), false), in.dtypes[0]};
}

ShapeRuleOutput tuple_get_rule(const ShapeRuleInput& in) {
  const std::vector<TupleElement>& elements = *in.elements[0];
  if (elements.empty()) TS_THROW(where(in), ": input ", *in.shapes[0], " is not a tuple");
  const int64_t i = tuple_index(in.attrs);
  if (i < 0 || i >= static_cast<int64_t>(elements.size()))
    TS_THROW(where(in), ": element ", i, " of a tuple of ", elements.size());
  return {elements[i].shape, elements[i].dtype};
}

// The dims of q (query, head and the rest), k and v (key for query) that an
// attention names, checked; the kernels' limit on the head dim (their
// blocks live on the stack).
constexpr int64_t kMaxAttentionHeadDim = 128;

void check_attention_operands(const ShapeRuleInput& in) {
  for (size_t i = 0; i < 3; ++i) expect_dtype(in, i, i == 0 ? "q" : i == 1 ? "k" : "v");
  const std::vector<std::string>& dims = attention_dims(in.attrs);
  if (dims.size() != 3)
    TS_THROW(where(in), ": needs its query, key and head dims, got ", dims.size(), " names");
  const std::string &query = dims[0], &key = dims[1], &head = dims[2];
  const Shape &q = *in.shapes[0], &k = *in.shapes[1], &v = *in.shapes[2];
  expect_dim(in, q, query, "query");
  expect_dim(in, q, head, "head");
  expect_dim(in, k, key, "key");
  if (q.has(key)) TS_THROW(where(in), ": q ", q, " has the key dim '", key, "'");
  std::vector<Dim> renamed = q.dims();
  for (Dim& d : renamed)
    if (d.name == query) d = k.dim(key);
  if (!(Shape(renamed) == k))
    TS_THROW(where(in), ": k ", k, " must be q ", q, " with '", query, "' replaced by '", key, "'");
  expect_same(in, k, v, "k and v");
  if (q.size(head) > kMaxAttentionHeadDim)
    TS_THROW(where(in), ": head dim ", q.dim(head), " exceeds the kernels' limit of ",
             kMaxAttentionHeadDim);
  const std::string& causal = causal_query_dim(in.attrs);
  if (!causal.empty() && causal != query)
    TS_THROW(where(in), ": the causal mask's query dim '", causal, "' is not the query dim '",
             query, "'");
  const float p = attention_dropout_p(in.attrs);
  if (!(p >= 0.0f && p < 1.0f))
    TS_THROW(where(in), ": dropout rate ", p, " on the probabilities is outside [0, 1)");
  if (p > 0.0f && attention_dropout_stream(in.attrs).empty())
    TS_THROW(where(in), ": dropout on the probabilities needs a stream name");
  if (!causal.empty() && q.size(query) != k.size(key))
    TS_THROW(where(in), ": a causal mask needs query dim ", q.dim(query), " and key dim ",
             k.dim(key), " of equal size");
}

ShapeRuleOutput attention_rule(const ShapeRuleInput& in) {
  check_attention_operands(in);
  const Shape& q = *in.shapes[0];
  const Shape lse = q.without({attention_dims(in.attrs)[2]});
  return ShapeRuleOutput({{q, DType::kF32, 0}, {lse, DType::kF32, 0}});
}

ShapeRuleOutput attention_grad_rule(const ShapeRuleInput& in) {
  check_attention_operands(in);
  const Shape &q = *in.shapes[0], &k = *in.shapes[1];
  for (size_t i = 3; i < 6; ++i) expect_dtype(in, i, "operand");
  expect_same(in, q.without({attention_dims(in.attrs)[2]}), *in.shapes[3],
              "q without head and log-sum-exp");
  expect_same(in, q, *in.shapes[4], "q and output gradient");
  expect_same(in, q, *in.shapes[5], "q and output");
  return ShapeRuleOutput({{q, DType::kF32, 0}, {k, DType::kF32, 0}, {k, DType::kF32, 0}});
}

// q.k and p.v: 2 flops per multiply-add over (rows, query, key, head); the
// causal mask's skipped half is counted too.
double attention_flops(const std::vector<const Shape*>& in, const Shape&) {
  const Shape &q = *in[0], &k = *in[1];
  int64_t key = 1;
  for (const Dim& d : k.dims())
    if (!q.has(d.name)) key *= d.size;
  return 4.0 * static_cast<double>(q.numel()) * static_cast<double>(key);
}
// The forward's work times kAttentionGradForwards (op_table.h).
double attention_grad_flops(const std::vector<const Shape*>& in, const Shape& out) {
  return kAttentionGradForwards * attention_flops(in, out);
}

// h (rows.., embed), w (vocab, embed) or (embed, vocab), labels (rows..):
// checked; h's rows.
Shape check_linear_cross_entropy(const ShapeRuleInput& in) {
  expect_dtype(in, 0, "hidden states");
  expect_dtype(in, 1, "weight");
  expect_dtype(in, 2, "labels", DType::kI32);
  const Shape &h = *in.shapes[0], &w = *in.shapes[1];
  const std::string &vocab = in.attrs.dim, &embed = in.attrs.dim2;
  if (w.rank() != 2 || !w.has(vocab) || !w.has(embed) || vocab == embed)
    TS_THROW(where(in), ": weight ", w, " must be (", vocab, ", ", embed, ") or (", embed, ", ",
             vocab, ")");
  expect_last(in, h, embed);
  if (h.size(embed) != w.size(embed))
    TS_THROW(where(in), ": hidden states ", h, " and weight ", w, " differ in '", embed, "'");
  const Shape rows = h.without({embed});
  expect_same(in, *in.shapes[2], rows, "labels and hidden states without the embed dim");
  return rows;
}

ShapeRuleOutput linear_cross_entropy_rule(const ShapeRuleInput& in) {
  const Shape rows = check_linear_cross_entropy(in);
  return ShapeRuleOutput({{Shape{}, DType::kF32, 0}, {rows, DType::kF32, 0}});
}

ShapeRuleOutput linear_cross_entropy_grad_rule(const ShapeRuleInput& in) {
  const Shape rows = check_linear_cross_entropy(in);
  expect_dtype(in, 3, "log-sum-exp");
  expect_same(in, *in.shapes[3], rows, "log-sum-exp and the rows");
  if (in.shapes[4]->rank() != 0) TS_THROW(where(in), ": loss gradient must be a scalar");
  return ShapeRuleOutput({{*in.shapes[0], DType::kF32, 0}, {*in.shapes[1], DType::kF32, 0}});
}

// The logits' product, h . w: 2 flops per multiply-add; the backward
// recomputes it and makes two more of its size (dh, dw).
double linear_cross_entropy_flops(const std::vector<const Shape*>& in, const Shape&) {
  return 2.0 * static_cast<double>(in[0]->numel()) * static_cast<double>(in[1]->numel()) /
         static_cast<double>((*in[0])[in[0]->rank() - 1].size);
}
double linear_cross_entropy_grad_flops(const std::vector<const Shape*>& in, const Shape& out) {
  return 3 * linear_cross_entropy_flops(in, out);
}

double einsum_flops(const std::vector<const Shape*>& in, const Shape& out) {
  double n = static_cast<double>(out.numel());
  for (const Dim& d : in[0]->dims())
    if (!out.has(d.name)) n *= static_cast<double>(d.size);
  return 2.0 * n;
}

// Where each op's output lives (ir/op_table.h), short for the table.
constexpr OutputBuffer kOwn = OutputBuffer::kOwn;
constexpr OutputBuffer kView = OutputBuffer::kView;
constexpr OutputBuffer kOwnOrFirstInput = OutputBuffer::kOwnOrFirstInput;

// Indexed by OpKind; the static_assert below keeps it complete and in order.
constexpr std::array<OpInfo, static_cast<size_t>(OpKind::kCount)> kOpTable = {{
    {OpKind::kInput, "input", 0, kOwn, leaf_rule, free_op},
    {OpKind::kParam, "param", 0, kOwn, leaf_rule, free_op},
    {OpKind::kFill, "fill", 0, kOwn, leaf_rule, free_op},
    {OpKind::kEinsum, "einsum", 2, kOwn, einsum_rule, einsum_flops},
    {OpKind::kAdd, "add", 2, kOwn, broadcast_rule, per_element},
    {OpKind::kSub, "sub", 2, kOwn, broadcast_rule, per_element},
    {OpKind::kMul, "mul", 2, kOwn, broadcast_rule, per_element},
    {OpKind::kDiv, "div", 2, kOwn, broadcast_rule, per_element},
    {OpKind::kScale, "scale", 1, kOwn, unary_rule, per_element},
    {OpKind::kGelu, "gelu", 1, kOwn, unary_rule, elementwise_cost<8>},
    {OpKind::kRelu, "relu", 1, kOwn, unary_rule, per_element},
    {OpKind::kExp, "exp", 1, kOwn, unary_rule, per_element},
    {OpKind::kLog, "log", 1, kOwn, unary_rule, per_element},
    {OpKind::kTanh, "tanh", 1, kOwn, unary_rule, per_element},
    {OpKind::kBiasGelu, "bias_gelu", 2, kOwn, bias_gelu_rule, elementwise_cost<9>},
    {OpKind::kDropout, "dropout", 1, kOwn, dropout_rule, per_element},
    {OpKind::kReduceSum, "reduce_sum", 1, kOwn, reduce_rule, per_input_element},
    {OpKind::kReduceMean, "reduce_mean", 1, kOwn, reduce_rule, per_input_element},
    {OpKind::kReduceMax, "reduce_max", 1, kOwn, reduce_rule, per_input_element},
    {OpKind::kExpand, "expand", 1, kOwn, expand_rule, free_op},
    {OpKind::kSoftmax, "softmax", 1, kOwn, softmax_rule, elementwise_cost<5>},
    {OpKind::kLayerNorm, "layernorm", 3, kOwn, norm_rule, elementwise_cost<8>},
    {OpKind::kEmbedding, "embedding", 2, kOwn, embedding_rule, free_op},
    {OpKind::kCrossEntropy, "cross_entropy", 2, kOwn, cross_entropy_rule, input_cost<5>},
    {OpKind::kSplitDim, "split_dim", 1, kView, split_rule, free_op},
    {OpKind::kMergeDims, "merge_dims", 1, kView, merge_rule, free_op},
    {OpKind::kRename, "rename", 1, kView, rename_rule, free_op},
    {OpKind::kTupleGet, "tuple_get", 1, kView, tuple_get_rule, free_op},
    {OpKind::kAttention, "attention", 3, kOwn, attention_rule, attention_flops},
    {OpKind::kAttentionGrad, "attention_grad", 6, kOwn, attention_grad_rule, attention_grad_flops},
    {OpKind::kLinearCrossEntropy, "linear_cross_entropy", 3, kOwn, linear_cross_entropy_rule,
     linear_cross_entropy_flops},
    {OpKind::kLinearCrossEntropyGrad, "linear_cross_entropy_grad", 5, kOwn,
     linear_cross_entropy_grad_rule, linear_cross_entropy_grad_flops},
    {OpKind::kGeluGrad, "gelu_grad", 2, kOwnOrFirstInput, grad_like_first, elementwise_cost<12>},
    {OpKind::kReluGrad, "relu_grad", 2, kOwnOrFirstInput, grad_like_first, per_element},
    {OpKind::kTanhGrad, "tanh_grad", 2, kOwnOrFirstInput, grad_like_first, elementwise_cost<3>},
    {OpKind::kBiasGeluGrad, "bias_gelu_grad", 3, kOwnOrFirstInput, bias_gelu_rule,
     elementwise_cost<13>},
    {OpKind::kReduceMaxGrad, "reduce_max_grad", 3, kOwn, reduce_max_grad_rule, per_element},
    {OpKind::kSoftmaxGrad, "softmax_grad", 2, kOwnOrFirstInput, softmax_rule, elementwise_cost<4>},
    {OpKind::kLayerNormGradInput, "layernorm_grad_input", 3, kOwnOrFirstInput,
     layernorm_grad_input_rule, elementwise_cost<10>},
    {OpKind::kLayerNormGradGamma, "layernorm_grad_gamma", 2, kOwn, layernorm_grad_gamma_rule,
     input_cost<6>},
    {OpKind::kEmbeddingGrad, "embedding_grad", 2, kOwn, embedding_grad_rule, per_input_element},
    {OpKind::kCrossEntropyGrad, "cross_entropy_grad", 3, kOwnOrFirstInput, cross_entropy_rule,
     elementwise_cost<5>},
    {OpKind::kSilu, "silu", 1, kOwn, unary_rule, elementwise_cost<4>},
    {OpKind::kSigmoid, "sigmoid", 1, kOwn, unary_rule, elementwise_cost<3>},
    {OpKind::kSqrt, "sqrt", 1, kOwn, unary_rule, per_element},
    {OpKind::kRsqrt, "rsqrt", 1, kOwn, unary_rule, elementwise_cost<2>},
    {OpKind::kRmsNorm, "rmsnorm", 2, kOwn, norm_rule, elementwise_cost<5>},
    {OpKind::kRotary, "rotary", 1, kOwn, rotary_rule, elementwise_cost<3>},
    {OpKind::kSiluGrad, "silu_grad", 2, kOwnOrFirstInput, grad_like_first, elementwise_cost<7>},
    {OpKind::kSigmoidGrad, "sigmoid_grad", 2, kOwnOrFirstInput, grad_like_first,
     elementwise_cost<3>},
    {OpKind::kRmsNormGradInput, "rmsnorm_grad_input", 3, kOwnOrFirstInput,
     layernorm_grad_input_rule, elementwise_cost<7>},
    {OpKind::kRmsNormGradGamma, "rmsnorm_grad_gamma", 2, kOwn, layernorm_grad_gamma_rule,
     input_cost<4>},
    {OpKind::kRotaryGrad, "rotary_grad", 1, kOwn, rotary_rule, elementwise_cost<3>},
    {OpKind::kShardSlice, "shard_slice", 1, kOwn, slice_rule, free_op},
    {OpKind::kAllGather, "all_gather", 1, kOwn, gather_rule, free_op},
    {OpKind::kReduceScatter, "reduce_scatter", 1, kOwn, reduce_scatter_rule, free_op},
    {OpKind::kAllReduce, "all_reduce", 1, kOwn, unary_rule, free_op},
    {OpKind::kAllToAll, "all_to_all", 1, kOwn, all_to_all_rule, free_op},
    {OpKind::kZeroUnlessRoot, "zero_unless_root", 1, kOwn, unary_rule, free_op},
}};

static_assert(lists_every_kind_in_order(kOpTable), "kOpTable must list every OpKind in enum order");

}  // namespace

const OpInfo& op_info(OpKind kind) {
  TS_CHECK(kind < OpKind::kCount, "bad op kind ", static_cast<int>(kind));
  return kOpTable[static_cast<size_t>(kind)];
}

const char* op_name(OpKind kind) { return op_info(kind).name; }

}  // namespace tessel
