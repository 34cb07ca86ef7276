#include "tessel/backend/cpu/sharded_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "tessel/backend/cpu/dropout_op.h"
#include "tessel/backend/cpu/ring_attention.h"
#include "tessel/base/around.h"
#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/ir/attrs.h"
#include "tessel/kernels/cross_entropy.h"
#include "tessel/kernels/elementwise.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel {
namespace {

// src [x][y][block] -> dst [y][x][block]: with x the ranks and y the outer
// dims, "rank-major" [r][outer][len][inner] to "dim-major"
// [outer][r*len][inner] (block = len * inner); swapped, back.
void swap_leading(const float* src, float* dst, int64_t x, int64_t y, int64_t block) {
  const int64_t sizes[3] = {y, x, block};  // dst's; src strides for them
  const int64_t strides[3] = {block, y * block, 1};
  kernels::expand(src, strides, dst, sizes, 3);
}

void all_gather(const OpCall& call, Communicator& comm) {
  const Shape& x = in_shape(call, 0);
  Around a = around(x, call.node.attrs.dim);
  float* out = static_cast<float*>(call.out);
  float* buf = a.outer == 1 ? out : static_cast<float*>(call.scratch);
  comm.all_gather(in_f32(call, 0), buf, x.numel(), call.node.name);
  if (a.outer != 1) swap_leading(buf, out, call.node.attrs.count, a.outer, a.n * a.inner);
}

// An all-gather carrying bf16 (OpCall::bf16_out): the input rounded to bf16
// (unless stored so), gathered at 2 bytes per element, unpacked into the
// bf16 output. The values are those of gathering f32 and rounding after.
void all_gather_bf16(const OpCall& call, Communicator& comm) {
  const Shape& x = in_shape(call, 0);
  const Around a = around(x, call.node.attrs.dim);
  uint16_t* out = static_cast<uint16_t*>(call.out);
  uint16_t* scratch = static_cast<uint16_t*>(call.scratch);
  const uint16_t* send = static_cast<const uint16_t*>(call.bf16_in[0]);
  if (!send) {
    round_to_bf16(in_f32(call, 0), scratch, x.numel());
    send = scratch;
    scratch += round_up(static_cast<size_t>(x.numel()) * 2) / 2;
  }
  comm.all_gather_bf16(send, a.outer == 1 ? out : scratch, x.numel(), call.node.name);
  if (a.outer == 1) return;
  // rank-major [r][outer][len][inner] -> [outer][r][len][inner]
  const int64_t ranks = call.node.attrs.count, block = a.n * a.inner;
#pragma omp parallel for schedule(static) collapse(2)
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t r = 0; r < ranks; ++r)
      std::memcpy(out + (o * ranks + r) * block, scratch + (r * a.outer + o) * block,
                  static_cast<size_t>(block) * sizeof(uint16_t));
}

// Bytes of a reduce-scatter's f32 packing into rank-major blocks (none when
// the scattered dim is outermost), padded so what follows stays aligned.
size_t reduce_scatter_pack_bytes(const Graph& graph, const Node& node) {
  const Shape& x = graph.node(node.inputs.at(0)).shape;
  return around(node.shape, node.attrs.dim).outer != 1
             ? round_up(static_cast<size_t>(x.numel()) * sizeof(float))
             : 0;
}

// With call.bf16_sum the blocks are carried in bf16 and added in f32
// (Communicator::reduce_scatter_bf16), its work after the packing.
void reduce_scatter(const OpCall& call, Communicator& comm) {
  const Shape& out_shape = call.node.shape;
  Around a = around(out_shape, call.node.attrs.dim);
  const float* in = in_f32(call, 0);
  if (a.outer != 1) {
    float* buf = static_cast<float*>(call.scratch);
    swap_leading(in, buf, a.outer, call.node.attrs.count, a.n * a.inner);
    in = buf;
  }
  float* out = static_cast<float*>(call.out);
  if (call.bf16_sum) {
    uint8_t* work =
        static_cast<uint8_t*>(call.scratch) + reduce_scatter_pack_bytes(call.graph, call.node);
    return comm.reduce_scatter_bf16(in, out, out_shape.numel(), work, call.node.name);
  }
  comm.reduce_scatter(in, out, out_shape.numel(), call.node.name);
}

