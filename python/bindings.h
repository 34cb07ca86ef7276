// The pieces of the `tessel` Python extension (_tessel), one binding file per
// concept, and the conversions they share.
//
// Invariants: every tessel::Error reaches Python as tessel.Error with the
// same message; an array crosses without a copy only where NumPy's memory is
// bound in place (Program.bind_param; the program keeps a reference), and
// inputs, outputs and parameter shards come back as copies; the GIL is released
// around compiling and running and taken again before any Python code (a model
// builder) runs.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <signal.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "tessel/backend/device_tensor.h"
#include "tessel/base/dtype.h"
#include "tessel/base/shape.h"
#include "tessel/ir/builder.h"

namespace tessel::python {

namespace py = pybind11;

void bind_graph(py::module_& m);
void bind_tuple_ops(py::module_& m);  // after bind_graph: adds to its Builder
void bind_program(py::module_& m);
void bind_registry(py::module_& m);
void bind_train(py::module_& m);
void bind_trainer_step(py::module_& m);  // after bind_train: adds to its Trainer

// Held while Tessel computes for Python: the GIL released, and SIGINT and
// SIGTERM blocked in this thread, so also in every thread it starts
// (OpenMP's team, MPI's). Python's handlers must not run on a thread inside a
// oneDNN JIT GEMM, which points the stack pointer at heap memory: the
// handler's frame would be written over the heap (docs/failures.md, "SIGINT
// and SIGTERM"). A signal that arrives meanwhile stays pending until the
// scope ends (the GIL taken again first), so Ctrl-C raises KeyboardInterrupt
// after the step. Usable as py::call_guard<ComputeScope>.
class ComputeScope {
 public:
  ComputeScope() = default;
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

 private:
  struct BlockedStopSignals {
    BlockedStopSignals();
    ~BlockedStopSignals();  // restores the caller's mask
    sigset_t previous;
  };
  BlockedStopSignals blocked_;            // destroyed last: after the GIL is back
  pybind11::gil_scoped_release release_;  // destroyed first
};

// f() run inside a ComputeScope; its result is returned once the GIL is back.
template <class F>
auto computing(F&& f) {
  ComputeScope compute;
  return f();
}

// A shape from Python: a dict {"batch": 8, "seq": 64} (insertion order is
// the storage order) or a sequence of (name, size) pairs.
Shape to_shape(const py::handle& obj);
// [(name, size), ...]
py::list from_shape(const Shape& shape);
// The shape's sizes, in order (NumPy's shape).
std::vector<py::ssize_t> sizes_of(const Shape& shape);
DType to_dtype(const std::string& name);
// JSON <-> Python through the json module (configs are small).
nlohmann::json to_json(const py::handle& obj);
py::object from_json(const nlohmann::json& j);
// Throws naming `what` unless the array's sizes are the shape's, in order.
void check_sizes(const py::array& a, const Shape& shape, const std::string& what);
// A new float32 array holding a copy of device tensor `t` (model state).
py::array to_numpy(const DeviceTensor& t);

// A GraphBuilder as Python sees it: either one it owns (tessel.Builder())
// or one a registered model function is lent for the duration of the call
// (then `alive` turns false when the call returns and any later use raises).
struct PyBuilder {
  std::shared_ptr<Graph> graph;         // owned graphs only
  std::shared_ptr<GraphBuilder> owned;  // owned graphs only
  GraphBuilder* builder = nullptr;
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);

  PyBuilder();                             // a fresh graph
  explicit PyBuilder(GraphBuilder& lent);  // lent by a model builder call
  GraphBuilder& get() const;
};

}  // namespace tessel::python
