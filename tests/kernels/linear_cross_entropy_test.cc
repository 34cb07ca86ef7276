// Tests for the fused linear + cross-entropy kernels (kernels/linear_cross_entropy.h)
// against full logits: h . w^T by naive double loops, then the cross-entropy
// reference kernels (cross_entropy_forward_ref / backward_ref) and naive
// double GEMMs for dh and dw. Three problems: a tall one whose vocab takes two
// tiles per row, a wide one whose dim spans several of dh's sgemm blocks, and
// a long one of 2 x 2 tiles (row chunks and vocab blocks, the last of each
// clamped). Also: two vocab slices combined, bf16, the weight stored embed
// first, thread-count independence, the label check.
#include "tessel/kernels/linear_cross_entropy.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/kernel_checks.h"
#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/cross_entropy.h"

namespace tessel::kernels::linear_ce_test {
namespace {

constexpr float kDloss = 0.7f;  // g's scale is kDloss / rows, as in the CE backward

struct Problem {
  int64_t rows, vocab, dim;
  Vec h, w;  // (rows x dim), (vocab x dim)
  std::vector<int32_t> labels;
};

// h in [-h_bound, h_bound), w in [-1, 1), labels uniform over the vocab.
Problem make_problem(int64_t rows, int64_t vocab, int64_t dim, float h_bound, uint64_t seed) {
  Problem p{rows,
            vocab,
            dim,
            random_vec(rows * dim, seed, -h_bound, h_bound),
            random_vec(vocab * dim, seed + 1),
            {}};
  for (float x : random_vec(rows, seed + 2, 0.0f, 1.0f)) {
    p.labels.push_back(static_cast<int32_t>(std::min<double>(vocab - 1, x * vocab)));
  }
  return p;
}

// 262147 > 2^18 vocab rows: 19 rows of f32 logits exceed 16 MiB, so each row
// runs two vocab blocks, merged as an online softmax. dim 12 is no multiple of 8.
// Logits about 2.3 wide (standard deviation), up to 11 in size.
const Problem& tall() {
  static const Problem p = make_problem(19, 262147, 12, 2.0f, 900);
  return p;
}

// dim 150: dh runs as sgemm blocks of 64, 64 and 22 columns (one chunk of 21
// rows). h's bound shrinks with sqrt(dim), so the logits spread as the tall
// problem's: with h in [-2, 2) they reached 36, and f32 logits alone then put
// dh past the tolerances below against the double reference, fused or not
// (sgemm, cross_entropy_backward, sgemm did no better).
const Problem& wide() {
  static const Problem p = make_problem(21, 3001, 150, 0.5f, 910);
  return p;
}

// 2051 rows by 3001: tiles of 2048 x 2048, so 2 row chunks (dw summed over
// them) by 2 vocab blocks (dh summed over them), the last of each clamped.
const Problem& long_rows() {
  static const Problem p = make_problem(2051, 3001, 8, 0.5f, 920);
  return p;
}

LinearCeShape slice_shape(const Problem& p, int64_t offset, int64_t vocab) {
  return {p.rows, vocab, p.dim, offset};
}
LinearCeShape whole(const Problem& p) { return slice_shape(p, 0, p.vocab); }

Vec rounded_bf16(const Vec& x) {
  Vec out(x.size());
  round_bf16_in_f32(x.data(), out.data(), static_cast<int64_t>(x.size()));
  return out;
}

// Everything computed from the full logits.
struct Reference {
  Vec lse;     // rows
  float loss;  // mean over rows, cross_entropy_forward_ref
  Vec dh, dw;  // from cross_entropy_backward_ref's dlogits
};

// g . w (rows x dim) and g^T . h (vocab x dim), naive, double accumulators.
void reference_products(const Problem& p, const Vec& g, const Vec& h, const Vec& w,
                        Reference& ref) {
  std::vector<double> acc(p.dim);
  for (int64_t r = 0; r < p.rows; ++r) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t v = 0; v < p.vocab; ++v) {
      for (int64_t d = 0; d < p.dim; ++d) acc[d] += double{g[r * p.vocab + v]} * w[v * p.dim + d];
    }
    for (int64_t d = 0; d < p.dim; ++d) ref.dh[r * p.dim + d] = static_cast<float>(acc[d]);
  }
  for (int64_t v = 0; v < p.vocab; ++v) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t r = 0; r < p.rows; ++r) {
      for (int64_t d = 0; d < p.dim; ++d) acc[d] += double{g[r * p.vocab + v]} * h[r * p.dim + d];
    }
    for (int64_t d = 0; d < p.dim; ++d) ref.dw[v * p.dim + d] = static_cast<float>(acc[d]);
  }
}

