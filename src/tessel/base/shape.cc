#include "tessel/base/shape.h"

#include <algorithm>
#include <sstream>

#include "tessel/base/checked_math.h"
#include "tessel/base/error.h"

namespace tessel {

std::ostream& operator<<(std::ostream& out, const Dim& dim) {
  return out << dim.name << "=" << dim.size;
}

Shape::Shape(std::initializer_list<Dim> dims) : Shape(std::vector<Dim>(dims)) {}

Shape::Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i].name.empty()) TS_THROW("shape ", to_string(), ": dim ", i, " has no name");
    if (dims_[i].size <= 0)
      TS_THROW("shape ", to_string(), ": dim '", dims_[i].name, "' has size ", dims_[i].size,
               " (sizes must be positive)");
    for (size_t j = 0; j < i; ++j)
      if (dims_[j].name == dims_[i].name)
        TS_THROW("shape ", to_string(), ": dim name '", dims_[i].name, "' appears twice");
  }
  // numel() and byte counts stay exact: the product must fit, with room for
  // 8-byte elements.
  // (The messages are built only on overflow: shapes are made by the
  // million in the planner's compiles.)
  int64_t n = 1;
  for (const Dim& d : dims_) {
    int64_t next = 0;
    if (__builtin_mul_overflow(n, d.size, &next)) checked_mul(n, d.size, "shape " + to_string());
    n = next;
  }
  if (int64_t bytes = 0; __builtin_mul_overflow(n, 8, &bytes))
    checked_mul(n, 8, "the byte size of shape " + to_string());
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (const Dim& d : dims_) n *= d.size;
  return n;
}

std::optional<int> Shape::index_of(const std::string& name) const {
  for (size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == name) return static_cast<int>(i);
  return std::nullopt;
}

const Dim& Shape::dim(const std::string& name) const {
  auto i = index_of(name);
  if (!i) TS_THROW("dim '", name, "' is not in shape ", to_string());
  return dims_[*i];
}

int64_t Shape::stride(const std::string& name) const {
  auto i = index_of(name);
  if (!i) TS_THROW("dim '", name, "' is not in shape ", to_string());
  int64_t stride = 1;
  for (int k = *i + 1; k < rank(); ++k) stride *= dims_[k].size;
  return stride;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t running = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    s[i] = running;
    running *= dims_[i].size;
  }
  return s;
}

std::vector<std::string> Shape::names() const {
  std::vector<std::string> n;
  for (const Dim& d : dims_) n.push_back(d.name);
  return n;
}

std::vector<int64_t> Shape::sizes() const {
  std::vector<int64_t> s;
  for (const Dim& d : dims_) s.push_back(d.size);
  return s;
}

Shape Shape::without(const std::vector<std::string>& names) const {
  std::vector<Dim> kept;
  for (const Dim& d : dims_)
    if (std::find(names.begin(), names.end(), d.name) == names.end()) kept.push_back(d);
  return Shape(kept);
}

bool Shape::contains_all(const Shape& other) const {
  for (const Dim& d : other.dims_) {
    auto i = index_of(d.name);
    if (!i || dims_[*i].size != d.size) return false;
  }
  return true;
}

std::string Shape::to_string() const {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < dims_.size(); ++i) out << (i ? ", " : "") << dims_[i];
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.to_string(); }

}  // namespace tessel
