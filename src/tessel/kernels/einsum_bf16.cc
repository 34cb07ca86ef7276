#include "tessel/kernels/einsum_bf16.h"

#include <algorithm>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/base/error.h"
#include "tessel/kernels/einsum.h"
#include "tessel/tensor/aligned_buffer.h"

namespace tessel::kernels {
namespace {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// Sizes and strides of `s` over the dims in `order` ({1}, {1} for none).
void sizes_strides(const Shape& s, const std::vector<std::string>& order, Dims& sizes,
                   Dims& strides) {
  sizes.clear();
  strides.clear();
  for (const auto& d : order) {
    sizes.push_back(s.size(d));
    strides.push_back(s.stride(d));
  }
  if (order.empty()) sizes = strides = {1};
}

Dims dense_strides(const Dims& sizes) {
  Dims st(sizes.size(), 1);
  for (int i = static_cast<int>(sizes.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * sizes[i + 1];
  return st;
}

int64_t product(const Dims& d, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= d[i];
  return n;
}

std::vector<std::string> concat(const std::vector<std::string>& a,
                                const std::vector<std::string>& b,
                                const std::vector<std::string>& c) {
  std::vector<std::string> r = a;
  r.insert(r.end(), b.begin(), b.end());
  r.insert(r.end(), c.begin(), c.end());
  return r;
}

memory::data_type type_of(bool bf16) {
  return bf16 ? memory::data_type::bf16 : memory::data_type::f32;
}

// A dense [batch.., rows, cols] matrix.
memory::desc matrix(const Dims& batch, int64_t rows, int64_t cols, memory::data_type type) {
  Dims d = batch;
  d.insert(d.end(), {rows, cols});
  return memory::desc(d, type, dense_strides(d));
}

// The matmul's view of one einsum: its dim groups, batch sizes, M, K, N,
// and the output's element count.
struct MatmulGeometry {
  EinsumGroups g;
  Dims batch;
  int64_t M = 0, K = 0, N = 0;
  int64_t c_elements = 0;
};

// A [batch.., rows, cols] matrix read in place from `s`: its batch dims'
// own strides, then `rs` and `cs`.
memory::desc strided_matrix(const Shape& s, const MatmulGeometry& geo, int64_t rows, int64_t cols,
                            int64_t rs, int64_t cs, memory::data_type type) {
  Dims d = geo.batch, st;
  for (const auto& name : geo.g.batch) st.push_back(s.stride(name));
  d.insert(d.end(), {rows, cols});
  st.insert(st.end(), {rs, cs});
  return memory::desc(d, type, st);
}

std::optional<Bf16Route>& plan_route_override() {
  static std::optional<Bf16Route> route;
  return route;
}

}  // namespace

Bf16Route bf16_route() {
  return onednn_has_bf16_matmul() ? Bf16Route::kOneDnn : Bf16Route::kWidenedF32;
}

void set_plan_bf16_route(std::optional<Bf16Route> route) { plan_route_override() = route; }

Bf16Route plan_bf16_route() { return plan_route_override().value_or(bf16_route()); }

struct EinsumBf16::Impl {
  bool empty = false;  // a zero-sized m, n, k or batch: nothing to compute
  Bf16Route route = Bf16Route::kOneDnn;
  // kWidenedF32: the f32 plan over the operands' own shapes, and their sizes
  // (c_bytes: the f32 result of a bf16 output, before rounding).
  EinsumPlan plan;
  int64_t c_numel = 0;
  Bf16Operands operands;
  // a and b: the reorder into dense bf16, the matmul's view ([batch.., M, K],
  // [batch.., K, N]), the bf16 input as it is where the strides allow, and
  // the scratch of its converted copy.
  struct Input {
    memory::desc src, dst, mm, direct;
    bool in_place = false;  // the matmul reads a bf16 input itself
    // An f32 operand already dense in canonical order is rounded by
    // round_to_bf16 (one pass, split evenly over the threads) rather than a
    // oneDNN reorder: oneDNN 2.6's reorder ran slower at 2 threads than at 1.
    bool rounded = false;
    int64_t numel = 0;
    size_t bytes = 0;
    dnnl::reorder reorder;
  };
  Input in[2];
  // The staged f32 C, its reorder into out, and the matmul's view of C.
  memory::desc c_stage, c_out, mm_c;
  memory::desc bias;  // [1.., 1, N] f32, or empty: no fused bias
  bool stage_c = false;
  size_t c_bytes = 0, pad_bytes = 0;
  std::string impl_name;
  dnnl::reorder rc;
  dnnl::matmul mm;

  bool given_bf16(int i) const { return i == 0 ? operands.a : operands.b; }

  // The steps of the constructor, in order.
  void plan_widened(const Shape& a, const Shape& b, const Shape& out);
  MatmulGeometry describe_operands(const Shape& a, const Shape& b, const Shape& out);
  void describe_matmul(const Shape& a, const Shape& b, const MatmulGeometry& geo, bool with_bias);
  void estimate_without_bf16_matmul(const Shape& out, const MatmulGeometry& geo);
  dnnl::matmul::primitive_desc choose_matmul(const Shape& out, const MatmulGeometry& geo,
                                             const dnnl::primitive_attr& attr);
  void plan_reorders(const dnnl::matmul::primitive_desc& mm_pd, const dnnl::primitive_attr& attr,
                     bool create_primitives);
};

// The kWidenedF32 route: both operands as f32 copies of their bf16 values,
// in their own (row-major) order, so the f32 plan over the same shapes reads them.
void EinsumBf16::Impl::plan_widened(const Shape& a, const Shape& b, const Shape& out) {
  in[0].numel = a.numel();
  in[1].numel = b.numel();
  c_numel = out.numel();
  empty = in[0].numel == 0 || in[1].numel == 0 || out.numel() == 0;
  if (empty) return;
  plan = plan_einsum(a, b, out);
  for (Input& x : in) x.bytes = round_up(static_cast<size_t>(x.numel) * sizeof(float));
  pad_bytes = round_up(static_cast<size_t>(plan.scratch_elements()) * sizeof(float));
  if (operands.out) c_bytes = round_up(static_cast<size_t>(out.numel()) * sizeof(float));
  impl_name = std::string("f32 sgemm on widened bf16 operands (") + onednn_cpu_isa() + ")";
}

// The reorders of a and b into dense bf16 [batch.., M, K] and [batch.., K, N]
// (or one rounding pass, or none), and the sizes of the matmul.
MatmulGeometry EinsumBf16::Impl::describe_operands(const Shape& a, const Shape& b,
                                                   const Shape& out) {
  MatmulGeometry geo;
  const EinsumGroups& g = geo.g = einsum_groups(a, b, out);
  for (const std::string& d : g.batch) geo.batch.push_back(a.size(d));
  geo.M = group_size(a, g.m);
  geo.K = group_size(a, g.k);
  geo.N = group_size(b, g.n);
  const Shape* shapes[2] = {&a, &b};
  const std::vector<std::string> orders[2] = {concat(g.batch, g.m, g.k), concat(g.batch, g.k, g.n)};
  Dims sizes, strides;
  for (int i = 0; i < 2; ++i) {
    Input& x = in[i];
    sizes_strides(*shapes[i], orders[i], sizes, strides);
    x.numel = product(sizes, 0, sizes.size());
    if (x.numel == 0) empty = true;
    x.src = memory::desc(sizes, type_of(given_bf16(i)), strides);
    x.dst = memory::desc(sizes, memory::data_type::bf16, dense_strides(sizes));
    x.rounded = !given_bf16(i) && strides == dense_strides(sizes);
    x.bytes = round_up(x.numel * sizeof(uint16_t));
  }
  sizes_strides(out, concat(g.batch, g.m, g.n), sizes, strides);
  geo.c_elements = product(sizes, 0, sizes.size());
  if (geo.c_elements == 0) empty = true;
  if (empty) return geo;
  c_out = memory::desc(sizes, type_of(operands.out), strides);
  c_stage = memory::desc(sizes, memory::data_type::f32, dense_strides(sizes));
  return geo;
}

// The matmul's operands and fused bias, and the bf16 inputs it may read in place.
void EinsumBf16::Impl::describe_matmul(const Shape& a, const Shape& b, const MatmulGeometry& geo,
                                       bool with_bias) {
  const Dims& batch = geo.batch;
  in[0].mm = matrix(batch, geo.M, geo.K, memory::data_type::bf16);
  in[1].mm = matrix(batch, geo.K, geo.N, memory::data_type::bf16);
  if (with_bias) bias = matrix(Dims(batch.size(), 1), 1, geo.N, memory::data_type::f32);
  // A bf16 operand whose row and column groups each merge into one strided
  // index is read in place; the matmul's choice of kernel decides later.
  auto strided = [&](const Shape& s, const std::vector<std::string>& rows,
                     const std::vector<std::string>& cols, int64_t nrows, int64_t ncols) {
    const int64_t rs = group_stride(s, rows, 1), cs = group_stride(s, cols, 1);
    if (rs < 0 || cs < 0) return memory::desc();
    return strided_matrix(s, geo, nrows, ncols, rs, cs, memory::data_type::bf16);
  };
  if (operands.a) in[0].direct = strided(a, geo.g.m, geo.g.k, geo.M, geo.K);
  if (operands.b) in[1].direct = strided(b, geo.g.k, geo.g.n, geo.K, geo.N);
}

// Sizes only, for a plan for another machine (or on a CPU with no bf16
// matmul): as an optimised kernel would take them, bf16 operands and C read
// and written in place wherever their strides allow, the rest converted or
// staged; the GEMM library's own scratchpad unknown and counted as 0. It
// reads nothing of this CPU, so a cluster's plan is the same on every CPU.
void EinsumBf16::Impl::estimate_without_bf16_matmul(const Shape& out, const MatmulGeometry& geo) {
  for (Input& x : in) {
    x.in_place = !x.direct.is_zero();
    if (x.in_place) x.bytes = 0;
  }
  stage_c = group_stride(out, geo.g.m, 1) < 0 || group_stride(out, geo.g.n, 1) < 0;
  if (stage_c) c_bytes = round_up(static_cast<size_t>(geo.c_elements) * sizeof(float));
  impl_name = "sizes estimated for another machine (this CPU: " + onednn_cpu_isa() + ")";
}

// The matmul primitive: C written in place when m and n each merge into one
// strided index and oneDNN has an optimised (non-reference) kernel for those
// strides, else staged in f32; bf16 inputs read in place where it can.
dnnl::matmul::primitive_desc EinsumBf16::Impl::choose_matmul(const Shape& out,
                                                             const MatmulGeometry& geo,
                                                             const dnnl::primitive_attr& attr) {
  auto try_matmul = [&](const memory::desc& c, dnnl::matmul::primitive_desc& pd) {
    for (int direct = 3; direct >= 0; --direct) {  // read bf16 inputs in place if possible
      const bool da = (direct & 1) && !in[0].direct.is_zero();
      const bool db = (direct & 2) && !in[1].direct.is_zero();
      if (((direct & 1) && !da) || ((direct & 2) && !db)) continue;
      try {
        pd = dnnl::matmul::primitive_desc(
            dnnl::matmul::desc(da ? in[0].direct : in[0].mm, db ? in[1].direct : in[1].mm, bias, c),
            attr, cpu_engine());
      } catch (const dnnl::error&) {
        continue;
      }
      if (std::string(pd.impl_info_str()).find("ref") != std::string::npos) continue;
      in[0].in_place = da;
      in[1].in_place = db;
      return true;
    }
    return false;
  };
  auto make_matmul = [&](const memory::desc& c) {
    dnnl::matmul::primitive_desc pd;
    if (try_matmul(c, pd)) return pd;
    in[0].in_place = in[1].in_place = false;  // oneDNN's reference kernel: accepted only as is
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(in[0].mm, in[1].mm, bias, c), attr,
                                        cpu_engine());
  };
  dnnl::matmul::primitive_desc mm_pd;
  const int64_t ms = group_stride(out, geo.g.m, 1), ns = group_stride(out, geo.g.n, 1);
  bool in_place = ms >= 0 && ns >= 0;
  if (in_place) {
    mm_c = strided_matrix(out, geo, geo.M, geo.N, ms, ns, type_of(operands.out));
    in_place = try_matmul(mm_c, mm_pd);
  }
  if (!in_place) {
    stage_c = true;
    mm_c = matrix(geo.batch, geo.M, geo.N, memory::data_type::f32);
    mm_pd = make_matmul(mm_c);
    c_bytes = round_up(static_cast<size_t>(geo.c_elements) * sizeof(float));
  }
  return mm_pd;
}

// The reorders around the matmul, the scratchpad they share with it, and
// (with `create_primitives`) every primitive.
void EinsumBf16::Impl::plan_reorders(const dnnl::matmul::primitive_desc& mm_pd,
                                     const dnnl::primitive_attr& attr, bool create_primitives) {
  impl_name = mm_pd.impl_info_str();
  auto reorder_pd = [&](const memory::desc& from, const memory::desc& to) {
    return dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to, attr);
  };
  size_t pad = mm_pd.scratchpad_desc().get_size();
  dnnl::reorder::primitive_desc in_pd[2], rc_pd;
  for (int i = 0; i < 2; ++i) {
    if (in[i].in_place) in[i].bytes = 0;
    if (in[i].in_place || in[i].rounded) continue;
    in_pd[i] = reorder_pd(in[i].src, in[i].dst);
    pad = std::max(pad, in_pd[i].scratchpad_desc().get_size());
  }
  if (stage_c) {
    rc_pd = reorder_pd(c_stage, c_out);
    pad = std::max(pad, rc_pd.scratchpad_desc().get_size());
  }
  pad_bytes = round_up(pad);
  if (!create_primitives) return;
  for (int i = 0; i < 2; ++i)
    if (!in[i].in_place && !in[i].rounded) in[i].reorder = dnnl::reorder(in_pd[i]);
  if (stage_c) rc = dnnl::reorder(rc_pd);
  mm = dnnl::matmul(mm_pd);
}

EinsumBf16::EinsumBf16(const Shape& a, const Shape& b, const Shape& out, bool create_primitives,
                       Bf16Operands bf16_operands, std::optional<Bf16Route> route, bool with_bias)
    : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.route = route.value_or(create_primitives ? bf16_route() : plan_bf16_route());
  p.operands = bf16_operands;
  TS_CHECK(!with_bias || p.route == Bf16Route::kOneDnn,
           "einsum bf16: a fused bias needs oneDNN's bf16 matmul");
  if (p.route == Bf16Route::kWidenedF32) {
    p.plan_widened(a, b, out);
    return;
  }
  if (create_primitives && !onednn_has_bf16_matmul())
    TS_THROW("precision bf16: oneDNN has no bf16 matmul on this CPU (its instruction set: ",
             onednn_cpu_isa(),
             "); bf16 needs AVX-512 (emulated, slower than f32), AVX512-BF16 or AMX. Use "
             "precision f32 here");
  const MatmulGeometry geo = p.describe_operands(a, b, out);
  if (p.empty) return;
  p.describe_matmul(a, b, geo, with_bias);
  const bool for_another_machine = !create_primitives && plan_route_override().has_value();
  if (!onednn_has_bf16_matmul() || for_another_machine) {
    p.estimate_without_bf16_matmul(out, geo);
    return;
  }
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::matmul::primitive_desc mm_pd = p.choose_matmul(out, geo, attr);
  p.plan_reorders(mm_pd, attr, create_primitives);
}

