// Layouts resolved against a model: the defaults by axis name map only the
// dims the model has (an MLP on a `model` axis gets hidden=model), and a mesh
// axis no dim maps to is an error before any compute, naming the axis and the
// dims that could go there (`dp=2` would otherwise run the whole job on every
// rank). A `pipe` axis is the pipeline's, not the layout's.
#include "tessel/sharding/layout.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/compile/compile_rank.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/model_contract.h"
#include "tessel/runtime/program.h"

namespace tessel {
namespace {

TrainConfig mlp_layout_config(const std::string& mesh) {
  TrainConfig c;
  c.model = "mlp";
  c.data = "fashion-mnist";
  c.hidden = 64;
  c.batch = 8;
  c.mesh = mesh;
  return c;
}

TrainConfig gpt_layout_config(const std::string& mesh, const std::string& layout = "") {
  TrainConfig c = tiny_gpt_config(2, 8);
  c.mesh = mesh;
  c.layout = layout;
  return c;
}

std::string compile_error(const TrainConfig& c) {
  const Mesh mesh = Mesh::parse(c.mesh);
  return error_of([&] { compile_rank(c, mesh, layout_for(c, mesh), 0, CompileMode::kPlanOnly); });
}

TEST(LayoutAxes, AnAxisNoDimMapsToIsAnErrorNamingItAndTheModelsDims) {
  std::string e = compile_error(gpt_layout_config("dp=2"));
  EXPECT_NE(e.find("mesh axis 'dp' has no dim mapped to it"), std::string::npos) << e;
  EXPECT_NE(e.find("--layout batch=dp"), std::string::npos) << e;
  for (const char* dim : {"batch", "seq", "heads", "hidden", "vocab"})
    EXPECT_NE(e.find(dim), std::string::npos) << dim << " in " << e;

  e = compile_error(gpt_layout_config("tensor=2"));
  EXPECT_NE(e.find("mesh axis 'tensor' has no dim mapped to it"), std::string::npos) << e;

  // An explicit layout that leaves an axis out: the suggestion keeps it.
  e = compile_error(gpt_layout_config("data=2,model=2", "batch=data"));
  EXPECT_NE(e.find("mesh axis 'model' has no dim mapped to it"), std::string::npos) << e;
  EXPECT_NE(e.find("--layout batch=data,"), std::string::npos) << e;

  // The MLP on an axis with a name the defaults do not know.
  e = compile_error(mlp_layout_config("tp=2"));
  EXPECT_NE(e.find("mesh axis 'tp' has no dim mapped to it"), std::string::npos) << e;
  EXPECT_NE(e.find("hidden"), std::string::npos) << e;
}

TEST(LayoutAxes, MappedAxesAndThePipeAxisPass) {
  for (const auto& [mesh, layout] : std::vector<std::pair<std::string, std::string>>{
           {"data=2", ""},
           {"data=2,model=2", ""},
           {"dp=2", "batch=dp"},
           {"tensor=2", "heads=tensor,hidden=tensor,vocab=tensor"},
           {"pipe=2", ""},
           {"pipe=2,data=2", ""}}) {
    const TrainConfig c = gpt_layout_config(mesh, layout);
    const Mesh m = Mesh::parse(mesh);
    EXPECT_NO_THROW(compile_rank(c, m, layout_for(c, m), 0, CompileMode::kPlanOnly))
        << mesh << " " << layout;
  }
}

TEST(LayoutDefaults, TheModelAxisMapsOnlyTheDimsTheModelHas) {
  const TrainConfig c = mlp_layout_config("data=2,model=2");
  const Mesh mesh = Mesh::parse(c.mesh);
  const CompiledRank r = compile_rank(c, mesh, layout_for(c, mesh), 0, CompileMode::kPlanOnly);
  EXPECT_EQ(r.layout.to_string(), "batch=data,hidden=model");
  EXPECT_GE(r.layout.axis_of("hidden"), 0);
  EXPECT_LT(r.layout.axis_of("heads"), 0);
  // The GPT keeps every default.
  const TrainConfig g = gpt_layout_config("data=2,model=2");
  const CompiledRank gr = compile_rank(g, mesh, layout_for(g, mesh), 0, CompileMode::kPlanOnly);
  EXPECT_EQ(gr.layout.to_string(), "batch=data,heads=model,hidden=model,vocab=model");
}

// A model with none of the `model` axis's default dims (a user's own): the
// unmapped-axis error names the dims that could go there.
TEST(LayoutDefaults, AModelWithNoneOfTheDefaultDimsGetsTheUnmappedAxisError) {
  Graph g;
  GraphBuilder b(g);
  const ValueId x = b.input("x", Shape{{kBatchDim, 8}, {"feature", 6}});
  const ValueId w = b.param("w", Shape{{"feature", 6}, {"out", 4}});
  b.reduce_mean(b.einsum(x, w, {kBatchDim, "out"}, "proj"), {kBatchDim, "out"}, "loss");
  const Mesh mesh = Mesh::parse("data=2,model=2");
  Layout l = Layout::defaults(mesh);
  l.drop_absent_defaults(g);
  EXPECT_EQ(l.to_string(), "batch=data");
  const std::string e = error_of([&] { l.validate(g, mesh); });
  EXPECT_NE(e.find("mesh axis 'model' has no dim mapped to it"), std::string::npos) << e;
  EXPECT_NE(e.find("--layout batch=data,feature=model"), std::string::npos) << e;
  EXPECT_NE(e.find("the model's dims it divides: feature, out"), std::string::npos) << e;
}

}  // namespace
}  // namespace tessel