// With bf16: h, w and the dlogits are rounded to bf16 before the products.
Reference reference(const Problem& p, bool bf16) {
  const Vec h = bf16 ? rounded_bf16(p.h) : p.h, w = bf16 ? rounded_bf16(p.w) : p.w;
  Vec logits(p.rows * p.vocab);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t v = 0; v < p.vocab; ++v) {
      double acc = 0.0;
      for (int64_t d = 0; d < p.dim; ++d) acc += double{h[r * p.dim + d]} * w[v * p.dim + d];
      logits[r * p.vocab + v] = static_cast<float>(acc);
    }
  }
  Reference ref{Vec(p.rows), 0.0f, Vec(p.rows * p.dim), Vec(p.vocab * p.dim)};
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = logits.data() + r * p.vocab;
    const double m = *std::max_element(x, x + p.vocab);
    double s = 0.0;
    for (int64_t v = 0; v < p.vocab; ++v) s += std::exp(x[v] - m);
    ref.lse[r] = static_cast<float>(m + std::log(s));
  }
  ref.loss = cross_entropy_forward_ref(logits.data(), p.labels.data(), p.rows, p.vocab);
  Vec g(p.rows * p.vocab);
  cross_entropy_backward_ref(logits.data(), p.labels.data(), kDloss, g.data(), p.rows, p.vocab);
  if (bf16) g = rounded_bf16(g);
  reference_products(p, g, h, w, ref);
  return ref;
}

const Reference& tall_reference_f32() {
  static const Reference ref = reference(tall(), false);
  return ref;
}

// One slice's statistics and gradients.
struct Fused {
  Vec max, sum, target, dh, dw;
};

Fused fused_stats(const Problem& p, const LinearCeShape& s, bool bf16) {
  Fused f{Vec(p.rows), Vec(p.rows), Vec(p.rows), {}, {}};
  std::vector<float> scratch(linear_ce_scratch_bytes(s, bf16) / sizeof(float));
  linear_ce_stats(s, p.h.data(), p.w.data() + s.vocab_offset * p.dim, p.labels.data(), bf16,
                  f.max.data(), f.sum.data(), f.target.data(), scratch.data());
  return f;
}

void fused_backward(const Problem& p, const LinearCeShape& s, bool bf16, const Vec& lse, Fused& f) {
  f.dh.assign(p.rows * p.dim, -1.0f);  // written, not accumulated: the -1 must vanish
  f.dw.assign(s.vocab * p.dim, -1.0f);
  std::vector<float> scratch(linear_ce_scratch_bytes(s, bf16) / sizeof(float));
  linear_ce_backward(s, p.h.data(), p.w.data() + s.vocab_offset * p.dim, p.labels.data(),
                     lse.data(), kDloss / static_cast<float>(p.rows), bf16, f.dh.data(),
                     f.dw.data(), scratch.data());
}

// The row logsumexp over the slices (max, sums rescaled to it), in double.
Vec combined_lse(const std::vector<const Fused*>& slices) {
  Vec lse(slices[0]->max.size());
  for (size_t r = 0; r < lse.size(); ++r) {
    double m = -INFINITY, s = 0.0;
    for (const Fused* f : slices) m = std::max(m, double{f->max[r]});
    for (const Fused* f : slices) s += f->sum[r] * std::exp(f->max[r] - m);
    lse[r] = static_cast<float>(m + std::log(s));
  }
  return lse;
}

// The mean loss: lse less the target logits of all slices, in double.
float combined_loss(const Vec& lse, const std::vector<const Fused*>& slices) {
  double total = 0.0;
  for (size_t r = 0; r < lse.size(); ++r) {
    total += lse[r];
    for (const Fused* f : slices) total -= f->target[r];
  }
  return static_cast<float>(total / static_cast<double>(lse.size()));
}

