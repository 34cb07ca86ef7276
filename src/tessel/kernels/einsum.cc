#include "tessel/kernels/einsum.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "tessel/base/error.h"
#include "tessel/kernels/einsum_memo.h"
#include "tessel/kernels/elementwise.h"

namespace tessel::kernels {

EinsumGroups einsum_groups(const Shape& a, const Shape& b, const Shape& out) {
  EinsumGroups g;
  for (const Dim& d : out.dims()) {
    bool in_a = a.has(d.name), in_b = b.has(d.name);
    if (in_a && in_b)
      g.batch.push_back(d.name);
    else if (in_a)
      g.m.push_back(d.name);
    else
      g.n.push_back(d.name);
  }
  for (const Dim& d : a.dims())
    if (b.has(d.name) && !out.has(d.name)) g.k.push_back(d.name);
  return g;
}

int64_t group_size(const Shape& s, const std::vector<std::string>& group) {
  int64_t n = 1;
  for (const auto& d : group) n *= s.size(d);
  return n;
}

int64_t group_stride(const Shape& s, const std::vector<std::string>& group, int64_t unit) {
  int64_t stride = -1, expected = -1;
  for (auto it = group.rbegin(); it != group.rend(); ++it) {
    if (s.size(*it) == 1) continue;
    int64_t st = s.stride(*it);
    if (stride < 0)
      stride = st;
    else if (st != expected)
      return -1;
    expected = st * s.size(*it);
  }
  return stride < 0 ? unit : stride;
}

namespace {

// Fills the operand description for a matrix with row group `rows` and column
// group `cols` (for the output: rows = m, cols = n).
GemmOperand describe(const Shape& s, const std::vector<std::string>& batch,
                     const std::vector<std::string>& rows, const std::vector<std::string>& cols,
                     bool allow_transpose) {
  GemmOperand op;
  int64_t nrows = group_size(s, rows), ncols = group_size(s, cols);
  int64_t rs = group_stride(s, rows), cs = group_stride(s, cols);
  bool rows_ok = rs >= 0, cols_ok = cs >= 0;
  if (rows_ok && cols_ok && (cs == 1 || cs == 0) && (nrows == 1 || rs >= ncols)) {
    op.ld = nrows == 1 ? std::max<int64_t>(ncols, 1) : rs;
  } else if (allow_transpose && rows_ok && cols_ok && rs == 1 && (ncols == 1 || cs >= nrows)) {
    op.transposed = true;
    op.ld = ncols == 1 ? std::max<int64_t>(nrows, 1) : cs;
  } else {
    op.permute = true;  // read as the dense [batch, rows, cols] copy
    op.ld = std::max<int64_t>(ncols, 1);
  }
  std::vector<std::string> canon = batch;
  canon.insert(canon.end(), rows.begin(), rows.end());
  canon.insert(canon.end(), cols.begin(), cols.end());
  for (const auto& d : canon) {
    op.canon_sizes.push_back(s.size(d));
    op.canon_strides.push_back(s.stride(d));
  }
  // Offsets of each batch index: in place from the original strides, or
  // dense [batch, rows, cols] blocks when permuted.
  int64_t nbatch = group_size(s, batch);
  op.batch_offsets.resize(nbatch);
  // The batch dims' sizes and strides, looked up once (not per batch index).
  const std::vector<int64_t> batch_sizes(op.canon_sizes.begin(),
                                         op.canon_sizes.begin() + batch.size());
  const std::vector<int64_t> batch_strides(op.canon_strides.begin(),
                                           op.canon_strides.begin() + batch.size());
  for (int64_t i = 0; i < nbatch; ++i) {
    if (op.permute) {
      op.batch_offsets[i] = i * nrows * ncols;
      continue;
    }
    int64_t rest = i, off = 0;
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      const int64_t size = batch_sizes[d];
      off += (rest % size) * batch_strides[d];
      rest /= size;
    }
    op.batch_offsets[i] = off;
  }
  return op;
}

void gemm_call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
               const float* b, int64_t ldb, float* c, int64_t ldc) {
  dnnl_status_t st =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  if (st != dnnl_success)
    TS_THROW("einsum: oneDNN sgemm failed (status ", static_cast<int>(st), ") for m=", m, " n=", n,
             " k=", k);
}

// Whether sgemm packing a transposed A with this leading dimension (in
// floats) aliases in cache: a multiple of 2 KiB (einsum.h).
bool aliasing_ld(int64_t ld) { return ld >= 512 && ld % 512 == 0; }

