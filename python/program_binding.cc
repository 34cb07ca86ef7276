// tessel.Program: a Builder's graph compiled for some outputs, run on NumPy.
//
// Parameters live outside the program: bind_param() binds a float32
// C-contiguous NumPy array's own memory (no copy; the program keeps a
// reference), or init_params() makes them as the trainer would (Philox,
// keyed by name, so the same values as `tessel train` with that seed) in
// the backend's device memory and returns copies of them.
// Inputs and outputs live in the program's arena, which is its backend's
// device memory: run(name=array, ...) and set_input() copy arrays in,
// input(name) and the outputs run() returns are copies out (new arrays).
#include <pybind11/stl.h>

#include <map>
#include <memory>

#include "bindings.h"
#include "tessel/base/error.h"
#include "tessel/runtime/program.h"
#include "tessel/train/param_store.h"

namespace tessel::python {
namespace {

struct PyProgram {
  std::unique_ptr<Program> program;
  std::vector<ValueId> outputs;
  std::map<std::string, py::object> bound;  // NumPy arrays bound as parameters
  std::unique_ptr<ParamStore> store;        // init_params()

  const Node& node(ValueId v) const { return program->graph().node(v); }
};

void copy_input(PyProgram& p, const std::string& name, const py::handle& value) {
  const Node& n = p.node(p.program->input_id(name));
  py::array a =
      n.dtype == DType::kI32
          ? py::array(
                py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(value))
          : py::array(py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(value));
  if (!a)
    TS_THROW("input '", name, "': cannot convert the value to a ", dtype_name(n.dtype), " array");
  check_sizes(a, n.shape, "input '" + name + "'");
  p.program->write_input(name, a.data(), static_cast<size_t>(a.nbytes()));
}

// A new array holding a copy of value `v`.
py::array copy_out(PyProgram& p, ValueId v) {
  const Node& n = p.node(v);
  const std::vector<py::ssize_t> sizes = sizes_of(n.shape);
  py::array a = n.dtype == DType::kI32 ? py::array(py::array_t<int32_t>(sizes))
                                       : py::array(py::array_t<float>(sizes));
  p.program->read(v, a.mutable_data());
  return a;
}

}  // namespace

void bind_program(py::module_& m) {
  py::class_<PyProgram>(m, "Program", "A graph compiled for its outputs, run on NumPy arrays.")
      .def(py::init([](const PyBuilder& b, std::vector<ValueId> outputs) {
             auto p = std::make_unique<PyProgram>();
             const Graph& g = b.get().graph();
             p->program = computing([&] { return std::make_unique<Program>(g, outputs); });
             p->outputs = std::move(outputs);
             return p;
           }),
           py::arg("builder"), py::arg("outputs"))
      .def(
          "bind_param",
          [](PyProgram& p, const std::string& name, py::array a) {
            const ValueId id = p.program->graph().find(name);
            if (id < 0 || p.node(id).kind != OpKind::kParam)
              TS_THROW("program has no parameter named '", name, "'");
            if (!py::isinstance<py::array_t<float>>(a) || !(a.flags() & py::array::c_style) ||
                !a.writeable())
              TS_THROW("parameter '", name,
                       "': bind a writable float32 C-contiguous array (np.ascontiguousarray(x, "
                       "dtype=np.float32)); it is used in place, without a copy");
            check_sizes(a, p.node(id).shape, "parameter '" + name + "'");
            p.program->bind_param(name, static_cast<float*>(a.mutable_data()));
            p.bound[name] = a;
          },
          py::arg("name"), py::arg("array"))
      .def(
          "init_params",
          [](PyProgram& p, uint64_t seed) {
            p.store = std::make_unique<ParamStore>(p.program->graph(), p.program->backend(), seed);
            py::dict out;
            for (ParamEntry& e : p.store->entries()) {
              p.program->bind_param(e.name, e.value.device_f32());
              p.bound.erase(e.name);
              out[py::str(e.name)] = to_numpy(e.value);
            }
            return out;
          },
          py::arg("seed"),
          "Makes and binds every parameter as the trainer initialises it from `seed`, in the "
          "program's device memory; returns {name: array} (copies: writing them changes "
          "nothing; bind_param binds an array of your own).")
      .def(
          "input",
          [](PyProgram& p, const std::string& name) {
            return copy_out(p, p.program->input_id(name));
          },
          py::arg("name"), "A copy of the input's current value.")
      .def("set_input", &copy_input, py::arg("name"), py::arg("array"),
           "Copies an array into the input's storage.")
      .def(
          "output", [](PyProgram& p, ValueId v) { return copy_out(p, v); }, py::arg("value"),
          "A copy of a kept value, as the last run left it.")
      .def(
          "run",
          [](PyProgram& p, py::kwargs inputs) {
            for (auto item : inputs) copy_input(p, py::cast<std::string>(item.first), item.second);
            computing([&] { p.program->run(); });
            py::list out;
            for (ValueId v : p.outputs) out.append(copy_out(p, v));
            return out;
          },
          "Copies the keyword inputs into the arena, runs, and returns copies of the outputs.")
      .def_property_readonly("arena_bytes",
                             [](const PyProgram& p) { return p.program->arena_bytes(); })
      .def_property_readonly("flops",
                             [](const PyProgram& p) { return p.program->flops_per_run(); });
}

}  // namespace tessel::python
