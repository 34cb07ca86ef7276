// The op harness's cases, shared by the single-process harness
// (tests/ir/op_harness_test.cc) and its sharded twin under mpirun
// (tests/mpi/sharded_ops_test.cc).
//
// Each case builds a small graph ending in one op; make_harness() adds
// loss = sum(out * R) for fixed random weights R, differentiates it and draws
// the parameter and input values (Philox, keyed by name and element index).
// op_cases() uses small odd sizes (3, 5, 7) that catch stride mix-ups;
// shardable_op_cases() builds the same graphs with every size a multiple of 4,
// so each dim can be split over a mesh axis of 2 or 4.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "tessel/ir/builder.h"
#include "tessel/ir/graph.h"
#include "tessel/runtime/program.h"

namespace tessel {

struct OpCase {
  std::string name;
  std::function<ValueId(GraphBuilder&)> build;
  std::map<std::string, int32_t> int_ranges = {};  // i32 input name -> values in [0, range)
  std::set<std::string> positive = {};             // params that must stay positive
};

// GoogleTest prints a parameter into the CTest name: the case name, not bytes.
inline void PrintTo(const OpCase& c, std::ostream* out) { *out << c.name; }

// The sizes of the dims the cases use.
struct OpCaseSizes {
  int64_t i = 3, j = 4, k = 5;  // the common dims
  int64_t n = 2;                // batch-like dims
  int64_t seq = 5;              // attention and causal softmax (seq = kseq)
  int64_t heads = 3, head = 4;  // attention
  int64_t x = 3, y = 2, z = 4;  // einsum_needs_permute
  int64_t h = 2, d = 3;         // contracted pairs; split/merge parts (e = h * d)
  int64_t table_vocab = 7;      // embedding
  int64_t logits_vocab = 6;     // cross-entropy
};

std::vector<OpCase> op_cases(const OpCaseSizes& sizes = {});
// op_cases() with every size a multiple of 4 and the case names suffixed "_x4".
std::vector<OpCase> shardable_op_cases();

struct Harness {
  Graph graph;
  ValueId out = -1, loss = -1;
  std::vector<ValueId> grads;  // one per graph.params(), in order
  std::map<std::string, std::vector<float>> param_values;
  std::map<std::string, std::vector<int32_t>> int_inputs;
  std::vector<float> weights;  // the input "harness.weights" (R)
};

Harness make_harness(const OpCase& c);

// Binds `params` (by name) and writes the harness's inputs into `p`.
void feed_harness(Harness& h, Program& p, std::map<std::string, std::vector<float>>& params);

}  // namespace tessel
