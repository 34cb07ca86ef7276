// Sharding::local_numel (src/tessel/sharding/placement.h) is
// local_shape(global, mesh).numel() computed without the shape: equal to it
// for every split (nested too), broadcast and partial placement on a 2-D mesh, and
// throwing where local_shape throws.
#include <gtest/gtest.h>

#include "tessel/base/error.h"
#include "tessel/sharding/placement.h"

namespace tessel {
namespace {

TEST(ShardingLocalNumel, EqualsTheLocalShapesElements) {
  const Mesh mesh = Mesh::parse("data=2,model=4");
  const Shape shape{{"batch", 8}, {"heads", 4}, {"d", 6}};
  const std::vector<Placement> choices = {Placement::broadcast(), Placement::partial_sum(),
                                          Placement::split("batch"), Placement::split("heads"),
                                          Placement::split("d")};
  int checked = 0;
  for (const Placement& a : choices) {
    for (const Placement& b : choices) {
      const Sharding s({a, b});
      bool shape_throws = false;
      int64_t want = 0;
      try {
        want = s.local_shape(shape, mesh).numel();
      } catch (const Error&) {
        shape_throws = true;
      }
      if (shape_throws) {
        EXPECT_THROW(s.local_numel(shape, mesh), Error) << s.to_string();
        continue;
      }
      EXPECT_EQ(s.local_numel(shape, mesh), want) << s.to_string();
      ++checked;
    }
  }
  // d=6 over model=4, and heads or d cut by data, then model (nested), throw;
  // the rest are checked.
  EXPECT_GT(checked, 10);
  EXPECT_EQ(
      Sharding({Placement::split("batch"), Placement::split("heads")}).local_numel(shape, mesh),
      8 * 4 * 6 / 8);
}

}  // namespace
}  // namespace tessel
