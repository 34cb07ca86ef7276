// The naive twins of the fused attention kernels (kernels/attention.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "tessel/kernels/attention.h"
#include "tessel/kernels/dropout.h"

namespace tessel::kernels {
namespace {

using Row = AttentionLayout::RowBase;

double at(const float* x, int64_t base, int64_t seq, int64_t i, int64_t head, int64_t c) {
  return x[base + i * seq + c * head];
}

// The dropout factor of (query i, key j): 1 / (1 - p) kept, 0 dropped, 1
// without dropout.
double drop(const AttentionLayout& a, const Row& r, int64_t i, int64_t j) {
  const AttentionDropout& d = a.dropout;
  if (d.p == 0.0f) return 1.0;
  const int64_t counter = r.drop + (d.query0 + i) * d.query + (d.key0 + j) * d.key;
  return DropoutMask(d.p, d.seed, d.key_hash, d.step).keep(counter) ? 1.0 / (1.0 - d.p) : 0.0;
}

// Row i's probabilities over the keys it sees; returns how many.
int64_t probabilities(const AttentionLayout& a, const Row& r, const float* q, const float* k,
                      int64_t i, std::vector<double>& p, double* log_sum) {
  const int64_t n = a.causal ? i + 1 : a.sk;
  double m = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t c = 0; c < a.d; ++c)
      s += at(q, r.q, a.q_seq, i, a.q_head, c) * at(k, r.k, a.k_seq, j, a.k_head, c);
    p[j] = a.scale * s;
    m = std::max(m, p[j]);
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += p[j] = std::exp(p[j] - m);
  for (int64_t j = 0; j < n; ++j) p[j] /= sum;
  if (log_sum) *log_sum = m + std::log(sum);
  return n;
}

}  // namespace

void attention_forward_ref(const AttentionLayout& a, const float* q, const float* k, const float* v,
                           float* out, float* lse) {
  std::vector<double> p(a.sk);
  for (int64_t row = 0; row < a.rows(); ++row) {
    const Row r = a.row_base(row);
    for (int64_t i = 0; i < a.sq; ++i) {
      double log_sum = 0;
      const int64_t n = probabilities(a, r, q, k, i, p, &log_sum);
      for (int64_t c = 0; c < a.d; ++c) {
        double o = 0;
        for (int64_t j = 0; j < n; ++j)
          o += drop(a, r, i, j) * p[j] * at(v, r.k, a.k_seq, j, a.k_head, c);
        out[r.q + i * a.q_seq + c * a.q_head] = static_cast<float>(o);
      }
      lse[r.lse + i * a.lse_seq] = static_cast<float>(log_sum);
    }
  }
}

void attention_backward_ref(const AttentionLayout& a, const float* q, const float* k,
                            const float* v, const float*, const float* dout, float* dq, float* dk,
                            float* dv) {
  std::vector<double> p(a.sk), ds(a.sk);
  std::vector<double> gq(a.sq * a.d), gk(a.sk * a.d), gv(a.sk * a.d);
  for (int64_t row = 0; row < a.rows(); ++row) {
    const Row r = a.row_base(row);
    std::fill(gq.begin(), gq.end(), 0.0);
    std::fill(gk.begin(), gk.end(), 0.0);
    std::fill(gv.begin(), gv.end(), 0.0);
    for (int64_t i = 0; i < a.sq; ++i) {
      const int64_t n = probabilities(a, r, q, k, i, p, nullptr);
      double delta = 0;
      for (int64_t j = 0; j < n; ++j) {
        double dp = 0;
        for (int64_t c = 0; c < a.d; ++c)
          dp += at(dout, r.q, a.q_seq, i, a.q_head, c) * at(v, r.k, a.k_seq, j, a.k_head, c);
        ds[j] = drop(a, r, i, j) * dp;  // the gradient of the probabilities
        delta += p[j] * ds[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        const double g = a.scale * p[j] * (ds[j] - delta), kept = drop(a, r, i, j) * p[j];
        for (int64_t c = 0; c < a.d; ++c) {
          gv[j * a.d + c] += kept * at(dout, r.q, a.q_seq, i, a.q_head, c);
          gk[j * a.d + c] += g * at(q, r.q, a.q_seq, i, a.q_head, c);
          gq[i * a.d + c] += g * at(k, r.k, a.k_seq, j, a.k_head, c);
        }
      }
    }
    for (int64_t i = 0; i < a.sq; ++i)
      for (int64_t c = 0; c < a.d; ++c)
        dq[r.q + i * a.q_seq + c * a.q_head] = static_cast<float>(gq[i * a.d + c]);
    for (int64_t j = 0; j < a.sk; ++j)
      for (int64_t c = 0; c < a.d; ++c) {
        dk[r.k + j * a.k_seq + c * a.k_head] = static_cast<float>(gk[j * a.d + c]);
        dv[r.k + j * a.k_seq + c * a.k_head] = static_cast<float>(gv[j * a.d + c]);
      }
  }
}

}  // namespace tessel::kernels
