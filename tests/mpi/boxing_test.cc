// Boxing executed for real under mpirun: every row of the transition table
// (boxing.h) on the 1-D meshes x=2 and x=4, every pair of shardings of the
// 2-D meshes x=2,y=2 and x=2,y=4 (nested splits of one dim included), and
// the conversions the table rejects.
//
// A global tensor T (a=4, b=8, c=12) holds its own flat index, so every value
// is exact in float. Each rank builds a local graph by hand: an input holding
// its block of T under `from` (for P(sum) either T/n on every coordinate or T
// on coordinate 0 and zeros elsewhere; for P(max) T on the coordinate that
// owns each element and something smaller elsewhere), then the nodes
// emit_boxing (the lowering's own boxing) appends for `to`. The program runs
// on the DistributedContext's communicators; each rank checks its block of T
// under `to` exactly (a P(sum) target: the documented addend, and its sum
// over the axis), and the collectives counted by the communicators against
// the plan. A mesh that does not match the world size is skipped on every
// rank alike, so collectives stay matched.
#include "tessel/sharding/boxing.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/compile/distributed.h"
#include "tessel/ir/graph.h"
#include "tessel/runtime/program.h"
#include "tessel/sharding/lower.h"

namespace tessel {
namespace {

const Shape kGlobal{{"a", 4}, {"b", 8}, {"c", 12}};
const std::vector<std::string> kDims = {"a", "b", "c"};

Placement S(const std::string& d) { return Placement::split(d); }
Placement B() { return Placement::broadcast(); }
Placement P() { return Placement::partial_sum(); }
Placement Pmax() { return Placement::partial_max(); }

// How the addends of a P(sum) input are spread over the axis.
enum class Addends { kEven, kRoot };  // T/n on every coordinate; T on coordinate 0

int world_size() { return MpiRuntime::instance().world_size(); }

// `s` with every partial placement replaced by B: the block a rank holds.
Sharding without_partials(const Sharding& s) {
  Sharding r = s;
  for (int a = 0; a < s.axis_count(); ++a)
    if (s[a].is_partial()) r = r.with(a, B());
  return r;
}

// This rank's block of T under `s`, with partial axes turned into addends.
// `created`: axes on which the partial was made by the boxing (B -> P keeps
// the value on coordinate 0) rather than given as input.
std::vector<float> local_value(DistributedContext& ctx, const Sharding& s, Addends addends,
                               const std::vector<bool>& created) {
  std::vector<float> full(kGlobal.numel());
  for (size_t e = 0; e < full.size(); ++e) full[e] = static_cast<float>(e);
  const Sharding block = without_partials(s);
  std::vector<float> local(block.local_shape(kGlobal, ctx.mesh()).numel());
  ctx.slice_local(kGlobal, block, full.data(), local.data());
  for (int a = 0; a < s.axis_count(); ++a) {
    const int n = ctx.mesh().axis(a).size;
    const int me = ctx.coords()[a];
    for (float& v : local) {
      if (s[a].kind == Placement::kPartialMax) {
        // The coordinate that owns element g (g % n) holds it; others less.
        // Adjustments of several axes only subtract, so the max is still T.
        const int g = static_cast<int>(v);
        if (g % n != me) v -= static_cast<float>(1 + me);
      } else if (s[a].kind == Placement::kPartialSum) {
        if (created[a] || addends == Addends::kRoot)
          v = me == 0 ? v : 0.0f;
        else
          v /= static_cast<float>(n);  // n is a power of two: exact
      }
    }
  }
  return local;
}

struct Outcome {
  std::vector<OpKind> ops;  // the plan's ops, in order
};

// Runs from -> to on this rank and checks the result and the counted
// collectives. Every rank calls it with the same arguments.
Outcome run_boxing(DistributedContext& ctx, const Sharding& from, const Sharding& to,
                   Addends addends, bool overlap = false) {
  const std::string what = from.to_string() + " -> " + to.to_string() + " on " +
                           ctx.mesh().to_string() +
                           (addends == Addends::kRoot ? " (addends: T on coordinate 0)" : "") +
                           (overlap ? " (overlapped)" : "");
  SCOPED_TRACE(what);
  Outcome outcome;
  const Mesh& mesh = ctx.mesh();
  Graph g;
  ValueId in = g.add_input("t", from.local_shape(kGlobal, mesh), DType::kF32);
  std::vector<EmittedTransition> emitted;
  ValueId out = emit_boxing(g, in, kGlobal, "t", from, to, mesh, ctx.coords(), overlap, &emitted);
  for (const EmittedTransition& e : emitted) outcome.ops.push_back(e.transition.op);
  EXPECT_EQ(g.node(out).shape, to.local_shape(kGlobal, mesh));

  // What the communicators should count: per transition that communicates,
  // one call on its axis, of the bytes the rank holds before it (the
  // Communicator's definition; Transition::bytes is the cost model's).
  CommStats want;
  Sharding before = from;
  for (const EmittedTransition& e : emitted) {
    const Transition& t = e.transition;
    if (t.op != OpKind::kShardSlice && t.op != OpKind::kZeroUnlessRoot) {
      CollectiveCount& c = want[mesh.axis(t.axis).name][op_name(t.op)];
      c.calls += 1;
      c.bytes += before.local_shape(kGlobal, mesh).numel() * 4;
    }
    before = t.after;
  }
  EXPECT_TRUE(before == to) << "the plan ends at " << before.to_string();

  Program program(g, {out}, CompileOptions{.comms = &ctx.groups()});
  std::vector<float> input = local_value(ctx, from, addends, std::vector<bool>(3, false));
  program.write_input("t", input.data(), input.size() * sizeof(float));
  ctx.reset_stats();
  program.run();

  CommStats got = ctx.stats();
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [axis, kinds] : want)
    for (const auto& [kind, count] : kinds) {
      auto a = got.find(axis);
      if (a == got.end() || !a->second.count(kind)) {
        ADD_FAILURE() << "no " << kind << " counted on axis " << axis;
        continue;
      }
      EXPECT_EQ(a->second.at(kind).calls, count.calls) << kind << " on " << axis;
      EXPECT_EQ(a->second.at(kind).bytes, count.bytes) << kind << " on " << axis;
    }
  for (const auto& [axis, kinds] : got)
    for (const auto& [kind, count] : kinds)
      EXPECT_TRUE(want.count(axis) && want.at(axis).count(kind))
          << "unexpected " << kind << " on axis " << axis;

