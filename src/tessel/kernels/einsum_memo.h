// plan_einsum, remembered per thread by the three shapes.
//
// An einsum's plan is a pure function of its operands' and output's shapes,
// and a planner's search builds thousands of programs with the same einsums
// (every candidate's lowering of the same model): the plan is made once per
// shape triple and copied after. Equal to plan_einsum(a, b, out), field for
// field. At most 4,096 triples are kept per thread (then forgotten at once).
#pragma once

#include "tessel/kernels/einsum.h"

namespace tessel::kernels {

EinsumPlan plan_einsum_memo(const Shape& a, const Shape& b, const Shape& out);

}  // namespace tessel::kernels