EinsumBf16::~EinsumBf16() = default;
EinsumBf16::EinsumBf16(EinsumBf16&&) noexcept = default;
EinsumBf16& EinsumBf16::operator=(EinsumBf16&&) noexcept = default;

size_t EinsumBf16::scratch_bytes() const {
  const Impl& p = *impl_;
  return p.empty ? 0 : p.in[0].bytes + p.in[1].bytes + p.c_bytes + p.pad_bytes;
}

std::string EinsumBf16::implementation() const { return impl_->impl_name; }

Bf16Route EinsumBf16::route() const { return impl_->route; }

void EinsumBf16::run(const void* a, const void* b, void* out, void* scratch,
                     const float* bias) const {
  const Impl& p = *impl_;
  if (p.empty) return;
  const void* inputs[2] = {a, b};
  uint8_t* copies[2] = {static_cast<uint8_t*>(scratch),
                        static_cast<uint8_t*>(scratch) + p.in[0].bytes};
  uint8_t* const c_copy = copies[1] + p.in[1].bytes;
  uint8_t* const pad = c_copy + p.c_bytes;
  if (p.route == Bf16Route::kWidenedF32) {
    float *a32 = reinterpret_cast<float*>(copies[0]), *b32 = reinterpret_cast<float*>(copies[1]);
    // A bf16 output: the f32 result staged, then rounded into it.
    float* c32 = p.operands.out ? reinterpret_cast<float*>(c_copy) : static_cast<float*>(out);
    for (int i = 0; i < 2; ++i) {
      float* widened = reinterpret_cast<float*>(copies[i]);
      if (p.given_bf16(i))
        widen_bf16(static_cast<const uint16_t*>(inputs[i]), widened, p.in[i].numel);
      else
        round_bf16_in_f32(static_cast<const float*>(inputs[i]), widened, p.in[i].numel);
    }
    einsum(p.plan, a32, b32, c32, reinterpret_cast<float*>(pad));
    if (p.operands.out) round_to_bf16(c32, static_cast<uint16_t*>(out), p.c_numel);
    return;
  }
  TS_CHECK(p.mm, "einsum bf16: primitives were not created (a plan-only instance)");
  const dnnl::engine& e = cpu_engine();
  static dnnl::stream s(e);
  memory pad_mem(memory::desc({static_cast<int64_t>(p.pad_bytes)}, memory::data_type::u8,
                              memory::format_tag::a),
                 e, pad);
  memory mm_in[2];
  for (int i = 0; i < 2; ++i) {
    const Impl::Input& x = p.in[i];
    void* given = const_cast<void*>(inputs[i]);
    if (x.rounded) {
      round_to_bf16(static_cast<const float*>(given), reinterpret_cast<uint16_t*>(copies[i]),
                    x.numel);
    } else if (!x.in_place) {
      memory from(x.src, e, given), to(x.dst, e, copies[i]);
      x.reorder.execute(s,
                        {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, pad_mem}});
    }
    mm_in[i] = memory(x.in_place ? x.direct : x.mm, e, x.in_place ? given : copies[i]);
  }
  memory mm_c(p.mm_c, e, p.stage_c ? static_cast<void*>(c_copy) : static_cast<void*>(out));
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mm_in[0]},
                                       {DNNL_ARG_WEIGHTS, mm_in[1]},
                                       {DNNL_ARG_DST, mm_c},
                                       {DNNL_ARG_SCRATCHPAD, pad_mem}};
  TS_CHECK(p.bias.is_zero() == (bias == nullptr),
           "einsum bf16: a bias must be given exactly when the einsum was built with one");
  if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, e, const_cast<float*>(bias)));
  p.mm.execute(s, args);
  if (p.stage_c) {
    memory c_stage(p.c_stage, e, c_copy), c_out(p.c_out, e, out);
    p.rc.execute(s,
                 {{DNNL_ARG_FROM, c_stage}, {DNNL_ARG_TO, c_out}, {DNNL_ARG_SCRATCHPAD, pad_mem}});
  }
  s.wait();
}

std::string onednn_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

bool onednn_has_bf16_matmul() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
         cpu_has_native_bf16();
}

bool cpu_has_native_bf16() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::string bf16_matmul_note() {
  std::string note = "precision bf16: matmul on " + onednn_cpu_isa();
  if (bf16_route() == Bf16Route::kWidenedF32)
    return note +
           " by f32 GEMM on widened bf16 operands (WARNING: oneDNN has no bf16 matmul on "
           "this CPU; the operands are rounded to bf16 and multiplied by f32 units, so bf16 is "
           "slower than f32 here)";
  if (!cpu_has_native_bf16())
    note +=
        " (WARNING: this CPU has neither AVX512-BF16 nor AMX; oneDNN emulates bf16, so bf16 "
        "will be slower than f32)";
  return note;
}

}  // namespace tessel::kernels
