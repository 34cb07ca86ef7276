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
    if (int first = axis_of(d); first != a)
      TS_THROW("sharding ", to_string(), " splits dim '", d, "' on two mesh axes ('",
               mesh.axis(first).name, "' and '", mesh.axis(a).name, "')");
    auto i = global.index_of(d);
    if (!i) TS_THROW("sharding ", to_string(), ": split dim '", d, "' is not in ", global);
    const MeshAxis& axis = mesh.axis(a);
    if (dims[*i].size % axis.size != 0)
      TS_THROW("dim ", dims[*i], " of ", global, " does not divide evenly over mesh axis '",
               axis.name, "' of size ", axis.size);
    dims[*i].size /= axis.size;
  }
  return Shape(dims);
}

int64_t Sharding::local_numel(const Shape& global, const Mesh& mesh) const {
  int64_t n = global.numel();
  for (int a = 0; a < axis_count(); ++a) {
    if (!per_axis_[a].is_split()) continue;
    const std::optional<int> i = global.index_of(per_axis_[a].dim);
    const int size = mesh.axis(a).size;
    if (!i || global[*i].size % size != 0 || axis_of(per_axis_[a].dim) != a)
      return local_shape(global, mesh).numel();  // throws, naming what is wrong
    n /= size;
  }
  return n;
}

std::vector<int64_t> Sharding::local_offsets(const Shape& global, const Mesh& mesh,
                                             const std::vector<int>& coords) const {
  std::vector<int64_t> offsets(global.rank(), 0);
  Shape local = local_shape(global, mesh);
  for (int a = 0; a < axis_count(); ++a) {
    if (!per_axis_[a].is_split()) continue;
    int i = *global.index_of(per_axis_[a].dim);
    offsets[i] = coords[a] * local[i].size;
  }
  return offsets;
}

}  // namespace tessel