TEST(LinearCrossEntropy, TilesFollowTheShape) {
  // 16 MiB of f32 logits: all rows up to 2048 by a multiple of 512 columns.
  EXPECT_EQ(linear_ce_tile(19, 262147).rows, 19);
  EXPECT_EQ(linear_ce_tile(19, 262147).vocab, 220672);  // 4 Mi / 19 floats, down to 512s
  EXPECT_EQ(linear_ce_tile(1024, 50304).vocab, 4096);
  EXPECT_EQ(linear_ce_tile(100000, 50304).rows, 2048);
  EXPECT_EQ(linear_ce_tile(100000, 50304).vocab, 2048);
  EXPECT_EQ(linear_ce_tile(100000, 300).vocab, 300);  // a small vocab whole
  // The tall problem has two vocab blocks per row, the long one 2 x 2 tiles,
  // each with a clamped last one.
  EXPECT_EQ(tall().vocab % linear_ce_tile(tall().rows, tall().vocab).vocab, 41475);
  const LinearCeTile t = linear_ce_tile(long_rows().rows, long_rows().vocab);
  EXPECT_EQ(t.rows, 2048);
  EXPECT_EQ(t.vocab, 2048);
  // Scratch is one tile of logits, never rows x vocab; with bf16 also the
  // rounded w and h chunk.
  const Problem& p = tall();
  EXPECT_EQ(linear_ce_scratch_bytes(whole(p), false), size_t{19 * 220672 * 4});
  EXPECT_EQ(linear_ce_scratch_bytes(whole(p), true),
            size_t{(19 * 220672 + 262147 * 12 + 19 * 12) * 4});
}

TEST(LinearCrossEntropy, F32OneSliceMatchesFullLogits) {
  for (const Problem* p : {&tall(), &wide(), &long_rows()}) {
    SCOPED_TRACE("rows " + std::to_string(p->rows) + ", dim " + std::to_string(p->dim));
    const Reference other_ref = p != &tall() ? reference(*p, false) : Reference{};
    const Reference& ref = p != &tall() ? other_ref : tall_reference_f32();
    Fused f = fused_stats(*p, whole(*p), false);
    const Vec lse = combined_lse({&f});
    expect_close(lse, ref.lse, 1e-5, 0.0);
    EXPECT_NEAR(combined_loss(lse, {&f}), ref.loss, 1e-5 * std::fabs(ref.loss));
    fused_backward(*p, whole(*p), false, lse, f);
    expect_close(f.dh, ref.dh, 1e-5, 1e-6);
    expect_close(f.dw, ref.dw, 1e-5, 1e-6);
  }
}

TEST(LinearCrossEntropy, TwoSlicesCombineToTheWholeVocab) {
  const Problem& p = tall();
  const Reference& ref = tall_reference_f32();
  const int64_t half = p.vocab / 2;
  const LinearCeShape lo = slice_shape(p, 0, half), hi = slice_shape(p, half, p.vocab - half);
  const auto& labels = p.labels;
  ASSERT_TRUE(std::any_of(labels.begin(), labels.end(), [&](int32_t l) { return l < half; }));
  ASSERT_TRUE(std::any_of(labels.begin(), labels.end(), [&](int32_t l) { return l >= half; }));
  Fused a = fused_stats(p, lo, false), b = fused_stats(p, hi, false);
  for (int64_t r = 0; r < p.rows; ++r) {  // each row's target logit is in exactly one slice
    EXPECT_EQ(labels[r] < half ? b.target[r] : a.target[r], 0.0f) << "row " << r;
  }
  const Vec lse = combined_lse({&a, &b});
  expect_close(lse, ref.lse, 1e-5, 0.0);
  EXPECT_NEAR(combined_loss(lse, {&a, &b}), ref.loss, 1e-5 * std::fabs(ref.loss));
  fused_backward(p, lo, false, lse, a);
  fused_backward(p, hi, false, lse, b);
  expect_close(a.dw, Vec(ref.dw.begin(), ref.dw.begin() + half * p.dim), 1e-5, 1e-6);
  expect_close(b.dw, Vec(ref.dw.begin() + half * p.dim, ref.dw.end()), 1e-5, 1e-6);
  Vec dh(p.rows * p.dim);
  for (size_t i = 0; i < dh.size(); ++i) dh[i] = a.dh[i] + b.dh[i];
  expect_close(dh, ref.dh, 1e-5, 1e-6);
}

