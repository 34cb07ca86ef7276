#include "tessel/compile/distributed.h"

#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/comm/staged_communicator.h"
#include "tessel/kernels/elementwise.h"

namespace tessel {

DistributedContext::DistributedContext(const std::string& mesh_text, const std::string& layout_text,
                                       std::optional<CollectiveStaging> staging)
    : mesh_(Mesh::parse(mesh_text)), staged_(staging.has_value()) {
  const bool under_mpi = MpiRuntime::launched_under_mpi();
  int world_size = 1;
  if (under_mpi) {
    MpiRuntime& mpi = MpiRuntime::instance();
    if (!mpi.initialized()) mpi.init(nullptr, nullptr);
    rank_ = mpi.world_rank();
    world_size = mpi.world_size();
  }
  mesh_.check_world_size(world_size);
  layout_ = layout_text.empty() ? Layout::defaults(mesh_) : Layout::parse(layout_text, mesh_);
  coords_ = mesh_.coords(rank_);
  world_ = under_mpi ? MpiRuntime::instance().world("world") : make_self_communicator("world");
  // One group per axis: the ranks that share every other coordinate.
  auto axis_comm = [&](size_t a) {
    if (!under_mpi) return make_self_communicator(mesh_.axis(a).name);
    std::vector<int> others = coords_;
    others[a] = 0;
    return MpiRuntime::instance().split(mesh_.axis(a).name, mesh_.rank_of(others), coords_[a]);
  };
  const size_t axes = mesh_.axes().size();
  for (size_t a = 0; a < axes; ++a)
    axis_comms_.push_back(staging ? std::make_unique<StagedCommunicator>(
                                        axis_comm(a), *staging->backend, staging->piece)
                                  : axis_comm(a));
  for (size_t a = 0; a < axes && staging; ++a) axis_comms_.push_back(axis_comm(a));
  for (size_t a = 0; a < axes; ++a) {
    groups_.add(mesh_.axis(a).name, axis_comms_[a].get());
    host_groups_.add(mesh_.axis(a).name, axis_comms_[staging ? axes + a : a].get());
  }
}

int64_t DistributedContext::staging_bytes(const Mesh& mesh, int64_t piece) {
  int64_t bytes = 0;
  for (const MeshAxis& a : mesh.axes())
    bytes += static_cast<int64_t>(StagedCommunicator::staging_bytes(a.size, piece));
  return bytes;
}

DistributedContext::~DistributedContext() = default;

CommStats DistributedContext::stats() const {
  CommStats total;
  for (const auto& c : axis_comms_)
    for (const auto& [group, kinds] : c->stats())
      for (const auto& [kind, count] : kinds) {
        total[group][kind].calls += count.calls;
        total[group][kind].bytes += count.bytes;
        total[group][kind].wire_bytes += count.wire_bytes;
      }
  return total;
}

void DistributedContext::reset_stats() {
  for (auto& c : axis_comms_) c->reset_stats();
  world_->reset_stats();
}

void DistributedContext::slice_local(const Shape& global, const Sharding& s, const float* full,
                                     float* local) const {
  Shape local_shape = s.local_shape(global, mesh_);
  std::vector<int64_t> offsets = s.local_offsets(global, mesh_, coords_);
  std::vector<int64_t> strides = global.strides(), sizes;
  const float* src = full;
  for (int i = 0; i < global.rank(); ++i) {
    src += offsets[i] * strides[i];
    sizes.push_back(local_shape[i].size);
  }
  kernels::expand(src, strides.data(), local, sizes.data(), global.rank());
}

std::vector<int64_t> DistributedContext::gather_counts(int64_t value) {
  // Two 24-bit halves, each exact in a float.
  constexpr int64_t kHalf = int64_t{1} << 24;
  TS_CHECK(value >= 0 && value < kHalf * kHalf, "count ", value, " out of range");
  const float mine[2] = {static_cast<float>(value / kHalf), static_cast<float>(value % kHalf)};
  std::vector<float> all(2 * mesh_.rank_count());
  world_->all_gather(mine, all.data(), 2, "gather_counts");
  std::vector<int64_t> out;
  for (size_t r = 0; r < all.size() / 2; ++r)
    out.push_back(static_cast<int64_t>(all[2 * r]) * kHalf + static_cast<int64_t>(all[2 * r + 1]));
  return out;
}

void DistributedContext::gather_full(const Shape& global, const Sharding& s, const float* local,
                                     float* full, std::optional<int> holder_axis,
                                     int holder_coord) {
  // The first replica of each block writes it into a zeroed full tensor; a
  // sum over the world then assembles it exactly (x + 0 == x).
  const int64_t n = global.numel();
  std::fill(full, full + n, 0.0f);
  place_primary(global, s, local, full, holder_axis, holder_coord);
  world_->all_reduce(full, n, ReduceKind::kSum, "gather_full");
}

void DistributedContext::place_primary(const Shape& global, const Sharding& s, const float* local,
                                       float* full, std::optional<int> holder_axis,
                                       int holder_coord) const {
  bool primary = local != nullptr;
  for (int a = 0; a < s.axis_count(); ++a)
    if (!s[a].is_split() && coords_[a] != (a == holder_axis ? holder_coord : 0)) primary = false;
  if (!primary) return;
  Shape local_shape = s.local_shape(global, mesh_);
  std::vector<int64_t> offsets = s.local_offsets(global, mesh_, coords_);
  std::vector<int64_t> idx(global.rank(), 0), strides = global.strides();
  const int last = global.rank() - 1;
  // One contiguous run per row of the innermost dim (stride 1 in both).
  const int64_t row = last >= 0 ? local_shape[last].size : 1;
  for (int64_t e = 0; e < local_shape.numel(); e += row) {
    int64_t off = 0;
    for (int i = 0; i < global.rank(); ++i) off += (idx[i] + offsets[i]) * strides[i];
    std::copy(local + e, local + e + row, full + off);
    for (int i = last - 1; i >= 0; --i) {
      if (++idx[i] < local_shape[i].size) break;
      idx[i] = 0;
    }
  }
}

}  // namespace tessel
