// The most dims a strided CPU kernel walks (elementwise broadcasting,
// reductions): their index arrays are fixed-size, so a run allocates
// nothing. A larger rank is an error naming it.
#pragma once

namespace tessel::kernels {

constexpr int kMaxRank = 16;

}  // namespace tessel::kernels