// S(d) -> S(e): send block r = my rows of d with e-chunk r; receive block r =
// rank r's rows of d with my e-chunk.
void all_to_all(const OpCall& call, Communicator& comm) {
  const Shape& x = in_shape(call, 0);
  const Shape& y = call.node.shape;
  const std::string& d = call.node.attrs.dim;
  const std::string& e = all_to_all_dim(call.node.attrs);
  const int64_t n = call.node.attrs.count;
  const int64_t block = x.numel() / n;
  float* send = static_cast<float*>(call.scratch);
  float* recv = send + x.numel();
  {  // pack: sizes (n, x dims with e -> e/n), strides from x.
    std::vector<int64_t> sizes = {n}, strides = {y.size(e) * x.stride(e)};
    for (const Dim& dim : x.dims()) {
      sizes.push_back(dim.name == e ? dim.size / n : dim.size);
      strides.push_back(x.stride(dim.name));
    }
    kernels::expand(in_f32(call, 0), strides.data(), send, sizes.data(),
                    static_cast<int>(sizes.size()));
  }
  comm.all_to_all(send, recv, block, call.node.name);
  {                                  // unpack: y dims with d -> (n, d/n), read from recv blocks.
    std::vector<Dim> bd = x.dims();  // rank r's block: x dims with e -> e/n
    for (Dim& dim : bd)
      if (dim.name == e) dim.size /= n;
    const Shape block_shape(bd);
    std::vector<int64_t> sizes, strides;
    for (const Dim& dim : y.dims()) {
      if (dim.name == d) {
        sizes.push_back(n);
        strides.push_back(block);
        sizes.push_back(dim.size / n);
      } else {
        sizes.push_back(dim.size);
      }
      strides.push_back(block_shape.stride(dim.name));
    }
    kernels::expand(recv, strides.data(), static_cast<float*>(call.out), sizes.data(),
                    static_cast<int>(sizes.size()));
  }
}

void shard_slice(const OpCall& call) {
  const Shape& x = in_shape(call, 0);
  const Shape& y = call.node.shape;
  const std::string& d = call.node.attrs.dim;
  const float* src = in_f32(call, 0) + call.node.attrs.offset * y.size(d) * x.stride(d);
  std::vector<int64_t> sizes, strides;
  for (const Dim& dim : y.dims()) {
    sizes.push_back(dim.size);
    strides.push_back(x.stride(dim.name));
  }
  kernels::expand(src, strides.data(), static_cast<float*>(call.out), sizes.data(), y.rank());
}

// Vocab-sharded embedding: ids outside this shard give zero rows (P(sum)).
void embedding_shard(const OpCall& call) {
  const Shape& table = in_shape(call, 0);
  const int64_t vocab = table[0].size, dim = table.numel() / vocab;
  const int64_t n = in_shape(call, 1).numel(), offset = call.node.attrs.offset;
  const float* t = in_f32(call, 0);
  const int32_t* ids = in_i32(call, 1);
  float* out = static_cast<float*>(call.out);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    int64_t row = ids[i] - offset;
    if (row >= 0 && row < vocab)
      std::memcpy(out + i * dim, t + row * dim, dim * sizeof(float));
    else
      std::fill(out + i * dim, out + (i + 1) * dim, 0.0f);
  }
}

void embedding_grad_shard(const OpCall& call) {
  const Shape& table = call.node.shape;
  const int64_t vocab = table[0].size, dim = table.numel() / vocab;
  const int64_t n = in_shape(call, 0).numel(), offset = call.node.attrs.offset;
  const int32_t* ids = in_i32(call, 0);
  const float* dy = in_f32(call, 1);
  float* out = static_cast<float*>(call.out);
  std::fill(out, out + table.numel(), 0.0f);
  // Parallel over columns: each thread owns a column range, rows in order.
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < dim; ++c)
    for (int64_t i = 0; i < n; ++i) {
      int64_t row = ids[i] - offset;
      if (row >= 0 && row < vocab) out[row * dim + c] += dy[i * dim + c];
    }
}

