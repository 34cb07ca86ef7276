// Einsum in bf16 with f32 accumulation, through oneDNN's matmul primitive.
//
// Each operand is rounded to bf16 (round to nearest even) into dense scratch
// in canonical order, [batch.., m.., k..] for a and [batch.., k.., n..] for
// b: by round_to_bf16 (base/bf16.h) where the operand is already dense in
// that order, else by a oneDNN reorder that reads the operand's own strides
// (so attention's (batch, seq, heads, head) layouts need no f32 transpose
// first). The matmul
// multiplies them with f32 accumulation and writes the output (f32, or bf16
// rounded to nearest even where the caller stores it in bf16) straight into
// its own strides when oneDNN has an optimised kernel for that layout;
// otherwise into dense f32 scratch, reordered (and rounded) into the output
// afterwards.
// Every byte it needs (the bf16 copies, the f32 staging, oneDNN's own
// scratchpad) is in scratch_bytes(), so the memory plan reserves it.
// Primitives are created once, in the constructor; run() allocates nothing
// but oneDNN's small per-call memory handles.
//
// Where oneDNN has no bf16 matmul (below AVX-512), the same numerics run by
// another route (Bf16Route::kWidenedF32): each operand is rounded to bf16 and
// widened back to f32 (or, given in bf16, widened; exact) into dense scratch
// in its own order, and the f32 GEMM of kernels/einsum.h multiplies them.
// A product of two bf16 values is exact in f32, so only the summation order
// differs from a bf16 matmul with f32 accumulation. Its scratch (both f32
// copies, the f32 plan's own permute scratch and, for a bf16 output, the f32
// result before rounding) is in scratch_bytes() too.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "tessel/base/shape.h"

namespace tessel::kernels {

// How a bf16 einsum multiplies: oneDNN's bf16 matmul primitive, or the f32
// GEMM on operands rounded to bf16 and widened to f32 (any CPU).
enum class Bf16Route { kOneDnn, kWidenedF32 };
// The route this CPU runs: kOneDnn where onednn_has_bf16_matmul(), else kWidenedF32.
Bf16Route bf16_route();
// The route plan-only instances size (dry runs, the planner): this CPU's by
// default, so a dry run predicts this machine's run to the byte. A plan for
// another machine (`tessel plan --cluster`, and so `--config` of a
// published run, which names its cluster) sets kOneDnn: its sizes are then
// the device-independent estimate on every CPU, whatever oneDNN would
// choose here: bf16 operands read and the output written in place wherever
// their m, n and k groups each merge into one strided index, every other
// operand a dense bf16 copy, a C that cannot be written in place staged in
// f32, and the GEMM library's own workspace counted as 0. So a cluster's
// plan does not depend on the CPU that plans it. Process-wide; nullopt
// restores the default.
void set_plan_bf16_route(std::optional<Bf16Route> route);
Bf16Route plan_bf16_route();

// Which operands run() takes in bf16 (row-major over their own shape). An
// input given in bf16 (a weight's once-per-step copy, a bf16-stored
// activation) is read in place where oneDNN has an optimised kernel for its
// strides, else reordered (bf16 to bf16) into the dense scratch copy. A bf16
// output (a value stored in bf16) receives the f32 result rounded to nearest
// even: the same bits as writing f32 and rounding it afterwards.
struct Bf16Operands {
  bool a = false, b = false, out = false;
};

class EinsumBf16 {
 public:
  // REQUIRES: shapes satisfy the einsum shape rule (op_table.h). `route`
  // defaults to bf16_route() (plan_bf16_route() when !create_primitives).
  // With create_primitives = false only the sizes are computed (dry runs,
  // plans); for kOneDnn they are estimated (operands and C in place where
  // strides allow, no oneDNN scratchpad) where onednn_has_bf16_matmul() is
  // false or a plan for another machine set the route
  // (set_plan_bf16_route), so a bf16 plan for another machine compiles
  // here and its sizes are the same on every CPU. kOneDnn
  // with create_primitives throws a clear error where
  // onednn_has_bf16_matmul() is false.
  // with_bias (oneDNN's route only): run() also adds an f32 bias over the
  // output's n dims (the dims of b that are in out but not in a), in their
  // order, to every row of the product before it is stored: the same bits
  // as storing the f32 product and adding the bias in f32 afterwards.
  EinsumBf16(const Shape& a, const Shape& b, const Shape& out, bool create_primitives = true,
             Bf16Operands bf16_operands = {}, std::optional<Bf16Route> route = std::nullopt,
             bool with_bias = false);
  ~EinsumBf16();
  EinsumBf16(EinsumBf16&&) noexcept;
  EinsumBf16& operator=(EinsumBf16&&) noexcept;

  size_t scratch_bytes() const;
  // out = einsum(a, b); a, b and out are f32, or bf16 as given in the
  // constructor; scratch holds scratch_bytes() bytes, 64-byte aligned.
  void run(const void* a, const void* b, void* out, void* scratch,
           const float* bias = nullptr) const;
  // oneDNN's name for the matmul implementation it chose (e.g.
  // "brg:avx512_core_bf16"), or the widened route's description.
  std::string implementation() const;
  Bf16Route route() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The instruction set oneDNN dispatches to on this CPU ("avx512_core_bf16", ...).
std::string onednn_cpu_isa();
// True when oneDNN (2.6) has a bf16 matmul on this CPU at all: AVX-512 and
// up (emulated on plain AVX-512). Below that (AVX2), bf16 einsums take the
// widened-f32 route.
bool onednn_has_bf16_matmul();
// True when the CPU multiplies bf16 natively (AVX512-BF16 or AMX); otherwise
// oneDNN emulates bf16 and it runs slower than f32.
bool cpu_has_native_bf16();
// One line for the start of a bf16 run: the ISA and route, and a warning
// where bf16 is emulated (plain AVX-512, or the widened-f32 route).
std::string bf16_matmul_note();

}  // namespace tessel::kernels
