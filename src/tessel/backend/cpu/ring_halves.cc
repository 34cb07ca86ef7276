#include "tessel/backend/cpu/ring_halves.h"

#include <cstring>
#include <memory>
#include <vector>

#include "tessel/base/bf16.h"
#include "tessel/sharding/context_parallel.h"

namespace tessel {
namespace {

// Where a half lives in `order`, and which half a slot holds there.
HalfPlace place_in(HalfOrder order, int half, int ranks) {
  return order == HalfOrder::kBalanced ? balanced_place(half, ranks) : contiguous_place(half);
}
int half_in(HalfOrder order, int rank, int ranks, int slot) {
  return order == HalfOrder::kBalanced ? balanced_half(rank, ranks, slot)
                                       : contiguous_half(rank, slot);
}

// Copies half `from` of `src` (or all of a packed half when from < 0) into
// half `to` of `dst` (or a packed half when to < 0), widening bf16.
void copy_half(kernels::AttentionInput src, int from, float* dst, int to, const Halves& g) {
  const int64_t run = g.half() * g.inner;
  auto at = [&](int slot, int64_t o) {
    return slot < 0 ? o * run : o * g.len * g.inner + g.offset(slot);
  };
  for (int64_t o = 0; o < g.outer; ++o) {
    float* d = dst + at(to, o);
    if (!src.bf16) {
      if (d == static_cast<const float*>(src.data) + at(from, o)) continue;  // in place
      std::memcpy(d, static_cast<const float*>(src.data) + at(from, o),
                  static_cast<size_t>(run) * sizeof(float));
      continue;
    }
    const uint16_t* s = static_cast<const uint16_t*>(src.data) + at(from, o);
    for (int64_t j = 0; j < run; ++j) d[j] = bf16_bits_to_f32(s[j]);
  }
}

}  // namespace

Halves halves_of(const Shape& shape, const std::string& seq_dim) {
  Halves g;
  g.len = shape.size(seq_dim);
  g.inner = shape.stride(seq_dim);
  g.outer = shape.numel() / (g.len * g.inner);
  return g;
}

void exchange_halves(Communicator& comm, kernels::AttentionInput src, float* dst, const Halves& g,
                     HalfOrder to, float* stage, int tag, const std::string& op) {
  const HalfOrder from = to == HalfOrder::kBalanced ? HalfOrder::kContiguous : HalfOrder::kBalanced;
  const int rank = comm.rank(), ranks = comm.size();
  const int64_t run = g.half() * g.inner, piece = g.outer * run;
  // Every half that leaves is packed before any half of dst is written, and
  // at most one half stays (on n >= 2 ranks), so dst may be src (in place).
  std::vector<std::unique_ptr<CommRequest>> sent;
  int stays = -1;
  for (int slot = 0; slot < 2; ++slot) {
    const int half = half_in(from, rank, ranks, slot);
    const HalfPlace dest = place_in(to, half, ranks);
    if (dest.rank == rank) {
      stays = slot;
      continue;
    }
    copy_half(src, slot, stage + slot * piece, -1, g);
    sent.push_back(comm.start_send(stage + slot * piece, piece, dest.rank, tag + half, op));
  }
  if (stays >= 0)
    copy_half(src, stays, dst, place_in(to, half_in(from, rank, ranks, stays), ranks).slot, g);
  float* received = stage + 2 * piece;
  for (int slot = 0; slot < 2; ++slot) {
    const int half = half_in(to, rank, ranks, slot);
    const HalfPlace source = place_in(from, half, ranks);
    if (source.rank == rank) continue;
    comm.recv(received, piece, source.rank, tag + half, op);
    copy_half({received, false}, -1, dst, slot, g);
  }
  for (std::unique_ptr<CommRequest>& s : sent) s->wait();
}

}  // namespace tessel
