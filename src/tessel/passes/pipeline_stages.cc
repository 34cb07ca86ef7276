#include "tessel/passes/pipeline_stages.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "tessel/autodiff/backward.h"
#include "tessel/base/error.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/graph_copy.h"
#include "tessel/ir/model_contract.h"
#include "tessel/passes/block_label.h"
#include "tessel/passes/recompute_policy.h"

namespace tessel {
namespace {

constexpr double kNominalFlops = 1e11;
constexpr double kNominalBytesPerSecond = 1e10;
// Backward costs about twice the forward (two GEMMs per forward GEMM).
constexpr double kForwardAndBackward = 3.0;

// Per-node owner block, with nodes before the first block as -1 ("embed",
// stage 0) and after the last as `blocks` ("head", last stage).
std::vector<int> node_blocks(const Graph& g, int* blocks) {
  std::vector<int> owner(g.size(), -1);
  int last = -1;
  for (ValueId id = 0; id < g.size(); ++id) {
    if (is_leaf(g.node(id))) continue;
    int b = block_of_label(g.node(id).name);
    if (b >= 0) {
      TS_CHECK(b >= last, "pipeline: block ", b, " ('", g.node(id).name, "') comes after block ",
               last, "; blocks must be built in order");
      last = b;
    }
    owner[id] = b >= 0 ? b : last;  // unlabelled nodes join the block before them
  }
  *blocks = last + 1;
  bool after_last = false;
  for (ValueId id = 0; id < g.size(); ++id) {
    if (is_leaf(g.node(id))) continue;
    if (block_of_label(g.node(id).name) == last) after_last = false;
    if (block_of_label(g.node(id).name) < 0 && owner[id] == last && last >= 0) after_last = true;
    if (after_last) owner[id] = *blocks;
  }
  return owner;
}

// Contiguous split of per-block costs into `stages` parts minimising the
// largest part; the first part also carries `head_cost`, the last `tail_cost`.
std::vector<int> balance(const std::vector<double>& cost, int stages, double head_cost,
                         double tail_cost) {
  const int n = static_cast<int>(cost.size());
  std::vector<double> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + cost[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the smallest max over the first k stages covering blocks [0, i).
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int i = k; i <= n; ++i)
      for (int j = k - 1; j < i; ++j) {
        double part = prefix[i] - prefix[j];
        if (j == 0) part += head_cost;
        if (k == stages && i == n) part += tail_cost;
        double value = std::max(best[k - 1][j], part);
        if (value < best[k][i]) {
          best[k][i] = value;
          cut[k][i] = j;
        }
      }
  std::vector<int> first(stages, 0);
  for (int k = stages, i = n; k >= 1; --k) {
    first[k - 1] = cut[k][i];
    i = cut[k][i];
  }
  return first;
}

// Cost of one forward node in seconds on a nominal device: the larger of
// flops / 1e11 and bytes written / 1e10 (a roofline with 100 GFLOP/s and
// 10 GB/s). Only ratios matter for balancing.
double nominal_node_seconds(const Graph& g, ValueId id) {
  const Node& n = g.node(id);
  double bytes = static_cast<double>(n.shape.numel()) * dtype_size(n.dtype);
  return std::max(g.node_flops(id) / kNominalFlops, bytes / kNominalBytesPerSecond);
}

}  // namespace

StagePartition partition_stages(const Graph& forward, int stages,
                                const std::vector<int>& first_blocks) {
  StagePartition p;
  p.stages = stages;
  std::vector<int> owner = node_blocks(forward, &p.blocks);
  if (stages < 1) TS_THROW("pipeline: stage count ", stages, " must be at least 1");
  if (stages > 1 && stages > p.blocks)
    TS_THROW("pipeline: ", stages, " stages but the model has only ", p.blocks,
             " blocks (n_layer); every stage needs at least one block");
  std::vector<double> block_cost(p.blocks, 0);
  double head = 0, tail = 0;
  for (ValueId id = 0; id < forward.size(); ++id) {
    if (is_leaf(forward.node(id))) continue;
    double c = nominal_node_seconds(forward, id);
    if (owner[id] < 0)
      head += c;
    else if (owner[id] >= p.blocks)
      tail += c;
    else
      block_cost[owner[id]] += c;
  }
  if (stages == 1 && first_blocks.empty()) {
    p.first_block = {0};
  } else if (first_blocks.empty()) {
    p.first_block = balance(block_cost, stages, head, tail);
  } else {
    if (static_cast<int>(first_blocks.size()) != stages - 1)
      TS_THROW("pipeline: 'stages' lists ", first_blocks.size(), " boundaries; ", stages,
               " stages need ", stages - 1);
    p.first_block = {0};
    for (int b : first_blocks) {
      if (b <= p.first_block.back() || b >= p.blocks)
        TS_THROW("pipeline: stage boundary ", b, " must be greater than ", p.first_block.back(),
                 " and less than the block count ", p.blocks);
      p.first_block.push_back(b);
    }
  }
  auto stage_of_block = [&](int b) {
    if (b < 0) return 0;
    if (b >= p.blocks) return stages - 1;
    return static_cast<int>(std::upper_bound(p.first_block.begin(), p.first_block.end(), b) -
                            p.first_block.begin()) -
           1;
  };
  p.stage_of_node.assign(forward.size(), -1);
  p.predicted_seconds.assign(stages, 0);
  p.flops.assign(stages, 0);
  for (ValueId id = 0; id < forward.size(); ++id) {
    if (is_leaf(forward.node(id))) continue;
    int s = stage_of_block(owner[id]);
    p.stage_of_node[id] = s;
    p.predicted_seconds[s] += kForwardAndBackward * nominal_node_seconds(forward, id);
    p.flops[s] += forward.node_flops(id);
  }
  return p;
}

namespace {

std::string act_name(ValueId id) { return kPipeActivationPrefix + std::to_string(id); }

// Forward of every stage: nodes copied in order, cross-stage reads turned
// into "pipe.act" inputs (and the producer's activations_out).
std::vector<StageGraph> split_forward(const Graph& forward, ValueId loss,
                                      std::optional<ValueId> logits, const StagePartition& p) {
  std::vector<StageGraph> stages(p.stages);
  std::vector<std::vector<ValueId>> map(p.stages, std::vector<ValueId>(forward.size(), -1));
  std::vector<std::set<ValueId>> sent(p.stages);
  for (int s = 0; s < p.stages; ++s) stages[s].stage = s;
  for (ValueId id = 0; id < forward.size(); ++id) {
    const Node& node = forward.node(id);
    if (is_leaf(node)) continue;
    const int s = p.stage_of_node[id];
    Graph& g = stages[s].graph;
    for (ValueId in : node.inputs) {
      if (map[s][in] >= 0) continue;
      const Node& source = forward.node(in);
      if (is_leaf(source)) {
        map[s][in] = copy_node(g, source, map[s]);
        continue;
      }
      const int from = p.stage_of_node[in];
      if (from != s - 1)
        TS_THROW("pipeline: '", source.name, "' is produced on stage ", from, " and read on stage ",
                 s, " ('", node.name, "'); values may only cross to the next stage");
      map[s][in] = g.add_input(act_name(in), source.shape, source.dtype);
      stages[s].activations_in.push_back(map[s][in]);
      sent[from].insert(in);
    }
    map[s][id] = copy_node(g, node, map[s]);
  }
  for (int s = 0; s < p.stages; ++s)
    for (ValueId v : sent[s]) {  // std::set: forward-graph order
      stages[s].activations_out.push_back(map[s][v]);
      stages[s].out_names.push_back(act_name(v));
    }
  if (logits) {
    TS_CHECK(map.back()[*logits] >= 0, "pipeline: the logits are not on the last stage");
    stages.back().logits = map.back()[*logits];
  }
  TS_CHECK(map.back()[loss] >= 0, "pipeline: the loss is not on the last stage");
  stages.back().loss = map.back()[loss];
  return stages;
}

// Appends the stage's backward, then reorders the graph into forward,
// backward-input and backward-weight phases.
void add_backward(StageGraph& st, const StageGraphOptions& options) {
  Graph& g = st.graph;
  const int forward_end = g.size();
  GraphBuilder b(g);
  ValueId objective = -1;
  std::vector<ValueId> seeds;
  if (st.loss) {
    objective =
        options.microbatches > 1
            ? b.scale(*st.loss, 1.0f / static_cast<float>(options.microbatches), "pipe.loss_share")
            : *st.loss;
  } else {
    for (size_t i = 0; i < st.activations_out.size(); ++i) {
      ValueId out = st.activations_out[i];
      const Shape shape = g.node(out).shape;
      std::string suffix = st.out_names[i].substr(kPipeActivationPrefix.size());
      ValueId seed = b.input(kPipeGradientPrefix + suffix, shape, DType::kF32);
      seeds.push_back(seed);
      ValueId term =
          b.reduce_sum(b.mul(out, seed, "pipe.surrogate"), shape.names(), "pipe.surrogate_sum");
      objective = objective < 0 ? term : b.add(objective, term, "pipe.surrogate_total");
    }
  }
  std::vector<ValueId> wrt = g.params();
  wrt.insert(wrt.end(), st.activations_in.begin(), st.activations_in.end());
  std::map<ValueId, ValueId> grads = build_backward(b, objective, wrt);

  std::vector<ValueId> remap(g.size());
  for (ValueId id = 0; id < g.size(); ++id) remap[id] = id;
  Graph source = std::move(g);
  if (const RecomputePolicy policy = RecomputePolicy::parse(options.recompute); !policy.none()) {
    RecomputeResult r = recompute_segments(source, forward_end, policy.segments());
    source = std::move(r.graph);
    remap = std::move(r.remap);
  }
  auto mapped = [&](ValueId v) { return remap[v]; };
  std::vector<ValueId> input_grads, param_grads;
  for (ValueId a : st.activations_in) input_grads.push_back(mapped(grads.at(a)));
  // Parameter gradients in the order of the source graph's parameters.
  std::map<std::string, ValueId> grad_of_param;
  for (const auto& [v, grad] : grads) {
    const Node& n = source.node(mapped(v));
    if (n.kind == OpKind::kParam) grad_of_param[n.name] = mapped(grad);
  }

  // Phases: forward nodes, then the ancestors of the input gradients, then
  // everything else the parameter gradients need (unsplit: one backward
  // phase, in autodiff order).
  const int n = source.size();
  const ValueId backward_start = mapped(forward_end - 1) + 1;
  std::vector<int> phase(n, -1);  // 0 forward, 1 backward-input, 2 backward-weight
  std::vector<ValueId> all_grads = input_grads;
  for (const auto& [name, grad] : grad_of_param) all_grads.push_back(grad);
  const std::vector<bool> needed = ancestors(source, all_grads);
  const std::vector<bool> feeds_input_grad = ancestors(source, input_grads);
  for (ValueId id = 0; id < n; ++id) {
    if (is_leaf(source.node(id))) continue;
    if (id < backward_start)
      phase[id] = 0;
    else if (needed[id])
      phase[id] = feeds_input_grad[id] || !options.split_weight_phase ? 1 : 2;
  }

  Graph out;
  std::vector<ValueId> to_out(n, -1);
  for (ValueId id = 0; id < n; ++id)
    if (is_leaf(source.node(id))) to_out[id] = copy_node(out, source.node(id), to_out);
  ValueId starts[3] = {0, 0, 0};
  for (int ph = 0; ph < 3; ++ph) {
    starts[ph] = out.size();
    for (ValueId id = 0; id < n; ++id)
      if (phase[id] == ph) to_out[id] = copy_node(out, source.node(id), to_out);
  }
  st.backward_input_begin = starts[1];
  st.backward_weight_begin = starts[2];
  auto final_id = [&](ValueId original) { return to_out[mapped(original)]; };
  for (ValueId& v : st.activations_in) v = final_id(v);
  for (ValueId& v : st.activations_out) v = final_id(v);
  for (ValueId s : seeds) st.gradients_in.push_back(final_id(s));
  for (ValueId v : input_grads) st.gradients_out.push_back(to_out[v]);
  if (st.loss) st.loss = final_id(*st.loss);
  for (ValueId p : out.params())
    st.param_grads.push_back(to_out[grad_of_param.at(out.node(p).name)]);
  st.graph = std::move(out);
}

}  // namespace

std::vector<StageGraph> build_stage_graphs(const Graph& forward, ValueId loss,
                                           const StagePartition& partition,
                                           const StageGraphOptions& options,
                                           std::optional<ValueId> logits) {
  TS_CHECK(!logits || !options.backward, "pipeline: logits are exposed by forward-only graphs");
  std::vector<StageGraph> stages = split_forward(forward, loss, logits, partition);
  for (StageGraph& st : stages) {
    if (options.backward)
      add_backward(st, options);
    else
      st.backward_input_begin = st.backward_weight_begin = st.graph.size();
  }
  return stages;
}

}  // namespace tessel
