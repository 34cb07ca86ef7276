#include "tessel/sharding/mesh.h"

#include <sstream>

#include "tessel/base/error.h"

namespace tessel {

Mesh::Mesh(std::vector<MeshAxis> axes) : axes_(std::move(axes)) {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name.empty()) TS_THROW("mesh ", to_string(), ": axis ", i, " has no name");
    if (axes_[i].size < 1)
      TS_THROW("mesh ", to_string(), ": axis '", axes_[i].name, "' has size ", axes_[i].size,
               " (must be at least 1)");
    for (size_t j = 0; j < i; ++j)
      if (axes_[j].name == axes_[i].name)
        TS_THROW("mesh ", to_string(), ": axis '", axes_[i].name, "' appears twice");
  }
}

Mesh Mesh::parse(const std::string& text) {
  std::vector<MeshAxis> axes;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) continue;
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0)
      TS_THROW("mesh '", text, "': '", part, "' must look like axis=size (e.g. data=2)");
    std::string size_text = part.substr(eq + 1);
    size_t used = 0;
    int size = 0;
    try {
      size = std::stoi(size_text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != size_text.size() || size_text.empty())
      TS_THROW("mesh '", text, "': size of axis '", part.substr(0, eq), "' is '", size_text,
               "', not a whole number");
    axes.push_back({part.substr(0, eq), size});
  }
  return Mesh(std::move(axes));
}

int Mesh::rank_count() const {
  int n = 1;
  for (const MeshAxis& a : axes_) n *= a.size;
  return n;
}

int Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name) return static_cast<int>(i);
  return -1;
}

int Mesh::size_of(const std::string& name) const {
  const int a = axis_index(name);
  return a >= 0 ? axes_[a].size : 1;
}

std::vector<int> Mesh::coords(int rank) const {
  std::vector<int> c(axes_.size());
  for (int i = static_cast<int>(axes_.size()) - 1; i >= 0; --i) {
    c[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return c;
}

int Mesh::rank_of(const std::vector<int>& coords) const {
  int r = 0;
  for (size_t i = 0; i < axes_.size(); ++i) r = r * axes_[i].size + coords[i];
  return r;
}

void Mesh::check_world_size(int world_size) const {
  if (rank_count() != world_size)
    TS_THROW("mesh ", to_string(), " has ", rank_count(), " ranks but ", world_size,
             world_size == 1 ? " process is" : " processes are", " running (launch with mpirun -n ",
             rank_count(), ", or change --mesh)");
}

std::string Mesh::to_string() const {
  if (axes_.empty()) return "(single rank)";
  std::string s;
  for (const MeshAxis& a : axes_)
    s += (s.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return s;
}

}  // namespace tessel
