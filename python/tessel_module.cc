// The `_tessel` extension module: its parts (graph building, programs, the
// model registry, training) and the translation of tessel::Error into the
// Python exception tessel.Error (a RuntimeError) with the same message; and
// the CLI's way of ending a job on an error (comm/fatal.h), for the package's
// excepthook.
#include "bindings.h"
#include "tessel/base/error.h"
#include "tessel/comm/fatal.h"

PYBIND11_MODULE(_tessel, m) {
  m.doc() = "Tessel: named-dim models trained on any mesh (C++ core)";
  pybind11::register_exception<tessel::Error>(m, "Error", PyExc_RuntimeError);
  tessel::python::bind_graph(m);
  tessel::python::bind_tuple_ops(m);
  tessel::python::bind_program(m);
  tessel::python::bind_registry(m);
  tessel::python::bind_train(m);
  tessel::python::bind_trainer_step(m);
  m.def("_report_fatal_error", &tessel::report_fatal_error, pybind11::arg("message"),
        pybind11::arg("code"),
        "Prints the error; under mpirun with MPI running, aborts every rank (MPI_Abort).");
}
