// A runnable walkthrough of Tessel's data path (docs/architecture.md).
//
// Builds a tiny classifier with GraphBuilder and named dims, adds its
// backward, prints the global graph, lowers it to rank 0 of the mesh
// data=2,model=2 under the layout batch=data,hidden=model,vocab=model and
// prints every value's sharding and the collectives the lowering inserted,
// then compiles rank 0's program plan-only and prints its static memory plan.
// Nothing is allocated and no MPI is used: every step is the offline half of
// what compile_rank() does for a real model. Exits non-zero (the ctest
// `walkthrough` fails) if the lowering inserts no collective or the memory
// plan overlaps two live buffers.
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "tessel/autodiff/backward.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/op.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/lower.h"
#include "tessel/sharding/mesh.h"

using namespace tessel;

int main() try {
  // 1. Build: a 2-layer MLP classifier over named dims.
  Graph graph;
  GraphBuilder b(graph);
  const Dim batch{"batch", 8}, embed{"embed", 4}, hidden{"hidden", 8}, vocab{"vocab", 4};
  ValueId x = b.input("x", Shape{batch, embed});
  ValueId labels = b.input("labels", Shape{batch}, DType::kI32);
  ValueId w1 = b.param("w1", Shape{embed, hidden});
  ValueId b1 = b.param("b1", Shape{hidden}, ParamInit{ParamInit::kZeros});
  ValueId w2 = b.param("w2", Shape{hidden, vocab});
  ValueId h = b.bias_gelu(b.einsum(x, w1, {"batch", "hidden"}, "fc"), b1, "act");
  ValueId logits = b.einsum(h, w2, {"batch", "vocab"}, "logits");
  ValueId loss = b.cross_entropy(logits, labels, "vocab", "loss");

  // 2. Autodiff: one gradient per parameter, appended to the same graph.
  std::map<ValueId, ValueId> grads = build_backward(b, loss, graph.params());
  std::vector<ValueId> outputs = {loss};
  for (ValueId p : graph.params()) outputs.push_back(grads.at(p));
  std::printf("== global graph (%d values; loss %%%d, gradients after it)\n%s\n", graph.size(),
              loss, graph.to_string().c_str());

  // 3. Lower to rank 0 of a 2-axis mesh.
  const Mesh mesh = Mesh::parse("data=2,model=2");
  const Layout layout = Layout::parse("batch=data,hidden=model,vocab=model", mesh);
  layout.validate(graph, mesh);
  LoweringOptions lowering;
  lowering.phase_boundary = loss;
  const int rank = 0;
  LocalGraph local = lower_to_rank(graph, outputs, mesh, layout, rank, lowering);
  std::printf("== lowering on mesh %s, layout %s, rank %d\n", mesh.to_string().c_str(),
              layout.to_string().c_str(), rank);
  std::printf("-- sharding of each global value (one placement per mesh axis)\n");
  for (ValueId v = 0; v < graph.size(); ++v) {
    if (local.first_local_of[v] < 0) continue;
    const Node& n = graph.node(v);
    std::printf("%%%-3d %-22s %-28s -> local %%%d\n", v, n.name.c_str(),
                local.sharding_of[v].to_string().c_str(), local.local_of[v]);
  }
  std::printf("-- collectives the lowering inserted\n");
  for (const InsertedCollective& c : local.collectives)
    std::printf("local %%%-3d %-14s on %-5s %s: %s -> %s (%s), %.0f bytes sent\n", c.local,
                op_name(c.op), c.axis.c_str(), c.value.c_str(), c.from.c_str(), c.to.c_str(),
                c.reason.c_str(), c.bytes);
  std::printf("\n== rank %d's local graph\n%s\n", rank, local.graph.to_string().c_str());

  // 4. Program and memory plan, plan-only: nothing is allocated.
  std::vector<ValueId> local_outputs;
  for (ValueId v : outputs) local_outputs.push_back(local.local_of[v]);
  CompileOptions options;
  options.plan_only = true;
  Program program(local.graph, local_outputs, options);
  const std::vector<BufferRequest>& requests = program.buffer_requests();
  const MemoryPlan& plan = program.memory_plan();
  std::printf("== memory plan of rank %d (plan only): %zu buffers, arena %zu bytes\n", rank,
              requests.size(), program.arena_bytes());
  std::printf("buffer  bytes  live [first, last]  offset\n");
  for (size_t i = 0; i < requests.size(); ++i)
    std::printf("%6zu %6zu  [%4d, %4d]        %6zu\n", i, requests[i].bytes, requests[i].first,
                requests[i].last, plan.offsets[i]);
  const std::string conflict = find_plan_conflict(requests, plan);
  if (!conflict.empty() || local.collectives.empty()) {
    std::fprintf(stderr, "walkthrough: %s\n",
                 conflict.empty() ? "the lowering inserted no collective" : conflict.c_str());
    return 1;
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "walkthrough: %s\n", e.what());
  return 1;
}