// Marks `op` to be copied with a padded leading dimension (whole 64-byte
// lines, and not itself a multiple of 2 KiB); returns the scratch it needs
// (`lines` lines of `length` elements a batch index).
int64_t plan_restride(GemmOperand& op, int64_t batch, int64_t lines, int64_t length) {
  const int64_t ld = (length + 15) / 16 * 16;
  op.restride_ld = aliasing_ld(ld) ? ld + 16 : ld;
  return batch * lines * op.restride_ld;
}

// Copies the operand's lines into dense [batch, lines, restride_ld] scratch.
void restride(const GemmOperand& op, int64_t batch, int64_t lines, int64_t length, const float* x,
              float* dense) {
  const int64_t total = batch * lines;
  const size_t bytes = static_cast<size_t>(length) * sizeof(float);
#pragma omp parallel for schedule(static) if (total * length > (1 << 16))
  for (int64_t t = 0; t < total; ++t) {
    const int64_t i = t / lines, line = t % lines;
    std::memcpy(dense + t * op.restride_ld, x + op.batch_offsets[i] + line * op.ld, bytes);
  }
}

// Where batch index i of an operand of `lines` k lines starts, and its
// leading dimension, as the sgemm reads it (in place, or from the copy).
int64_t read_offset(const GemmOperand& op, int64_t i, int64_t lines) {
  return op.restride_ld ? i * lines * op.restride_ld : op.batch_offsets[i];
}
int64_t read_ld(const GemmOperand& op) { return op.restride_ld ? op.restride_ld : op.ld; }

// The operand as the sgemm reads it: permuted or restrided into the scratch
// at `cursor` (which then moves past its `scratch` elements), else `x`.
// `length` is its free dim's size (m for a, n for b).
const float* staged(const GemmOperand& op, const float* x, int64_t batch, int64_t k, int64_t length,
                    int64_t scratch, float*& cursor) {
  if (!op.permute && !op.restride_ld) return x;
  if (op.permute)  // into dense canonical order
    expand(x, op.canon_strides.data(), cursor, op.canon_sizes.data(),
           static_cast<int>(op.canon_sizes.size()));
  else
    restride(op, batch, k, length, x, cursor);
  const float* copy = cursor;
  cursor += scratch;
  return copy;
}

