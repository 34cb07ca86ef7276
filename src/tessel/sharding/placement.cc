#include "tessel/sharding/placement.h"

#include "tessel/base/error.h"

namespace tessel {

std::string Placement::to_string() const {
  switch (kind) {
    case kSplit:
      return "S(" + dim + ")";
    case kBroadcast:
      return "B";
    case kPartialSum:
      return "P(sum)";
    case kPartialMax:
      return "P(max)";
  }
  return "?";
}

Sharding Sharding::with(int axis, Placement p) const {
  Sharding s = *this;
  s.per_axis_.at(axis) = std::move(p);
  return s;
}

int Sharding::axis_of(const std::string& dim) const {
  for (size_t i = 0; i < per_axis_.size(); ++i)
    if (per_axis_[i].is_split() && per_axis_[i].dim == dim) return static_cast<int>(i);
  return -1;
}

std::string Sharding::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < per_axis_.size(); ++i) s += (i ? ", " : "") + per_axis_[i].to_string();
  return s + "]";
}

Shape Sharding::local_shape(const Shape& global, const Mesh& mesh) const {
  std::vector<Dim> dims = global.dims();
  for (int a = 0; a < axis_count(); ++a) {
    if (!per_axis_[a].is_split()) continue;
    const std::string& d = per_axis_[a].dim;
    auto i = global.index_of(d);
    if (!i) TS_THROW("sharding ", to_string(), ": split dim '", d, "' is not in ", global);
    const MeshAxis& axis = mesh.axis(a);
    if (dims[*i].size % axis.size != 0)
      TS_THROW("dim ", global[*i], " of ", global, " does not divide evenly over mesh axis '",
               axis.name, "' of size ", axis.size,
               dims[*i].size == global[*i].size
                   ? std::string()
                   : str_cat(" (its piece of ", dims[*i].size, " after the earlier axes' split)"));
    dims[*i].size /= axis.size;
  }
  return Shape(dims);
}

bool Sharding::split_after(const std::string& dim, int axis) const {
  for (int b = axis + 1; b < axis_count(); ++b)
    if (per_axis_[b].is_split() && per_axis_[b].dim == dim) return true;
  return false;
}

int64_t Sharding::local_numel(const Shape& global, const Mesh& mesh) const {
  int64_t n = global.numel();
  for (int a = 0; a < axis_count(); ++a) {
    if (!per_axis_[a].is_split()) continue;
    const std::optional<int> i = global.index_of(per_axis_[a].dim);
    int64_t cut = 1;  // this axis's size times the earlier axes' on the same dim
    for (int b = 0; b <= a; ++b)
      if (per_axis_[b] == per_axis_[a]) cut *= mesh.axis(b).size;
    if (!i || global[*i].size % cut != 0)
      return local_shape(global, mesh).numel();  // throws, naming what is wrong
    n /= mesh.axis(a).size;
  }
  return n;
}

std::vector<int64_t> Sharding::local_offsets(const Shape& global, const Mesh& mesh,
                                             const std::vector<int>& coords) const {
  std::vector<int64_t> offsets(global.rank(), 0);
  local_shape(global, mesh);  // throws, naming an uneven split
  std::vector<int64_t> piece = global.sizes();
  for (int a = 0; a < axis_count(); ++a) {  // nested: each axis cuts the piece before it
    if (!per_axis_[a].is_split()) continue;
    const int i = *global.index_of(per_axis_[a].dim);
    piece[i] /= mesh.axis(a).size;
    offsets[i] += coords[a] * piece[i];
  }
  return offsets;
}

}  // namespace tessel