// Cross-entropy with the vocab split over attrs.axis: row max and sum of
// exponentials are reduced across the axis; the label's logit comes from the
// rank whose shard holds it. Returns the scratch holding them: per row, the
// max, then the sums, then the label's logits.
const float* vocab_parallel_softmax_stats(const OpCall& call, const CommGroups* comms) {
  Communicator& comm = comms->axis(call.node.attrs.axis);
  const Shape& logits_shape = in_shape(call, 0);
  const int64_t vocab = logits_shape.size(call.node.attrs.dim);
  const int64_t rows = logits_shape.numel() / vocab, offset = call.node.attrs.offset;
  float* row_max = static_cast<float*>(call.scratch);
  float *row_sum = row_max + rows, *row_target = row_sum + rows;
  const float* logits = in_f32(call, 0);
  const int32_t* labels = in_i32(call, 1);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab;
    row_max[r] = *std::max_element(l, l + vocab);
  }
  comm.all_reduce(row_max, rows, ReduceKind::kMax, call.node.name);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * vocab;
    double s = 0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(static_cast<double>(l[v] - row_max[r]));
    row_sum[r] = static_cast<float>(s);
    int64_t t = labels[r] - offset;
    row_target[r] = t >= 0 && t < vocab ? l[t] : 0.0f;
  }
  comm.all_reduce(row_sum, rows, ReduceKind::kSum, call.node.name);
  comm.all_reduce(row_target, rows, ReduceKind::kSum, call.node.name);
  return row_max;
}

void cross_entropy(const OpCall& call, const CommGroups* comms) {
  const Shape& logits_shape = in_shape(call, 0);
  const int64_t vocab = logits_shape.size(call.node.attrs.dim);
  const int64_t rows = logits_shape.numel() / vocab;
  float* out = static_cast<float*>(call.out);
  if (call.node.attrs.axis.empty()) {
    auto f = call.reference ? kernels::cross_entropy_forward_ref : kernels::cross_entropy_forward;
    *out = static_cast<float>(f(in_f32(call, 0), in_i32(call, 1), rows, vocab) *
                              row_share(call, rows));
    return;
  }
  const float* stats = vocab_parallel_softmax_stats(call, comms);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    total += std::log(static_cast<double>(stats[rows + r])) + stats[r] - stats[2 * rows + r];
  *out = static_cast<float>(total / rows * row_share(call, rows));
}

void cross_entropy_grad(const OpCall& call, const CommGroups* comms) {
  const Shape& logits_shape = in_shape(call, 0);
  const int64_t vocab = logits_shape.size(call.node.attrs.dim);
  const int64_t rows = logits_shape.numel() / vocab;
  const float dloss = *in_f32(call, 2) * static_cast<float>(row_share(call, rows));
  float* out = static_cast<float*>(call.out);
  if (call.node.attrs.axis.empty()) {
    auto f = call.reference ? kernels::cross_entropy_backward_ref : kernels::cross_entropy_backward;
    return f(in_f32(call, 0), in_i32(call, 1), dloss, out, rows, vocab);
  }
  const float* stats = vocab_parallel_softmax_stats(call, comms);
  const float* logits = in_f32(call, 0);
  const int32_t* labels = in_i32(call, 1);
  const int64_t offset = call.node.attrs.offset;
  const float scale = dloss / static_cast<float>(rows);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float inv_sum = 1.0f / stats[rows + r];
    for (int64_t v = 0; v < vocab; ++v)
      out[r * vocab + v] = scale * std::exp(logits[r * vocab + v] - stats[r]) * inv_sum;
    int64_t t = labels[r] - offset;
    if (t >= 0 && t < vocab) out[r * vocab + t] -= scale;
  }
}

}  // namespace

double row_share(const OpCall& call, int64_t rows) {
  return call.node.attrs.total > 0 ? static_cast<double>(rows) / call.node.attrs.total : 1.0;
}

bool is_sharded_op(const Node& node) {
  if (is_local_graph_op(node.kind)) return true;
  switch (node.kind) {
    case OpKind::kEmbedding:
    case OpKind::kEmbeddingGrad:
      return !node.attrs.axis.empty();
    case OpKind::kCrossEntropy:
    case OpKind::kCrossEntropyGrad:
      return !node.attrs.axis.empty() || node.attrs.total > 0;
    case OpKind::kDropout:
      return !node.attrs.offsets.empty();
    case OpKind::kAttention:
    case OpKind::kAttentionGrad:
      return is_ring_attention(node);
    default:
      return false;
  }
}