// Scatters dense canonical C into the output's own layout.
void scatter_canonical(const GemmOperand& op, const float* dense, float* out) {
  const int rank = static_cast<int>(op.canon_sizes.size());
  // Iterate over the output in its own order: strides of dense in out's order.
  // Simple odometer over canonical order writing to out's strides.
  std::vector<int64_t> idx(rank, 0);
  int64_t total = 1;
  for (int64_t s : op.canon_sizes) total *= s;
  for (int64_t e = 0; e < total; ++e) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off += idx[d] * op.canon_strides[d];
    out[off] = dense[e];
    for (int d = rank - 1; d >= 0; --d) {
      if (++idx[d] < op.canon_sizes[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

EinsumPlan plan_einsum(const Shape& a, const Shape& b, const Shape& out) {
  const EinsumGroups g = einsum_groups(a, b, out);
  EinsumPlan p;
  p.batch = group_size(out, g.batch);
  p.m = group_size(out, g.m);
  p.n = group_size(out, g.n);
  p.k = group_size(a, g.k);
  p.a = describe(a, g.batch, g.m, g.k, true);
  p.b = describe(b, g.batch, g.k, g.n, true);
  p.c = describe(out, g.batch, g.m, g.n, false);
  if (p.c.permute) {
    // The output's m group may be the contiguous one: then C^T = B^T A^T
    // writes it in place.
    GemmOperand ct = describe(out, g.batch, g.n, g.m, false);
    if (!ct.permute) {
      p.swap = true;
      p.c = ct;
    }
  }
  if (p.a.permute) p.scratch_a = p.batch * p.m * p.k;
  if (p.b.permute) p.scratch_b = p.batch * p.k * p.n;
  if (p.c.permute) p.scratch_c = p.batch * p.m * p.n;
  // An operand stored as k lines (a read transposed, b as stored) with a
  // leading dimension that aliases is copied when the other operand's free
  // dim is 64 to 383: there sgemm ran at half its rate on Zen 3. Beside fewer
  // rows the copy costs more than it can save; beside 384 or more the
  // slowdown measured 0-6%, less than the copy.
  const auto thin = [](int64_t other) { return other >= 64 && other < 384; };
  if (!p.a.permute && p.a.transposed && p.m > 1 && aliasing_ld(p.a.ld) && thin(p.n))
    p.scratch_a = plan_restride(p.a, p.batch, p.k, p.m);
  if (!p.b.permute && !p.b.transposed && p.n > 1 && aliasing_ld(p.b.ld) && thin(p.m))
    p.scratch_b = plan_restride(p.b, p.batch, p.k, p.n);
  return p;
}

EinsumPlan plan_einsum_memo(const Shape& a, const Shape& b, const Shape& out) {
  struct Entry {
    Shape a, b, out;
    EinsumPlan plan;
  };
  // By a hash of the shapes; entries with equal hashes compared in full.
  thread_local std::unordered_multimap<size_t, Entry> memo;
  size_t h = 0;
  for (const Shape* s : {&a, &b, &out}) {
    for (const Dim& d : s->dims())
      h = h * 1000003 ^ (std::hash<std::string>()(d.name) + 31 * static_cast<size_t>(d.size));
    h = h * 1000003 + 0x9e3779b9;  // shape boundary
  }
  const auto [first, last] = memo.equal_range(h);
  for (auto it = first; it != last; ++it)
    if (it->second.a == a && it->second.b == b && it->second.out == out) return it->second.plan;
  if (memo.size() >= 4096) memo.clear();  // bounded: a long run's shapes are few
  return memo.emplace(h, Entry{a, b, out, plan_einsum(a, b, out)})->second.plan;
}

void einsum(const EinsumPlan& p, const float* a, const float* b, float* out, float* scratch) {
  float* cursor = scratch;
  const float* a_use = staged(p.a, a, p.batch, p.k, p.m, p.scratch_a, cursor);
  const float* b_use = staged(p.b, b, p.batch, p.k, p.n, p.scratch_b, cursor);
  float* c_use = p.c.permute ? cursor : out;

  if (p.k == 0 || p.m == 0 || p.n == 0) return;
  auto one = [&](int64_t i) {
    const float* ai = a_use + read_offset(p.a, i, p.k);
    const float* bi = b_use + read_offset(p.b, i, p.k);
    float* ci = c_use + p.c.batch_offsets[i];
    if (!p.swap)
      gemm_call(p.a.transposed, p.b.transposed, p.m, p.n, p.k, ai, read_ld(p.a), bi, read_ld(p.b),
                ci, p.c.ld);
    else
      gemm_call(!p.b.transposed, !p.a.transposed, p.n, p.m, p.k, bi, read_ld(p.b), ai, read_ld(p.a),
                ci, p.c.ld);
  };
  if (p.batch == 1) {
    one(0);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < p.batch; ++i) one(i);
  }
  if (p.c.permute) scatter_canonical(p.c, c_use, out);
}

void einsum_ref(const Shape& a_shape, const float* a, const Shape& b_shape, const float* b,
                const Shape& out_shape, float* out) {
  // All dims: the output's, then the contracted ones.
  std::vector<Dim> all = out_shape.dims();
  for (const Dim& d : a_shape.dims())
    if (!out_shape.has(d.name)) all.push_back(d);
  const int rank = static_cast<int>(all.size());
  const int out_rank = out_shape.rank();
  std::vector<int64_t> sa(rank, 0), sb(rank, 0), so(rank, 0);
  for (int i = 0; i < rank; ++i) {
    if (a_shape.has(all[i].name)) sa[i] = a_shape.stride(all[i].name);
    if (b_shape.has(all[i].name)) sb[i] = b_shape.stride(all[i].name);
    if (i < out_rank) so[i] = out_shape.stride(all[i].name);
  }
  std::vector<double> acc(out_shape.numel(), 0.0);
  std::vector<int64_t> idx(rank, 0);
  int64_t total = 1;
  for (const Dim& d : all) total *= d.size;
  for (int64_t e = 0; e < total; ++e) {
    int64_t oa = 0, ob = 0, oo = 0;
    for (int i = 0; i < rank; ++i) {
      oa += idx[i] * sa[i];
      ob += idx[i] * sb[i];
      oo += idx[i] * so[i];
    }
    acc[oo] += static_cast<double>(a[oa]) * b[ob];
    for (int i = rank - 1; i >= 0; --i) {
      if (++idx[i] < all[i].size) break;
      idx[i] = 0;
    }
  }
  for (size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
}

}  // namespace tessel::kernels
