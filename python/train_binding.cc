// tessel.Trainer, tessel.TextModel and checkpoint files: training and using
// models from Python through the same code the CLI runs.
//
// A Trainer is the C++ Trainer (the CLI's `train` drives the same object):
// the config dict has the JSON configs' keys, "mesh" and "layout" among
// them; under `mpirun -n N python3 script.py` every rank builds its own
// Trainer and holds only its shards. params() copies this rank's shards
// out of device memory. The GIL is released while the trainer compiles and runs,
// and re-taken by model functions registered from Python.
#include <pybind11/stl.h>

#include "bindings.h"
#include "tessel/base/error.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/text_model.h"
#include "tessel/train/trainer.h"

namespace tessel::python {

using namespace pybind11::literals;

namespace {

TrainConfig to_config(const py::handle& config) {
  if (!py::isinstance<py::dict>(config)) TS_THROW("a config is a dict with the JSON configs' keys");
  return TrainConfig::from_json(to_json(config));
}

py::dict eval_dict(const EvalResult& r) {
  py::dict d("val_loss"_a = r.loss);
  if (r.accuracy) d["val_accuracy"] = *r.accuracy;
  return d;
}

// Every tensor of a safetensors file as a NumPy array owning its bytes.
py::dict read_tensors(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  py::dict out;
  for (TensorRecord& t : file.tensors) {
    py::dtype dt;
    if (t.dtype == "F32")
      dt = py::dtype::of<float>();
    else if (t.dtype == "I32")
      dt = py::dtype::of<int32_t>();
    else if (t.dtype == "F64")
      dt = py::dtype::of<double>();
    else
      TS_THROW("'", path, "': tensor '", t.name, "' has dtype ", t.dtype,
               ", which Python reading does not support");
    auto* bytes = new std::vector<uint8_t>(std::move(t.bytes));
    py::capsule owner(bytes, [](void* p) { delete static_cast<std::vector<uint8_t>*>(p); });
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    out[py::str(t.name)] = py::array(dt, shape, {}, bytes->data(), owner);
  }
  return out;
}

// TextModel: a checkpoint to sample from and score.
void bind_text_model(py::module_& m) {
  py::class_<TextModel>(m, "TextModel",
                        "A text model loaded from a checkpoint, to sample and score (`tessel "
                        "sample`, `tessel eval`).")
      .def(py::init<const std::string&>(), py::arg("checkpoint"), py::call_guard<ComputeScope>())
      .def(
          "sample",
          [](TextModel& tm, const std::string& prompt, int64_t chars, float temperature,
             uint64_t seed) {
            return py::bytes(
                computing([&] { return tm.sample(prompt, chars, temperature, seed); }));
          },
          py::arg("prompt"), py::arg("chars") = 200, py::arg("temperature") = 0.8f,
          py::arg("seed") = 1234, "Continues the prompt by `chars` bytes (temperature 0: greedy).")
      .def(
          "score",
          [](TextModel& tm, py::bytes data) {
            const std::string s = data;
            std::vector<uint8_t> text(s.begin(), s.end());
            const TextModel::Score r = computing([&] { return tm.score(text); });
            return py::dict("nats_per_token"_a = r.nats_per_token,
                            "nats_per_byte"_a = r.nats_per_byte,
                            "bits_per_byte"_a = r.bits_per_byte,
                            "tokens_scored"_a = r.tokens_scored, "bytes_scored"_a = r.bytes_scored);
          },
          py::arg("text"),
          "Mean next-token loss over the text's context windows, per token and per byte of the "
          "scored tokens' text (comparable across tokenizers).")
      .def_property_readonly("step", &TextModel::step)
      .def_property_readonly("config",
                             [](const TextModel& tm) { return from_json(tm.config().to_json()); });
}

}  // namespace

void bind_train(py::module_& m) {
  m.def(
      "config_keys", [] { return TrainConfig::known_keys(); },
      "Every config key (the JSON configs' and --set's).");
  m.def(
      "resolve_config",
      [](const py::dict& config) {
        TrainConfig c = to_config(config);
        c.validate();
        return from_json(c.to_json());
      },
      py::arg("config"), "The full config with defaults, validated (raises naming the key).");
  m.def("read_safetensors", &read_tensors, py::arg("path"),
        "{name: array} of a safetensors file (e.g. DIR/checkpoint/model.safetensors).");
  m.def(
      "read_checkpoint_info",
      [](const std::string& dir) {
        CheckpointInfo info = read_checkpoint_info(dir);
        return py::dict("config"_a = from_json(info.config.to_json()), "step"_a = info.step,
                        "state"_a = from_json(info.state));
      },
      py::arg("dir"), "A checkpoint's manifest: its config, step and run state.");

  py::class_<Trainer>(m, "Trainer",
                      "The training engine on this rank (the CLI's `train` drives the same one).")
      .def(py::init([](const py::dict& config) {
             TrainConfig c = to_config(config);
             ComputeScope compute;
             return std::make_unique<Trainer>(c);
           }),
           py::arg("config"),
           "Validates the config, sets up the mesh (MPI under mpirun), builds and compiles this "
           "rank's programs and loads the data; raises before any compute on a bad config.")
      .def(
          "evaluate", [](Trainer& t) { return eval_dict(computing([&] { return t.evaluate(); })); },
          "Loss on held-out batches; {val_loss[, val_accuracy]} (collective).")
      .def("save_checkpoint", &Trainer::save_checkpoint, py::arg("dir"),
           py::call_guard<ComputeScope>(),
           "Full tensors whatever the layout (collective; the root writes).")
      .def("load_checkpoint", &Trainer::load_checkpoint, py::arg("dir"),
           py::call_guard<ComputeScope>(),
           "Parameters, optimizer state and run state; the next step continues the saved run.")
      .def(
          "params",
          [](Trainer& t) {
            py::dict out;
            for (ParamEntry& e : t.params().entries()) out[py::str(e.name)] = to_numpy(e.value);
            return out;
          },
          "{name: array} of this rank's parameter shards, copied out of device memory.")
      .def("param_shapes",
           [](Trainer& t) {
             py::dict out;
             for (ParamEntry& e : t.params().entries())
               out[py::str(e.name)] = from_shape(e.value.shape());
             return out;
           })
      .def_property_readonly("config",
                             [](const Trainer& t) { return from_json(t.config().to_json()); })
      .def_property_readonly("steps_done", &Trainer::steps_done)
      .def_property_readonly("rank", [](Trainer& t) { return t.distributed().rank(); })
      .def_property_readonly("ranks",
                             [](Trainer& t) { return t.distributed().mesh().rank_count(); })
      .def_property_readonly("is_root", &Trainer::is_root)
      .def_property_readonly("mesh", [](Trainer& t) { return t.distributed().mesh().to_string(); })
      .def_property_readonly("layout",
                             [](Trainer& t) { return t.distributed().layout().to_string(); })
      .def_property_readonly("parameter_count", &Trainer::parameter_count)
      .def_property_readonly("flops_per_step", &Trainer::flops_per_step)
      .def_property_readonly("items_per_step", &Trainer::items_per_step)
      .def_property_readonly("arena_bytes", &Trainer::arena_bytes)
      .def_property_readonly("baseline_loss",
                             [](const Trainer& t) { return t.task().baseline_loss(); });

  bind_text_model(m);
}

}  // namespace tessel::python
