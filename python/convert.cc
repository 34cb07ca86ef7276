// Conversions between Python objects and Tessel's shapes, dtypes, JSON and
// buffers, shared by the binding files.
#include <vector>

#include "bindings.h"
#include "tessel/base/error.h"

namespace tessel::python {

Shape to_shape(const py::handle& obj) {
  std::vector<Dim> dims;
  if (py::isinstance<py::dict>(obj)) {
    for (auto item : py::reinterpret_borrow<py::dict>(obj))
      dims.push_back(Dim{py::cast<std::string>(item.first), py::cast<int64_t>(item.second)});
  } else if (py::isinstance<py::sequence>(obj) && !py::isinstance<py::str>(obj)) {
    for (auto item : py::reinterpret_borrow<py::sequence>(obj)) {
      auto pair = py::reinterpret_borrow<py::sequence>(item);
      if (py::len(pair) != 2)
        TS_THROW("a dim is a (name, size) pair, got ", py::cast<std::string>(py::repr(item)));
      dims.push_back(Dim{py::cast<std::string>(pair[0]), py::cast<int64_t>(pair[1])});
    }
  } else {
    TS_THROW("a shape is a dict {name: size} or a list of (name, size) pairs, got ",
             py::cast<std::string>(py::repr(obj)));
  }
  return Shape(std::move(dims));
}

py::list from_shape(const Shape& shape) {
  py::list out;
  for (const Dim& d : shape.dims()) out.append(py::make_tuple(d.name, d.size));
  return out;
}

std::vector<py::ssize_t> sizes_of(const Shape& shape) {
  std::vector<py::ssize_t> sizes;
  for (const Dim& d : shape.dims()) sizes.push_back(d.size);
  return sizes;
}

DType to_dtype(const std::string& name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "i32" || name == "int32") return DType::kI32;
  TS_THROW("dtype must be \"f32\" or \"i32\", got \"", name, "\"");
}

nlohmann::json to_json(const py::handle& obj) {
  py::object dumps = py::module_::import("json").attr("dumps");
  return nlohmann::json::parse(py::cast<std::string>(dumps(obj)));
}

py::object from_json(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump());
}

void check_sizes(const py::array& a, const Shape& shape, const std::string& what) {
  bool same = a.ndim() == shape.rank();
  for (int i = 0; same && i < shape.rank(); ++i) same = a.shape(i) == shape[i].size;
  if (same) return;
  TS_THROW(what, " has shape ", shape.to_string(), "; the array's sizes are (",
           str_join(std::vector<py::ssize_t>(a.shape(), a.shape() + a.ndim()), ", "),
           a.ndim() == 1 ? ",)" : ")");
}

py::array to_numpy(const DeviceTensor& t) {
  py::array_t<float> a(sizes_of(t.shape()));
  t.read(a.mutable_data());
  return a;
}

}  // namespace tessel::python