TEST(LinearCrossEntropy, Bf16MatchesTheReferenceOnRoundedOperands) {
  for (const Problem* p : {&tall(), &wide(), &long_rows()}) {
    SCOPED_TRACE("rows " + std::to_string(p->rows) + ", dim " + std::to_string(p->dim));
    const Reference ref = reference(*p, true);
    Fused f = fused_stats(*p, whole(*p), true);
    const Vec lse = combined_lse({&f});
    // Logits of rounded operands differ from the reference only in f32 summation.
    expect_close(lse, ref.lse, 1e-5, 0.0);
    EXPECT_NEAR(combined_loss(lse, {&f}), ref.loss, 1e-5 * std::fabs(ref.loss));
    fused_backward(*p, whole(*p), true, lse, f);
    // g is rounded to bf16 on both sides, but from values that differ in f32's
    // last bits (fast_exp, f32 sums), so an element can round to the
    // neighbouring bf16 (2^-8 of that element): 1e-4 relative, and 1e-5 of
    // the largest gradient as the floor.
    expect_close(f.dh, ref.dh, 1e-4, 1e-5);
    expect_close(f.dw, ref.dw, 1e-4, 1e-5);
    // The flag does something: bf16 is well away from f32, past the
    // tolerances above (rounding h and w moves each logit by 1e-4 or more;
    // the long problem, of dim 8, the least).
    Fused f32 = fused_stats(*p, whole(*p), false);
    const Vec lse_f32 = combined_lse({&f32});
    fused_backward(*p, whole(*p), false, lse_f32, f32);
    double lse_gap = 0.0, dh_gap = 0.0, dh_max = 0.0;
    for (int64_t r = 0; r < p->rows; ++r) {
      lse_gap = std::max(lse_gap, std::fabs(double{lse[r]} - lse_f32[r]));
    }
    for (int64_t i = 0; i < p->rows * p->dim; ++i) {
      dh_gap = std::max(dh_gap, std::fabs(double{f.dh[i]} - f32.dh[i]));
      dh_max = std::max(dh_max, std::fabs(double{ref.dh[i]}));
    }
    EXPECT_GT(lse_gap, 2e-4);
    EXPECT_GT(dh_gap, 5e-4 * dh_max);
  }
}

// Stats, dh and dw of a slice (the last two thirds of the vocab), one after another.
Vec stats_and_gradients(const Problem& p, bool bf16) {
  const LinearCeShape s = slice_shape(p, p.vocab / 3, p.vocab - p.vocab / 3);
  Fused f = fused_stats(p, s, bf16);
  Vec lse(p.rows);
  for (int64_t r = 0; r < p.rows; ++r) lse[r] = f.max[r] + std::log(f.sum[r]);
  fused_backward(p, s, bf16, lse, f);
  Vec all = f.max;
  for (const Vec* v : {&f.sum, &f.target, &f.dh, &f.dw}) {
    all.insert(all.end(), v->begin(), v->end());
  }
  return all;
}

TEST(LinearCrossEntropy, BitwiseTheSameForAnyThreadCount) {
  // 8 and 16 threads too (oversubscribed here): oneDNN's own threading of a
  // product splits its long contracted dim (dh's vocab) from 8 threads on.
  const int saved = omp_get_max_threads();
  for (const Problem* p : {&tall(), &wide(), &long_rows()}) {
    for (bool bf16 : {false, true}) {
      omp_set_num_threads(1);
      const Vec one = stats_and_gradients(*p, bf16);
      for (int threads : {2, 8, 16}) {
        SCOPED_TRACE("dim " + std::to_string(p->dim) + (bf16 ? ", bf16, " : ", f32, ") +
                     std::to_string(threads) + " threads");
        omp_set_num_threads(threads);
        expect_bitwise(stats_and_gradients(*p, bf16), one);
      }
    }
  }
  omp_set_num_threads(saved);
}

