#include "tessel/plan/model/device_einsum.h"

#include <string>
#include <vector>

#include "tessel/kernels/einsum.h"

namespace tessel::plan {
namespace {

// True when a batched GEMM takes `s` as [batch..][rows][cols] in place (the
// batch dims may lie anywhere: a pointer per matrix).
bool in_place(const Shape& s, const std::vector<std::string>& rows,
              const std::vector<std::string>& cols) {
  const int64_t rs = kernels::group_stride(s, rows, 1), cs = kernels::group_stride(s, cols, 1);
  if (rs < 0 || cs < 0) return false;
  // One of them must be the leading (contiguous) index; a group of one
  // element is contiguous whatever its stride.
  return cs == 1 || rs == 1 || kernels::group_size(s, rows) == 1 ||
         kernels::group_size(s, cols) == 1;
}

}  // namespace

double device_einsum_copy_bytes(const Shape& a, const Shape& b, const Shape& out, Precision p) {
  const kernels::EinsumGroups g = kernels::einsum_groups(a, b, out);
  const double operand = p == Precision::kBF16 ? 2.0 : 4.0;
  double bytes = 0;
  if (!in_place(a, g.m, g.k)) bytes += 2 * operand * static_cast<double>(a.numel());
  if (!in_place(b, g.k, g.n)) bytes += 2 * operand * static_cast<double>(b.numel());
  if (!in_place(out, g.m, g.n)) bytes += 2 * 4.0 * static_cast<double>(out.numel());
  return bytes;
}

}  // namespace tessel::plan
