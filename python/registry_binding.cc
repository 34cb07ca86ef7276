// tessel.register_model: a Python function as a model the trainer builds.
//
// The registry stores a std::function (compile/model_registry.h); the one
// registered here takes the GIL, lends the C++ GraphBuilder to the Python
// function as a tessel.Builder (unusable once the call returns), passes the
// config as a dict, and reads back (loss, logits). A Python exception raised
// inside propagates out of whatever C++ call was building the model.
#include <pybind11/stl.h>

#include "bindings.h"
#include "tessel/base/error.h"
#include "tessel/compile/model_registry.h"

namespace tessel::python {
namespace {

// Owns the Python function. The registry is a static that outlives the
// interpreter: at exit, with Python gone, the reference is dropped unreleased.
struct PyModelFunction {
  py::object fn;
  explicit PyModelFunction(py::object f) : fn(std::move(f)) {}
  ~PyModelFunction() {
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      fn = py::object();
    } else {
      fn.release();
    }
  }
};

TaskGraph to_task_graph(const std::string& model, const py::object& result) {
  if (py::isinstance<py::int_>(result)) return TaskGraph{result.cast<ValueId>(), std::nullopt};
  if (py::isinstance<py::tuple>(result) && py::len(result) == 2) {
    auto t = result.cast<py::tuple>();
    return TaskGraph{t[0].cast<ValueId>(), t[1].cast<std::optional<ValueId>>()};
  }
  TS_THROW("model '", model, "': the function must return (loss, logits) or loss, got ",
           py::cast<std::string>(py::repr(result)));
}

}  // namespace

void bind_registry(py::module_& m) {
  m.def(
      "register_model",
      [](const std::string& name, py::function fn) {
        auto holder = std::make_shared<PyModelFunction>(std::move(fn));
        register_model(name, [holder, name](const TrainConfig& config, GraphBuilder& b,
                                            int64_t batch, bool training) {
          py::gil_scoped_acquire gil;
          auto lent = std::make_shared<PyBuilder>(b);
          struct Expire {
            std::shared_ptr<bool> alive;
            ~Expire() { *alive = false; }
          } expire{lent->alive};
          py::object result = holder->fn(lent, from_json(config.to_json()), batch, training);
          return to_task_graph(name, result);
        });
      },
      py::arg("name"), py::arg("fn"),
      "Registers fn(builder, config, batch, training) -> (loss, logits) as `\"model\": name`.");
  m.def("registered_models", &registered_models);
  m.def(
      "build_model",
      [](const py::dict& config, PyBuilder& b, int64_t batch, bool training) {
        TrainConfig c = TrainConfig::from_json(to_json(config));
        TaskGraph g = build_model(c, b.get(), batch, training);
        return py::make_tuple(g.loss,
                              g.logits ? py::object(py::int_(*g.logits)) : py::object(py::none()));
      },
      py::arg("config"), py::arg("builder"), py::arg("batch"), py::arg("training") = false,
      "Adds the config's registered model (built-in or not) to a Builder; (loss, logits).");
}

}  // namespace tessel::python