TEST(LinearCrossEntropy, NegativeLabelThrowsNamingTheRow) {
  const LinearCeShape s{4, 10, 3, 0};
  const Vec h(12, 0.5f), w(30, 0.25f), lse(4, 1.0f);
  const std::vector<int32_t> labels = {1, 2, -3, 3};
  Vec max(4), sum(4), target(4), dh(12), dw(30);
  std::vector<float> scratch(linear_ce_scratch_bytes(s, true) / sizeof(float));
  for (const std::string& what :
       {error_of([&] {
          linear_ce_stats(s, h.data(), w.data(), labels.data(), false, max.data(), sum.data(),
                          target.data(), scratch.data());
        }),
        error_of([&] {
          linear_ce_backward(s, h.data(), w.data(), labels.data(), lse.data(), 1.0f, true,
                             dh.data(), dw.data(), scratch.data());
        })}) {
    EXPECT_NE(what.find("label -3 at row 2"), std::string::npos) << what;
  }
  // Labels past this slice are another rank's: no error here.
  const std::vector<int32_t> far = {1, 2, 1000, 3};
  linear_ce_stats(s, h.data(), w.data(), far.data(), false, max.data(), sum.data(), target.data(),
                  scratch.data());
  EXPECT_EQ(target[2], 0.0f);
  // Empty shapes are errors too, naming the sizes.
  const std::string empty = error_of([&] {
    linear_ce_stats({4, 10, 0, 0}, h.data(), w.data(), labels.data(), false, max.data(), sum.data(),
                    target.data(), scratch.data());
  });
  EXPECT_NE(empty.find("dim 0"), std::string::npos) << empty;
}

}  // namespace
}  // namespace tessel::kernels::linear_ce_test

namespace tessel::kernels::linear_ce_test {
namespace {

// w stored dim x vocab (the Llama's output layer): the same statistics and
// dh, and dw transposed, as with w stored vocab x dim (within 1e-6: the
// products' inner order may differ by layout), on a slice of the vocab.
TEST(LinearCrossEntropy, AWeightStoredEmbedFirstGivesTheSameResults) {
  const Problem& p = wide();
  const int64_t offset = p.vocab / 3, vocab = p.vocab - offset;
  LinearCeShape s = slice_shape(p, offset, vocab);
  Vec w_t(vocab * p.dim);  // the slice, transposed
  for (int64_t v = 0; v < vocab; ++v)
    for (int64_t d = 0; d < p.dim; ++d) w_t[d * vocab + v] = p.w[(offset + v) * p.dim + d];
  for (bool bf16 : {false, true}) {
    SCOPED_TRACE(bf16 ? "bf16" : "f32");
    Fused want = fused_stats(p, s, bf16);
    const Vec lse = combined_lse({&want});
    fused_backward(p, s, bf16, lse, want);
    LinearCeShape st = s;
    st.vocab_major = false;
    Fused got{Vec(p.rows), Vec(p.rows), Vec(p.rows), Vec(p.rows * p.dim), Vec(vocab * p.dim)};
    std::vector<float> scratch(linear_ce_scratch_bytes(st, bf16) / sizeof(float));
    linear_ce_stats(st, p.h.data(), w_t.data(), p.labels.data(), bf16, got.max.data(),
                    got.sum.data(), got.target.data(), scratch.data());
    linear_ce_backward(st, p.h.data(), w_t.data(), p.labels.data(), lse.data(),
                       kDloss / static_cast<float>(p.rows), bf16, got.dh.data(), got.dw.data(),
                       scratch.data());
    Vec dw_t(vocab * p.dim);  // got's dw back to vocab x dim
    for (int64_t v = 0; v < vocab; ++v)
      for (int64_t d = 0; d < p.dim; ++d) dw_t[v * p.dim + d] = got.dw[d * vocab + v];
    const std::vector<std::pair<const Vec*, const Vec*>> pairs = {{&got.max, &want.max},
                                                                  {&got.sum, &want.sum},
                                                                  {&got.target, &want.target},
                                                                  {&got.dh, &want.dh},
                                                                  {&dw_t, &want.dw}};
    for (const auto& [a, b] : pairs)
      for (size_t i = 0; i < b->size(); ++i)
        ASSERT_NEAR((*a)[i], (*b)[i], 1e-6 * std::max(1.0f, std::abs((*b)[i]))) << i;
  }
}

}  // namespace
}  // namespace tessel::kernels::linear_ce_test
