// tessel.Trainer's step and what surrounds it: a step on the user's own
// NumPy batch, the gradients of the last update, the learning rate between
// steps, and the model's inputs.
//
// A batch is a dict {input name: array} with exactly the model's inputs,
// each the full batch (every rank passes the whole batch and takes its own
// block, as the data sets do); it is checked whole (names, shapes, dtypes,
// ids within int32) before anything is copied, and the trainer checks each
// id against the op reading it before anything runs.
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>

#include "bindings.h"
#include "tessel/base/error.h"
#include "tessel/train/trainer.h"

namespace tessel::python {

using namespace pybind11::literals;

namespace {

std::string inputs_text(const Trainer& t) {
  std::string s;
  for (const auto& [name, staged] : t.inputs())
    s += (s.empty() ? "" : ", ") + name + " " + staged.shape().to_string() + " " +
         dtype_name(staged.dtype());
  return s;
}

// The batch as arrays of the inputs' dtypes, checked against the model.
std::map<std::string, py::array> checked_batch(const Trainer& t, const py::dict& batch) {
  std::map<std::string, py::array> out;
  for (auto item : batch) {
    const std::string name = py::cast<std::string>(item.first);
    auto it = t.inputs().find(name);
    if (it == t.inputs().end())
      TS_THROW("batch has '", name, "', which is not an input of the model (", inputs_text(t), ")");
    const bool ids = it->second.dtype() == DType::kI32;
    py::array a = py::array::ensure(item.second);
    if (!a || (ids ? a.dtype().kind() != 'i' && a.dtype().kind() != 'u' : a.dtype().kind() != 'f'))
      TS_THROW("batch '", name, "' must be an array of ", ids ? "integers" : "floats",
               " (the input is ", dtype_name(it->second.dtype()), ")");
    check_sizes(a, it->second.shape(), "input '" + name + "'");
    if (ids) {  // checked in 64 bits before narrowing; the trainer checks their range
      auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
      for (py::ssize_t i = 0; i < wide.size(); ++i)
        if (wide.data()[i] < INT32_MIN || wide.data()[i] > INT32_MAX)
          TS_THROW("batch '", name, "' holds ", wide.data()[i], " at flat index ", i,
                   ", outside int32");
      a = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(wide);
    } else {
      a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
    }
    out[name] = a;
  }
  for (const auto& [name, staged] : t.inputs())
    if (!out.count(name)) TS_THROW("batch lacks input '", name, "' (", inputs_text(t), ")");
  return out;
}

}  // namespace

void bind_trainer_step(py::module_& m) {
  auto trainer = py::reinterpret_borrow<py::class_<Trainer>>(m.attr("Trainer"));
  trainer
      .def(
          "step",
          [](Trainer& t, const py::object& batch) {
            StepResult r;
            if (batch.is_none()) {
              r = computing([&] { return t.step(); });
            } else {
              if (!py::isinstance<py::dict>(batch))
                TS_THROW("a batch is a dict {input name: array}");
              const std::map<std::string, py::array> arrays = checked_batch(t, batch);
              ComputeScope compute;
              r = t.step([&](const std::string& name, Tensor& staged) {
                std::memcpy(staged.raw(), arrays.at(name).data(), staged.nbytes());
              });
            }
            return py::dict("step"_a = r.step, "loss"_a = r.loss, "lr"_a = r.lr,
                            "grad_norm"_a = r.grad_norm);
          },
          py::arg("batch") = py::none(),
          "One training step on the data set's next batch, or on `batch` ({input name: full-batch "
          "array}); {step, loss, lr, grad_norm} (collective on a mesh).")
      .def(
          "inputs",
          [](const Trainer& t) {
            py::dict out;
            for (const auto& [name, staged] : t.inputs())
              out[py::str(name)] =
                  py::make_tuple(from_shape(staged.shape()), dtype_name(staged.dtype()));
            return out;
          },
          "{name: (shape, dtype)} of the inputs a batch must hold (the full batch).")
      .def(
          "set_lr",
          [](Trainer& t, const py::object& lr) {
            t.set_lr(lr.is_none() ? 0.0 : lr.cast<double>());
          },
          py::arg("lr"),
          "The learning rate of the following steps; None returns to the schedule. Saved in "
          "checkpoints.")
      .def("keep_gradients", &Trainer::keep_gradients, py::arg("on") = true,
           "Copy each update's gradients (before clipping) for gradients().")
      .def(
          "gradients",
          [](Trainer& t) {
            py::dict out;
            for (const auto& [name, g] : t.gradients()) {
              const Shape& shape = t.params().at(name).value.shape();
              py::array_t<float> a(static_cast<py::ssize_t>(g.size()));
              std::memcpy(a.mutable_data(), g.data(), g.size() * sizeof(float));
              out[py::str(name)] =
                  shape.numel() == static_cast<int64_t>(g.size()) ? a.reshape(sizes_of(shape)) : a;
            }
            return out;
          },
          "{name: array} of the last update's gradients on this rank (its shard of each "
          "parameter; flat under ZeRO 1-2, its slice); empty until keep_gradients() and a step.");
}

}  // namespace tessel::python
