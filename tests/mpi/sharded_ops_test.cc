// The op harness, sharded: every op case (tests/common/op_cases.h) on the
// 1-D mesh x=N (N = 2 on 2 ranks, 4 on 4 ranks; other world sizes skip) with
// each dim of its graph that N divides laid out on x (layout `<dim>=x`),
// against the same case run in one process.
//
// Forward, loss and backward are built exactly as the single-process harness
// builds them, lowered for this rank (lower_to_rank), compiled on the rank's
// communicators and fed this rank's block of the same parameter and input
// values. The op's output, the loss and every gradient are gathered back to
// full tensors and compared with the one-process program (fast kernels), with
// one tolerance for every case; attention cases with `seq` split run twice,
// by all-to-all and, where 2N divides seq and kseq, as ring attention. Both
// case lists run: the harness's odd sizes (only the dims N divides) and
// their twins with every size a multiple of 4.
// The dims split on each op of the local graphs are recorded; every op kind
// of the cases' graphs (forward and gradient ops; leaves and collectives
// aside) must have run split at least once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/op_cases.h"
#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/compile/distributed.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/lower.h"

namespace tessel {
namespace {

// |sharded - single| <= kRtol * max(|sharded|, |single|) + kAtol * max |single|.
constexpr double kRtol = 1e-5;
constexpr double kAtol = 1e-6;

struct Coverage {
  std::set<OpKind> kinds;                              // in the cases' global graphs
  std::map<OpKind, std::set<std::string>> split_dims;  // dims seen split on local nodes
  int runs = 0;
  int ring_runs = 0;  // attention cases run as ring attention
};

bool is_leaf(OpKind k) { return k == OpKind::kInput || k == OpKind::kParam || k == OpKind::kFill; }
bool is_collective(OpKind k) { return k >= OpKind::kShardSlice && k < OpKind::kCount; }

// Dims of `g` (first-seen order) whose every occurrence divides by n.
std::vector<std::string> divisible_dims(const Graph& g, int n) {
  std::vector<std::string> order;
  std::set<std::string> bad;
  for (const Node& node : g.nodes())
    for (const Dim& d : node.shape.dims()) {
      if (std::find(order.begin(), order.end(), d.name) == order.end()) order.push_back(d.name);
      if (d.size % n != 0) bad.insert(d.name);
    }
  std::vector<std::string> result;
  for (const std::string& d : order)
    if (!bad.count(d)) result.push_back(d);
  return result;
}

// Records, per op of the local graph, the dims held smaller than globally.
void record_splits(const Graph& global, const Graph& local, Coverage& cov) {
  std::map<std::string, int64_t> size;
  for (const Node& node : global.nodes())
    for (const Dim& d : node.shape.dims()) size[d.name] = std::max(size[d.name], d.size);
  for (const Node& node : local.nodes()) {
    if (is_leaf(node.kind) || is_collective(node.kind)) continue;
    std::vector<const Shape*> shapes = {&node.shape};
    for (ValueId in : node.inputs) shapes.push_back(&local.node(in).shape);
    for (const Shape* s : shapes)
      for (const Dim& d : s->dims())
        if (size.count(d.name) && d.size < size[d.name]) cov.split_dims[node.kind].insert(d.name);
  }
}

// The one-process results of a case: op output, loss and gradients.
struct Reference {
  std::vector<ValueId> outputs;
  std::vector<std::vector<float>> values;  // per output
};

Reference run_one_process(Harness& h) {
  Reference ref;
  ref.outputs = {h.out, h.loss};
  ref.outputs.insert(ref.outputs.end(), h.grads.begin(), h.grads.end());
  Program program(h.graph, ref.outputs);
  auto params = h.param_values;
  feed_harness(h, program, params);
  program.run();
  for (ValueId v : ref.outputs) {
    ref.values.push_back(program.read_f32(v));
  }
  return ref;
}

// Runs one case with `dim` laid out on axis x and compares with `ref`. Every
// rank calls it with the same arguments: lowering is pure and alike on every
// rank, so a throw there (caught below) skips no collective.
// `ring`: fused attention with a split query dim runs as ring attention
// (context parallelism) instead of by all-to-all.
void run_sharded(DistributedContext& ctx, const std::string& case_name, Harness& h,
                 const Reference& ref, const std::string& dim, Coverage& cov, bool ring = false) {
  const std::string where = case_name + " with " + dim + "=x on " + ctx.mesh().to_string() +
                            (ring ? " (ring attention)" : "");
  const Mesh& mesh = ctx.mesh();
  LocalGraph lg;
  std::unique_ptr<Program> program;
  std::map<std::string, std::vector<float>> local_params;
  try {
    Layout layout = Layout::parse(dim + "=x", mesh);
    if (ring) layout.set_context_parallel(ContextParallel::kRing);
    layout.validate(h.graph, mesh);
    lg = lower_to_rank(h.graph, ref.outputs, mesh, layout, ctx.rank());
    std::vector<ValueId> local_outputs;
    for (ValueId v : ref.outputs) local_outputs.push_back(lg.local_of.at(v));
    program =
        std::make_unique<Program>(lg.graph, local_outputs, CompileOptions{.comms = &ctx.groups()});
  } catch (const Error& e) {
    ADD_FAILURE() << where << ": " << e.what();
    return;
  }
  record_splits(h.graph, lg.graph, cov);
  ++cov.runs;
  if (ring) {  // the lowering made ring attention ops (marked with their axis)
    bool marked = false;
    for (const Node& node : lg.graph.nodes())
      marked |= node.kind == OpKind::kAttentionGrad && node.attrs.axis == "x";
    EXPECT_TRUE(marked) << where << ": no ring attention in the local graph";
    cov.ring_runs += marked;
  }

  // This rank's block of every parameter and input.
  for (ValueId p : h.graph.params()) {
    const Node& n = h.graph.node(p);
    std::vector<float>& local = local_params[n.name];
    local.resize(lg.sharding_of[p].local_shape(n.shape, mesh).numel());
    ctx.slice_local(n.shape, lg.sharding_of[p], h.param_values.at(n.name).data(), local.data());
    program->bind_param(n.name, local.data());
  }
  for (ValueId id : h.graph.inputs()) {
    const Node& n = h.graph.node(id);
    const Sharding& s = lg.sharding_of[id];
    std::vector<float> full, local(s.local_shape(n.shape, mesh).numel());
    if (n.dtype == DType::kI32) {
      const std::vector<int32_t>& ints = h.int_inputs.at(n.name);
      full.assign(ints.begin(), ints.end());  // small ids: exact as floats
      ctx.slice_local(n.shape, s, full.data(), local.data());
      const std::vector<int32_t> ids(local.begin(), local.end());
      program->write_input(n.name, ids.data(), ids.size() * sizeof(int32_t));
    } else {
      ctx.slice_local(n.shape, s, h.weights.data(), local.data());
      program->write_input(n.name, local.data(), local.size() * sizeof(float));
    }
  }
  program->run();

  for (size_t o = 0; o < ref.outputs.size(); ++o) {
    const ValueId v = ref.outputs[o];
    const Node& n = h.graph.node(v);
    const Sharding& s = lg.sharding_of[v];
    bool partial = false;
    for (const Placement& p : s.placements()) partial |= p.is_partial();
    if (partial) {  // alike on every rank: skipping the gather is safe
      ADD_FAILURE() << where << ": output " << n.name << " left " << s.to_string();
      continue;
    }
    std::vector<float> full(n.shape.numel());
    ctx.gather_full(n.shape, s, program->read_f32(lg.local_of[v]).data(), full.data());
    const std::vector<float>& want = ref.values[o];
    double max_abs = 0;
    for (float x : want) max_abs = std::max(max_abs, std::abs(static_cast<double>(x)));
    int bad = 0;
    for (size_t e = 0; e < full.size(); ++e) {
      const double a = full[e], b = want[e];
      if (std::abs(a - b) <= kRtol * std::max(std::abs(a), std::abs(b)) + kAtol * max_abs) continue;
      if (bad++ == 0)
        ADD_FAILURE() << where << ": "
                      << (o == 0   ? "output"
                          : o == 1 ? "loss"
                                   : "gradient")
                      << " %" << v << " (" << n.name << ") element " << e << ": sharded " << a
                      << " vs one process " << b << " (sharding " << s.to_string() << ")";
    }
    if (bad > 1) ADD_FAILURE() << where << ": " << bad << " elements of " << n.name << " differ";
  }
}

void run_all_cases(DistributedContext& ctx) {
  const int n = ctx.mesh().axis(0).size;
  Coverage cov;
  for (const std::vector<OpCase>& cases : {op_cases(), shardable_op_cases()})
    for (const OpCase& c : cases) {
      Harness h = make_harness(c);
      for (const Node& node : h.graph.nodes()) cov.kinds.insert(node.kind);
      Reference ref = run_one_process(h);
      bool attention = false;
      for (const Node& node : h.graph.nodes()) attention |= node.kind == OpKind::kAttention;
      for (const std::string& dim : divisible_dims(h.graph, n)) {
        run_sharded(ctx, c.name, h, ref, dim, cov);
        // The ring cuts queries and keys into 2n halves (load balancing).
        const std::vector<std::string> dims = divisible_dims(h.graph, 2 * n);
        const bool halves = std::find(dims.begin(), dims.end(), "seq") != dims.end() &&
                            std::find(dims.begin(), dims.end(), "kseq") != dims.end();
        if (attention && dim == "seq" && halves) {
          run_sharded(ctx, c.name, h, ref, dim, cov, /*ring=*/true);
        }
      }
    }
  EXPECT_GT(cov.runs, 100);
  EXPECT_GE(cov.ring_runs, 1) << "ring attention never ran";
  // Every op kind of the cases' graphs ran split at least once.
  std::string summary;
  for (OpKind kind : cov.kinds) {
    if (is_leaf(kind) || is_collective(kind)) continue;
    const std::set<std::string>& dims = cov.split_dims[kind];
    EXPECT_FALSE(dims.empty()) << op_name(kind) << " never ran with a split dim on "
                               << ctx.mesh().to_string();
    summary += std::string("  ") + op_name(kind) + ":";
    for (const std::string& d : dims) summary += " " + d;
    summary += "\n";
  }
  if (ctx.is_root())
    std::printf("%d sharded runs on %s; dims split per op:\n%s", cov.runs,
                ctx.mesh().to_string().c_str(), summary.c_str());
}

int world_size() { return MpiRuntime::instance().world_size(); }

TEST(ShardedOps, MatchOneProcessOnX2) {
  if (world_size() != 2) GTEST_SKIP() << "mesh x=2 needs 2 ranks";
  DistributedContext ctx("x=2", "");
  run_all_cases(ctx);
}

TEST(ShardedOps, MatchOneProcessOnX4) {
  if (world_size() != 4) GTEST_SKIP() << "mesh x=4 needs 4 ranks";
  DistributedContext ctx("x=4", "");
  run_all_cases(ctx);
}

}  // namespace
}  // namespace tessel
