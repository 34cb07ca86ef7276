// The `_tessel` extension module: its parts (graph building, programs, the
// model registry, training) and the translation of tessel::Error into the
// Python exception tessel.Error (a RuntimeError) with the same message.
#include "bindings.h"
#include "tessel/base/error.h"

PYBIND11_MODULE(_tessel, m) {
  m.doc() = "Tessel: named-dim models trained on any mesh (C++ core)";
  pybind11::register_exception<tessel::Error>(m, "Error", PyExc_RuntimeError);
  tessel::python::bind_graph(m);
  tessel::python::bind_program(m);
  tessel::python::bind_registry(m);
  tessel::python::bind_train(m);
}
