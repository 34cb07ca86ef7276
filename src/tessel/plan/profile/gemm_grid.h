// Measured GEMM throughput on a grid of shapes, and interpolation between
// the grid points.
//
// A shape (m, n, k) is placed by two coordinates: x = log2(2mnk), the FLOPs
// of one product, and y = log2(cbrt(mnk) / min(m, n, k)), its aspect (0 for
// a cube; 2 when the thin dim is a quarter of the cube root, like attention's
// seq x head by head x seq). For each thread count, and separately for
// single products (batch 1) and batched ones (batch > 1, which run one
// single-threaded sgemm per batch index in parallel), the points must form a
// full product grid over their x levels and y levels. log2(GFLOP/s) is
// interpolated bilinearly in (x, y): exact at every grid point, linear — so
// monotone — between two neighbours along either coordinate, and clamped to
// the edge values outside the grid (a GEMM smaller than the smallest grid
// point is assumed to run at its rate). Between measured thread counts the
// rate is interpolated linearly in threads and clamped beyond them; a batched
// product uses at most `batch` threads. Which of m, n, k is the thin dim is
// not a coordinate: the grid measures thin-k shapes and applies them to
// thin-m and thin-n ones of the same FLOPs and aspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::plan {

struct GemmPoint {
  int threads = 1;
  int64_t batch = 1, m = 1, n = 1, k = 1;
  double gflops = 0;  // achieved, all batch indices together
};

// The grid coordinates of one product (see above).
double gemm_log_flops(int64_t m, int64_t n, int64_t k);
double gemm_log_aspect(int64_t m, int64_t n, int64_t k);

class GemmGrid {
 public:
  GemmGrid() = default;
  // Throws, starting the message with `where` (file and key), if a point has
  // a non-positive size or rate or the points of one (threads, batched)
  // class do not form a full grid (a missing or duplicate (x, y) point).
  GemmGrid(const std::vector<GemmPoint>& points, const std::string& where);

  bool empty() const { return surfaces_.empty(); }
  // Interpolated GFLOP/s of a (batch x) m x k by k x n product on `threads`.
  // REQUIRES: !empty(), threads >= 1, all sizes >= 1.
  double gflops(int64_t batch, int64_t m, int64_t n, int64_t k, int threads) const;

 private:
  struct Surface {
    int threads = 1;
    bool batched = false;
    std::vector<double> xs, ys;       // sorted levels
    std::vector<double> log2_gflops;  // ys.size() rows of xs.size()
    double at(double x, double y) const;
  };
  double surface_gflops(bool batched, double x, double y, int threads) const;

  std::vector<Surface> surfaces_;  // sorted by (batched, threads)
};

}  // namespace tessel::plan