  // The exact addend this rank must hold.
  std::vector<bool> created(to.axis_count());
  for (int a = 0; a < to.axis_count(); ++a) created[a] = !(from[a] == to[a]);
  std::vector<float> expected = local_value(ctx, to, addends, created);
  const std::vector<float> result = program.read_f32(out);
  for (size_t e = 0; e < expected.size(); ++e)
    if (result[e] != expected[e]) {
      ADD_FAILURE() << "rank " << ctx.rank() << " element " << e << ": " << result[e] << ", want "
                    << expected[e];
      break;
    }
  // A P(sum) target: the addends sum to the block over each partial axis.
  std::vector<float> summed(result.begin(), result.begin() + expected.size());
  bool partial = false;
  for (int a = 0; a < to.axis_count(); ++a) {
    if (to[a].kind != Placement::kPartialSum) continue;
    partial = true;
    ctx.groups()
        .axis(mesh.axis(a).name)
        .all_reduce(summed.data(), static_cast<int64_t>(summed.size()), ReduceKind::kSum,
                    "check_sum");
  }
  if (partial) {
    std::vector<float> block = local_value(ctx, without_partials(to), addends, created);
    for (size_t e = 0; e < block.size(); ++e)
      if (summed[e] != block[e]) {
        ADD_FAILURE() << "rank " << ctx.rank() << " element " << e << " sums to " << summed[e]
                      << ", want " << block[e];
        break;
      }
  }
  return outcome;
}

std::string ops_string(const std::vector<OpKind>& ops) {
  std::string s;
  for (OpKind k : ops) s += std::string(s.empty() ? "" : ",") + op_name(k);
  return s;
}

// The rows of the table on a 1-D mesh, each with the ops it must plan.
void check_one_dim_rows(DistributedContext& ctx) {
  struct Row {
    Placement from, to;
    std::vector<OpKind> ops;
  };
  std::vector<Row> rows;
  rows.push_back({P(), B(), {OpKind::kAllReduce}});
  rows.push_back({Pmax(), B(), {OpKind::kAllReduce}});
  rows.push_back({B(), P(), {OpKind::kZeroUnlessRoot}});
  for (const std::string& d : kDims) {
    rows.push_back({P(), S(d), {OpKind::kReduceScatter}});
    rows.push_back({S(d), B(), {OpKind::kAllGather}});
    rows.push_back({B(), S(d), {OpKind::kShardSlice}});
    rows.push_back({S(d), P(), {OpKind::kAllGather, OpKind::kZeroUnlessRoot}});
    for (const std::string& e : kDims)
      if (e != d) rows.push_back({S(d), S(e), {OpKind::kAllToAll}});
  }
  for (const Row& row : rows) {
    const Sharding from({row.from}), to({row.to});
    std::vector<Addends> schemes = {Addends::kEven};
    if (row.from.kind == Placement::kPartialSum) schemes.push_back(Addends::kRoot);
    for (Addends addends : schemes) {
      Outcome o = run_boxing(ctx, from, to, addends);
      EXPECT_EQ(ops_string(o.ops), ops_string(row.ops))
          << from.to_string() << " -> " << to.to_string();
    }
  }
  // A gradient's all-reduce may be bucketed and overlapped: same result.
  Outcome o = run_boxing(ctx, Sharding({P()}), Sharding({B()}), Addends::kEven, true);
  EXPECT_EQ(ops_string(o.ops), "all_reduce");
}

TEST(Boxing, OneDimMeshX2) {
  if (world_size() != 2) GTEST_SKIP() << "mesh x=2 needs 2 ranks";
  DistributedContext ctx("x=2", "");
  check_one_dim_rows(ctx);
}

TEST(Boxing, OneDimMeshX4) {
  if (world_size() != 4) GTEST_SKIP() << "mesh x=4 needs 4 ranks";
  DistributedContext ctx("x=4", "");
  check_one_dim_rows(ctx);
}

// Every pair of 2-D shardings over {B, S(a), S(b), S(c), P(sum)} per axis,
// and a dim split on both axes (nested, placement.h), so each row of the
// table runs with every placement on the other axis, and both axes change at
// once. Moving two dims across the axes in a cycle ([S(d), S(e)] ->
// [S(e), S(d)]) has no plan, nor has a step that would split a dim outside
// a later axis's split of it, or unsplit it inside one ([S(a), S(c)] ->
// [S(c), S(c)]: axis x would cut c outside y's cut). The conversions of
// all-to-all context parallelism beside tensor parallelism must plan (b=8
// is the dim both meshes can cut twice).
void check_two_dim_pairs(DistributedContext& ctx) {
  std::vector<Placement> per_axis = {B(), S("a"), S("b"), S("c"), P()};
  std::vector<Sharding> shardings;
  for (const Placement& x : per_axis)
    for (const Placement& y : per_axis) {
      const Sharding s({x, y});
      const int64_t cut = x.is_split() && x == y ? ctx.mesh().rank_count() : 1;
      if (cut == 1 || kGlobal.size(x.dim) % cut == 0) shardings.push_back(s);  // a=4 on 2 x 4: no
    }
  int ran = 0, rejected = 0, out_of_order = 0;
  std::set<std::string> planned;
  for (const Sharding& from : shardings)
    for (const Sharding& to : shardings) {
      if (from == to) continue;
      const bool nested =
          (from[0].is_split() && from[0] == from[1]) || (to[0].is_split() && to[0] == to[1]);
      const bool cycle = !nested && from[0].is_split() && from[1].is_split() && to[0] == from[1] &&
                         to[1] == from[0];
      std::string msg;
      try {
        plan_boxing(kGlobal, from, to, ctx.mesh());
      } catch (const Error& e) {
        msg = e.what();
      }
      if (!msg.empty()) {  // planning is pure and alike on every rank
        EXPECT_NE(msg.find("two axes out of mesh order"), std::string::npos)
            << from.to_string() << " -> " << to.to_string() << ": " << msg;
        ++(nested ? out_of_order : rejected);
        continue;
      }
      EXPECT_FALSE(cycle) << from.to_string() << " -> " << to.to_string() << " planned";
      EXPECT_NO_THROW({
        run_boxing(ctx, from, to, Addends::kEven);
        if (from[0].is_partial() || from[1].is_partial()) run_boxing(ctx, from, to, Addends::kRoot);
      }) << from.to_string()
         << " -> " << to.to_string();
      planned.insert(from.to_string() + " -> " + to.to_string());
      ++ran;
    }
  for (const char* needed :
       {"[S(b), S(c)] -> [S(b), S(b)]", "[S(b), S(b)] -> [S(b), S(c)]", "[S(b), B] -> [S(b), S(b)]",
        "[S(b), S(b)] -> [S(b), B]", "[S(b), S(b)] -> [B, B]", "[B, B] -> [S(b), S(b)]",
        "[S(b), P(sum)] -> [S(b), S(b)]", "[S(b), S(b)] -> [S(b), P(sum)]"})
    EXPECT_TRUE(planned.count(needed)) << needed << " has no plan";
  EXPECT_GT(out_of_order, 0);
  EXPECT_EQ(rejected, 6);  // (a,b), (a,c), (b,c), each way round
  EXPECT_GT(ran, 450);
  // P(max) -> B with the other axis changing too, or reduced as well.
  const std::vector<std::pair<Sharding, Sharding>> max_cases = {
      {Sharding({Pmax(), B()}), Sharding({B(), B()})},
      {Sharding({Pmax(), S("b")}), Sharding({B(), S("c")})},
      {Sharding({S("c"), Pmax()}), Sharding({B(), B()})},
      {Sharding({B(), Pmax()}), Sharding({S("a"), B()})},
      {Sharding({Pmax(), Pmax()}), Sharding({B(), B()})},
  };
  for (const auto& [from, to] : max_cases) run_boxing(ctx, from, to, Addends::kEven);
}

TEST(Boxing, TwoDimMeshX2Y2) {
  if (world_size() != 4) GTEST_SKIP() << "mesh x=2,y=2 needs 4 ranks";
  DistributedContext ctx("x=2,y=2", "");
  check_two_dim_pairs(ctx);
}

TEST(Boxing, TwoDimMeshX2Y4) {
  if (world_size() != 8) GTEST_SKIP() << "mesh x=2,y=4 needs 8 ranks";
  DistributedContext ctx("x=2,y=4", "");
  check_two_dim_pairs(ctx);
}

// The conversions the table rejects; pure planning, no communicator needed.
TEST(BoxingRejects, PartialMaxToSplit) {
  const Mesh mesh = Mesh::parse("x=2");
  std::string msg =
      error_of([&] { plan_boxing(kGlobal, Sharding({Pmax()}), Sharding({S("b")}), mesh); });
  EXPECT_NE(msg.find("P(max)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("S(b)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  // The same on the second axis of a 2-D mesh names that axis.
  msg = error_of([&] {
    plan_boxing(kGlobal, Sharding({B(), Pmax()}), Sharding({B(), S("a")}), Mesh::parse("x=2,y=2"));
  });
  EXPECT_NE(msg.find("P(max)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("S(a)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'y'"), std::string::npos) << msg;
}

TEST(BoxingRejects, UnevenSplit) {
  const Shape global{{"a", 4}, {"b", 6}, {"c", 8}};
  const Mesh mesh = Mesh::parse("x=4");
  std::string msg = error_of([&] { Sharding({S("b")}).local_shape(global, mesh); });
  EXPECT_NE(msg.find("b=6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  // Emitting a boxing into it fails as the slice node is added.
  msg = error_of([&] {
    Graph g;
    ValueId in = g.add_input("t", global, DType::kF32);
    emit_boxing(g, in, global, "t", Sharding({B()}), Sharding({S("b")}), mesh, {0});
  });
  EXPECT_NE(msg.find("b=6"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x' of size 4"), std::string::npos) << msg;
}

// A dim split on two axes is nested in mesh order: x cuts c=12 in halves,
// y each half in halves, so rank (x, y) holds c [6x + 3y, 6x + 3y + 3).
TEST(BoxingNested, LocalShapeAndOffsetsCutInMeshOrder) {
  const Mesh mesh = Mesh::parse("x=2,y=2");
  const Sharding s({S("c"), S("c")});
  EXPECT_EQ(s.local_shape(kGlobal, mesh), (Shape{{"a", 4}, {"b", 8}, {"c", 3}}));
  EXPECT_EQ(s.local_numel(kGlobal, mesh), 4 * 8 * 3);
  for (int x = 0; x < 2; ++x)
    for (int y = 0; y < 2; ++y)
      EXPECT_EQ(s.local_offsets(kGlobal, mesh, {x, y}),
                (std::vector<int64_t>{0, 0, 6 * x + 3 * y}));
  // a=4 cut by 2 leaves 2 rows, which y=4 does not divide: named with the piece.
  std::string msg = error_of([&] {
    Sharding({S("a"), S("a")}).local_shape(kGlobal, Mesh::parse("x=2,y=4"));
  });
  EXPECT_NE(msg.find("'y' of size 4 (its piece of 2"), std::string::npos) << msg;
}

TEST(BoxingRejects, SplitsOutOfMeshOrder) {
  const Mesh mesh = Mesh::parse("x=2,y=2");
  // x would cut c outside y's cut.
  std::string msg = error_of([&] {
    plan_boxing(kGlobal, Sharding({B(), S("c")}), Sharding({S("c"), S("c")}), mesh);
  });
  EXPECT_NE(msg.find("'c' would be split on two axes out of mesh order"), std::string::npos) << msg;
  // Inside x's cut, y may cut it: one local slice.
  const std::vector<Transition> inner =
      plan_boxing(kGlobal, Sharding({S("c"), B()}), Sharding({S("c"), S("c")}), mesh);
  ASSERT_EQ(inner.size(), 1u);
  EXPECT_EQ(inner[0].op, OpKind::kShardSlice);
  EXPECT_EQ(inner[0].axis, 1);
  // Two dims swapping axes: each all-to-all would split a dim the other axis
  // still holds.
  msg = error_of([&] {
    plan_boxing(kGlobal, Sharding({S("a"), S("c")}), Sharding({S("c"), S("a")}), mesh);
  });
  EXPECT_NE(msg.find("two axes out of mesh order"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel
