// Shape errors are caught while the model is built, with messages that name
// the op, its label and the dims with their sizes.
#include <gtest/gtest.h>

#include "common/error_of.h"
#include "tessel/base/error.h"
#include "tessel/ir/builder.h"

namespace tessel {
namespace {

class ShapeErrors : public ::testing::Test {
 protected:
  Graph graph;
  GraphBuilder b{graph};
};

TEST_F(ShapeErrors, ContractingDimsOfDifferentSizes) {
  ValueId x = b.param("x", Shape{{"batch", 2}, {"embed", 384}});
  ValueId w = b.param("w", Shape{{"embed", 512}, {"hidden", 8}});
  std::string msg = error_of([&] { b.einsum(x, w, {"batch", "hidden"}, "fc"); });
  EXPECT_NE(msg.find("einsum 'fc'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'embed' is 384"), std::string::npos) << msg;
  EXPECT_NE(msg.find("512"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, ContractingDifferentlyNamedDims) {
  ValueId x = b.param("x", Shape{{"batch", 2}, {"embed", 8}});
  ValueId w = b.param("w", Shape{{"hidden", 8}, {"out", 3}});
  std::string msg = error_of([&] { b.einsum(x, w, {"batch", "out"}, "proj"); });
  EXPECT_NE(msg.find("einsum 'proj'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("embed=8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hidden=8"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, UnknownOutputDim) {
  ValueId x = b.param("x", Shape{{"i", 2}, {"k", 3}});
  ValueId w = b.param("w", Shape{{"k", 3}, {"j", 4}});
  std::string msg = error_of([&] { b.einsum(x, w, {"i", "heads"}); });
  EXPECT_NE(msg.find("output dim 'heads'"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, BroadcastNeedsNestedDims) {
  ValueId a = b.param("a", Shape{{"i", 2}, {"j", 3}});
  ValueId c = b.param("c", Shape{{"j", 3}, {"k", 4}});
  std::string msg = error_of([&] { b.add(a, c, "resid"); });
  EXPECT_NE(msg.find("add 'resid'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(i=2, j=3)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(j=3, k=4)"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, SameNameDifferentSizeInElementwise) {
  ValueId a = b.param("a", Shape{{"embed", 384}});
  ValueId c = b.param("c", Shape{{"embed", 512}});
  std::string msg = error_of([&] { b.add(a, c); });
  EXPECT_NE(msg.find("'embed' is 384"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, ReduceOverUnknownDim) {
  ValueId a = b.param("a", Shape{{"i", 2}, {"j", 3}});
  std::string msg = error_of([&] { b.reduce_sum(a, {"seq"}, "total"); });
  EXPECT_NE(msg.find("reduce_sum 'total'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'seq'"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, LayerNormOverNonLastDim) {
  ValueId x = b.param("x", Shape{{"embed", 4}, {"seq", 3}});
  ValueId g = b.param("g", Shape{{"embed", 4}});
  ValueId beta = b.param("beta", Shape{{"embed", 4}});
  std::string msg = error_of([&] { b.layernorm(x, g, beta, "embed"); });
  EXPECT_NE(msg.find("last"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, SplitWithWrongProduct) {
  ValueId x = b.param("x", Shape{{"embed", 10}});
  std::string msg = error_of([&] { b.split_dim(x, "embed", Shape{{"heads", 3}, {"head", 4}}); });
  EXPECT_NE(msg.find("embed=10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("12"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, CrossEntropyLabelsMustMatch) {
  ValueId logits = b.param("logits", Shape{{"batch", 2}, {"vocab", 5}});
  ValueId labels = b.input("labels", Shape{{"batch", 3}}, DType::kI32);
  std::string msg = error_of([&] { b.cross_entropy(logits, labels, "vocab"); });
  EXPECT_NE(msg.find("batch=3"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, DuplicateDimNameInShape) {
  std::string msg = error_of([&] { Shape s{{"i", 2}, {"i", 3}}; });
  EXPECT_NE(msg.find("'i' appears twice"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, NonPositiveDimSize) {
  std::string msg = error_of([&] { Shape s{{"embed", -4}}; });
  EXPECT_NE(msg.find("'embed' has size -4"), std::string::npos) << msg;
}

TEST_F(ShapeErrors, EmbeddingIdsMustBeIntegers) {
  ValueId table = b.param("table", Shape{{"vocab", 5}, {"embed", 2}});
  ValueId ids = b.input("ids", Shape{{"batch", 3}}, DType::kF32);
  std::string msg = error_of([&] { b.embedding(table, ids, "vocab"); });
  EXPECT_NE(msg.find("ids must be i32"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel
