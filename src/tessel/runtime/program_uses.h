// Program::Uses: what the constructor's steps learn about each root value
// (program.cc, program_in_place.cc): the instructions that first and last
// use its buffer, whether an instruction reads it, and for a gradient in a
// bucket, the bucket and its offset there. Private to the runtime.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tessel/runtime/program.h"

namespace tessel {

struct Program::Uses {
  explicit Uses(int n)
      : first(n, -1), last(n, -1), read(n, false), bucket_of(n, -1), bucket_offset(n, 0) {}
  void touch(ValueId root, int step) {
    if (first[root] < 0) first[root] = step;
    last[root] = std::max(last[root], step);
  }
  std::vector<int> first, last;
  std::vector<bool> read;
  std::vector<int> bucket_of;
  std::vector<size_t> bucket_offset;
  int end = 1;  // one past the last instruction: outputs and inputs live to here
};

}  // namespace tessel