size_t sharded_scratch_bytes(const Graph& graph, const Node& node) {
  const Shape& x = graph.node(node.inputs.at(0)).shape;
  switch (node.kind) {
    case OpKind::kAllGather:
      return node.shape.numel() * sizeof(float);
    case OpKind::kReduceScatter:
      return x.numel() * sizeof(float);
    case OpKind::kAllToAll:
      return 2 * x.numel() * sizeof(float);
    case OpKind::kCrossEntropy:
    case OpKind::kCrossEntropyGrad:
      if (node.attrs.axis.empty()) return 0;
      return 3 * graph.node(node.inputs[1]).shape.numel() * sizeof(float);
    case OpKind::kAttention:
    case OpKind::kAttentionGrad:
      return ring_attention_scratch_bytes(graph, node);
    default:
      return 0;
  }
}

size_t bf16_all_gather_scratch_bytes(const Graph& graph, const Node& node, bool in_bf16) {
  const Shape& x = graph.node(node.inputs.at(0)).shape;
  const size_t send = in_bf16 ? 0 : round_up(static_cast<size_t>(x.numel()) * 2);
  const bool unpack = around(x, node.attrs.dim).outer != 1;
  return send + (unpack ? static_cast<size_t>(node.shape.numel()) * 2 : 0);
}

size_t bf16_sum_scratch_bytes(const Graph& graph, const Node& node) {
  const int p = static_cast<int>(node.attrs.count);
  switch (node.kind) {
    case OpKind::kAllReduce:
      return all_reduce_bf16_work_bytes(node.shape.numel(), p);
    case OpKind::kReduceScatter:
      return reduce_scatter_pack_bytes(graph, node) +
             reduce_scatter_bf16_work_bytes(node.shape.numel(), p);
    default:
      TS_CHECK(false, op_name(node.kind), " '", node.name, "' is no partial sum");
  }
  return 0;
}

void execute_sharded_op(const OpCall& call, const CommGroups* comms) {
  const Node& node = call.node;
  auto comm = [&]() -> Communicator& {
    if (!comms)
      TS_THROW(op_name(node.kind), " '", node.name,
               "' needs communicators, and this program has none");
    return comms->axis(node.attrs.axis);
  };
  float* out = static_cast<float*>(call.out);
  switch (node.kind) {
    case OpKind::kShardSlice:
      return shard_slice(call);
    case OpKind::kAllGather:
      return call.bf16_out ? all_gather_bf16(call, comm()) : all_gather(call, comm());
    case OpKind::kReduceScatter:
      return reduce_scatter(call, comm());
    case OpKind::kAllToAll:
      return all_to_all(call, comm());
    case OpKind::kAllReduce: {
      const int64_t n = node.shape.numel();
      std::memcpy(out, in_f32(call, 0), n * sizeof(float));
      if (call.bf16_sum) return comm().all_reduce_bf16(out, n, call.scratch, node.name);
      comm().all_reduce(out, n,
                        allreduce_kind(node.attrs) == "max" ? ReduceKind::kMax : ReduceKind::kSum,
                        node.name);
      return;
    }
    case OpKind::kZeroUnlessRoot: {
      const int64_t n = node.shape.numel();
      if (node.attrs.offset == 0)
        std::memcpy(out, in_f32(call, 0), n * sizeof(float));
      else
        std::fill(out, out + n, 0.0f);
      return;
    }
    case OpKind::kEmbedding:
      return embedding_shard(call);
    case OpKind::kEmbeddingGrad:
      return embedding_grad_shard(call);
    case OpKind::kCrossEntropy:
      return cross_entropy(call, comms);
    case OpKind::kCrossEntropyGrad:
      return cross_entropy_grad(call, comms);
    case OpKind::kDropout:
      return execute_dropout(call);  // by global indices (backend/cpu/dropout_op.h)
    case OpKind::kAttention:
      return execute_ring_attention(call, comm());
    case OpKind::kAttentionGrad:
      return execute_ring_attention_grad(call, comm());
    default:
      TS_CHECK(false, op_name(node.kind), " is not a sharded op");
  }
}

}  // namespace tessel
