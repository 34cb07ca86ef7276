// Named accessors for the fields of Attrs (ir/op.h) that mean different
// things for different ops, so call sites say what they read or set:
// `layernorm_eps(a)`, not `a.scalar`. Each returns a reference (const or
// mutable), so the builder sets through the same name: `layernorm_eps(a) = eps`.
// Generic code (the graph printer, copies) still reads the raw fields.
#pragma once

#include <string>
#include <vector>

#include "tessel/ir/op.h"

namespace tessel {

#define TS_ATTR_ACCESSOR(name, type, field)       \
  inline type& name(Attrs& a) { return a.field; } \
  inline const type& name(const Attrs& a) { return a.field; }

// kFill: every element's value.
TS_ATTR_ACCESSOR(fill_value, float, scalar)
// kScale: the factor.
TS_ATTR_ACCESSOR(scale_factor, float, scalar)
// kSoftmax (and kSoftmaxGrad): the logits' scale, and the query dim of a
// causal mask ("" when not causal).
TS_ATTR_ACCESSOR(softmax_scale, float, scalar)
TS_ATTR_ACCESSOR(causal_query_dim, std::string, dim2)
// kLayerNorm (and its gradients): epsilon.
TS_ATTR_ACCESSOR(layernorm_eps, float, scalar)
// kRmsNorm (and its gradients): epsilon.
TS_ATTR_ACCESSOR(rmsnorm_eps, float, scalar)
// kRotary (and kRotaryGrad): the base of the rotary frequencies (Llama's
// theta) and the position dim (attrs.dim is the rotated, last dim). On a
// rank's local graph attrs.offsets holds the shard's offset along each dim.
TS_ATTR_ACCESSOR(rotary_theta, float, scalar)
TS_ATTR_ACCESSOR(rotary_position_dim, std::string, dim2)
// kRotary: Llama 3.1's frequency scaling as rotary_scaling_text writes it
// (base/rotary_frequencies.h); "" for none.
TS_ATTR_ACCESSOR(rotary_scaling, std::string, key)
// kMergeDims: the merged dim's name.
TS_ATTR_ACCESSOR(merged_dim, std::string, dim2)
// kRename: the new name of attrs.dim.
TS_ATTR_ACCESSOR(renamed_to, std::string, dim2)
// kAllToAll: the dim split after the exchange (attrs.dim before).
TS_ATTR_ACCESSOR(all_to_all_dim, std::string, dim2)
// kAllReduce: "sum" or "max".
TS_ATTR_ACCESSOR(allreduce_kind, std::string, key)
// kDropout: the drop probability, the random stream's name (with attrs.seed),
// and the dim whose index is the batch row in the mask key ("" for none).
TS_ATTR_ACCESSOR(dropout_p, float, scalar)
TS_ATTR_ACCESSOR(dropout_stream, std::string, key)
TS_ATTR_ACCESSOR(dropout_row_dim, std::string, dim)

// kTupleGet: which element of the tuple.
TS_ATTR_ACCESSOR(tuple_index, int64_t, offset)
// kAttention (and kAttentionGrad): the query, key and head dims, in that
// order; the logits' scale; causal_query_dim (above) set to the query dim
// when causal, "" otherwise.
TS_ATTR_ACCESSOR(attention_dims, std::vector<std::string>, dims)
TS_ATTR_ACCESSOR(attention_scale, float, scalar)
// kAttention (and kAttentionGrad) with dropout on the probabilities: its
// rate (0: none), the random stream's name (with attrs.seed). On a rank's
// local graph attrs.shape is the global shape of the probabilities the
// mask is drawn over (attention_probabilities_shape) and attrs.offsets
// this shard's offset along each of its dims (backend/cpu/attention_op.h).
TS_ATTR_ACCESSOR(attention_dropout_p, float, scalar2)
TS_ATTR_ACCESSOR(attention_dropout_stream, std::string, key)

#undef TS_ATTR_ACCESSOR

// The probabilities of an attention with these attrs over q and k, as the
// unfused path stores them and its dropout mask is drawn over: q's dims
// other than the query and head dims, in q's order, then the query and key
// dims (the GPT's (batch, heads, seq, kseq)).
inline Shape attention_probabilities_shape(const Attrs& a, const Shape& q, const Shape& k) {
  const std::vector<std::string>& dims = a.dims;  // attention_dims: query, key, head
  std::vector<Dim> p = q.without({dims[0], dims[2]}).dims();
  p.push_back(q.dim(dims[0]));
  p.push_back(k.dim(dims[1]));
  return Shape(std::move(p));
}

}  // namespace tessel
