// Named dimensions and shapes.
//
// A Dim is a name and a size ("embed"=384). A Shape is an ordered list of dims
// with distinct names; the order is the storage order (row-major, last dim
// contiguous). Two dims of equal size but different names are different: all
// shape rules match dims by name and report mismatches with names and sizes.
// Both are small immutable-by-convention values.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace tessel {

struct Dim {
  std::string name;
  int64_t size = 0;

  bool operator==(const Dim&) const = default;
};

std::ostream& operator<<(std::ostream& out, const Dim& dim);

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims);
  explicit Shape(std::vector<Dim> dims);

  const std::vector<Dim>& dims() const { return dims_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  const Dim& operator[](int i) const { return dims_[i]; }
  int64_t numel() const;

  bool has(const std::string& name) const { return index_of(name).has_value(); }
  std::optional<int> index_of(const std::string& name) const;
  // REQUIRES: has(name); otherwise throws naming the dim and this shape.
  const Dim& dim(const std::string& name) const;
  int64_t size(const std::string& name) const { return dim(name).size; }
  // Row-major element stride of the named dim.
  int64_t stride(const std::string& name) const;
  std::vector<int64_t> strides() const;
  std::vector<std::string> names() const;
  std::vector<int64_t> sizes() const;

  // This shape without the named dims (order kept).
  Shape without(const std::vector<std::string>& names) const;
  // True if every dim of `other` is in this shape with the same size.
  bool contains_all(const Shape& other) const;

  bool operator==(const Shape&) const = default;
  std::string to_string() const;

 private:
  std::vector<Dim> dims_;
};

std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace tessel
