#include "tessel/backend/cpu/ring_halves.h"

#include <cstring>
#include <memory>
#include <vector>

#include "tessel/base/bf16.h"

namespace tessel {
namespace {

// Copies half `from` of `src` (or all of a packed half when from < 0) into
// half `to` of `dst` (or a packed half when to < 0), widening bf16.
void copy_half(kernels::AttentionInput src, int from, float* dst, int to, const Halves& g) {
  const int64_t run = g.half() * g.inner;
  auto at = [&](int slot, int64_t o) {
    return slot < 0 ? o * run : o * g.len * g.inner + g.offset(slot);
  };
  for (int64_t o = 0; o < g.outer; ++o) {
    float* d = dst + at(to, o);
    if (src.bf16) {
      const uint16_t* s = static_cast<const uint16_t*>(src.data) + at(from, o);
      for (int64_t j = 0; j < run; ++j) d[j] = bf16_bits_to_f32(s[j]);
    } else if (const float* s = static_cast<const float*>(src.data) + at(from, o); s != d) {
      std::memcpy(d, s, static_cast<size_t>(run) * sizeof(float));  // (s == d: in place)
    }
  }
}

}  // namespace

Halves halves_of(const Shape& shape, const std::string& seq_dim) {
  const int64_t len = shape.size(seq_dim), inner = shape.stride(seq_dim);
  return {shape.numel() / (len * inner), len, inner};
}

void HalfExchange::operator()(kernels::AttentionInput src, float* dst, const Halves& g,
                              HalfOrder to) {
  const HalfOrder from = to == HalfOrder::kBalanced ? HalfOrder::kContiguous : HalfOrder::kBalanced;
  const int rank = comm.rank(), ranks = comm.size();
  const int64_t piece = g.outer * g.half() * g.inner;
  std::vector<std::unique_ptr<CommRequest>> sent;
  int stays = -1;
  for (int slot = 0; slot < 2; ++slot) {
    const int half = half_at(from, rank, ranks, slot);
    const HalfPlace dest = place_of(to, half, ranks);
    if (dest.rank == rank) {
      stays = slot;
      continue;
    }
    copy_half(src, slot, stage + slot * piece, -1, g);
    sent.push_back(comm.start_send(stage + slot * piece, piece, dest.rank, tag + half, op));
  }
  if (stays >= 0)
    copy_half(src, stays, dst, place_of(to, half_at(from, rank, ranks, stays), ranks).slot, g);
  for (int slot = 0; slot < 2; ++slot) {
    const int half = half_at(to, rank, ranks, slot);
    const HalfPlace source = place_of(from, half, ranks);
    if (source.rank == rank) continue;
    comm.recv(stage + 2 * piece, piece, source.rank, tag + half, op);
    copy_half({stage + 2 * piece, false}, -1, dst, slot, g);
  }
  for (std::unique_ptr<CommRequest>& s : sent) s->wait();
  tag += 2 * ranks;
}

}  // namespace tessel
