// A device mesh: named axes with sizes; ranks are laid out row-major.
//
// `data=2,model=2` has 4 ranks; rank r has coordinates (r / 2, r % 2). The
// mesh of one rank (no axes) is what a plain single process runs on. Small,
// immutable value.
#pragma once

#include <string>
#include <vector>

namespace tessel {

struct MeshAxis {
  std::string name;
  int size = 1;
};

class Mesh {
 public:
  Mesh() = default;
  explicit Mesh(std::vector<MeshAxis> axes);
  // "data=2,model=2"; "" is the mesh of one rank. Errors name the bad part.
  static Mesh parse(const std::string& text);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  int rank_count() const;
  int axis_index(const std::string& name) const;  // -1 if absent
  int size_of(const std::string& name) const;     // the axis's size; 1 if absent
  const MeshAxis& axis(int i) const { return axes_.at(i); }
  std::vector<int> coords(int rank) const;
  int rank_of(const std::vector<int>& coords) const;
  // Throws unless rank_count() == world_size, naming both.
  void check_world_size(int world_size) const;
  std::string to_string() const;

 private:
  std::vector<MeshAxis> axes_;
};

}  // namespace tessel
