// Absurd sizes are errors naming the key, found with overflow-safe
// arithmetic before anything is built: no negative sizes, no bad_alloc, no
// graph that takes days to build.
#include <gtest/gtest.h>

#include <climits>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/base/shape.h"
#include "tessel/compile/config.h"
#include "tessel/ir/graph.h"

namespace tessel {
namespace {

TEST(ConfigLimits, HugeModelWidthNamesTheKey) {
  TrainConfig c = tiny_gpt_config(1, 4);
  c.n_head = 1;
  c.d_model = INT64_MAX;
  EXPECT_NE(
      error_of([&] { c.validate(); }).find("'d_model' is 9223372036854775807, over the limit"),
      std::string::npos);
}

TEST(ConfigLimits, ProductsOverflowOrExceedTheLimitWithTheirKeys) {
  TrainConfig c = tiny_gpt_config(1, 4);
  c.n_head = 2;
  c.d_model = INT_MAX - 1;  // 4 * d_model^2 overflows int64
  std::string e = error_of([&] { c.validate(); });
  EXPECT_NE(e.find("d_model=2147483646"), std::string::npos) << e;
  EXPECT_NE(e.find("overflows a 64-bit count"), std::string::npos) << e;
  c = tiny_gpt_config(1, 1 << 10);
  c.n_head = 32;
  c.context = 1 << 15;  // attention scores 2^10 * 2^5 * 2^30 elements; activations 2^37
  c.attention = "unfused";
  e = error_of([&] { c.validate(); });
  EXPECT_NE(e.find("attention scores"), std::string::npos) << e;
  EXPECT_NE(e.find("over the limit of 2^40"), std::string::npos) << e;
  c.attention = "fused";  // never forms the scores: no such tensor to limit
  EXPECT_NO_THROW(c.validate());
}

// validate() refuses the layer count from the config alone, before any graph
// is built.
TEST(ConfigLimits, TooManyLayersFailFast) {
  TrainConfig c = tiny_gpt_config(100000, 4);
  EXPECT_NE(error_of([&] { c.validate(); }).find("'n_layer' is 100000, over the limit"),
            std::string::npos);
}

TEST(ConfigLimits, ShapeElementCountMustFit) {
  EXPECT_NE(error_of([] {
              Shape({{"a", INT64_MAX / 2}, {"b", 4}});
            }).find("overflows"),
            std::string::npos);
}

// A graph of 200,000 parameters builds and finds each by name (find() is a
// hash lookup, so this stays linear; its time is not asserted: timings
// belong in benchmarks, and a loaded machine made a 10 s limit fail).
TEST(ConfigLimits, ManyParametersAreFoundByName) {
  Graph g;
  // std::string("p").append(...), not "p" + std::to_string(i): GCC 12 at -O3
  // reports a bogus -Warray-bounds/-Wstringop-overflow inside libstdc++ for
  // the latter when this file shares a unity batch (CMakeLists.txt).
  for (int i = 0; i < 200000; ++i)
    g.add_param(std::string("p").append(std::to_string(i)), Shape({{"x", 1}}), {});
  EXPECT_EQ(g.size(), 200000);
  EXPECT_EQ(g.find("p0"), 0);
  EXPECT_EQ(g.find("p123456"), 123456);
  EXPECT_EQ(g.find("p199999"), 199999);
  EXPECT_EQ(g.find("p200000"), -1);
  EXPECT_EQ(g.find("nope"), -1);
}

}  // namespace
}  // namespace tessel
