// `offload: optimizer` under real mpirun: AdamW's moments live in pinned host
// memory and the update runs on the host, on copies of each parameter's
// value and gradient, with the same kernel the backend runs. So an offloaded
// run is bitwise equal to the same layout without offload (losses, gradient
// norms, the final parameters and moments), across a single process, data
// parallelism with ZeRO 1 and 3, tensor parallelism, a synchronous and an
// asynchronous pipeline; it resumes bitwise from a checkpoint (the moments
// read back into host memory); and on every rank the device memory
// (Backend::space_stats) and all tensor storage are predicted to the byte,
// the device figure lower by exactly the moments; with offload "weights"
// too, lower by the weights as well.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

struct Split {
  std::string name, mesh, layout, extra;
  int ranks;
};

const std::string kTensor = "heads=model,hidden=model,vocab=model";

// One process, ZeRO 1 and 3, tensor parallelism, a synchronous and an
// asynchronous pipeline.
std::vector<Split> state_offload_splits() {
  return {Split{"single", "", "", "", 0},
          Split{"data2_zero1", "data=2", "", "--zero 1", 2},
          Split{"data2_zero3", "data=2", "", "--zero 3", 2},
          Split{"model2", "model=2", kTensor, "", 2},
          Split{"pipe2_1f1b", "pipe=2", "", "--schedule 1f1b --microbatches 4", 2},
          Split{"pipe2_pipedream", "pipe=2", "", "--schedule pipedream --microbatches 4", 2}};
}

class Offload : public LayoutInvariance {
 protected:
  // Trains each split with `offload` (run PREFIX_<split>) and with
  // everything on the device (PREFIX_<split>_on_device): bitwise equal,
  // memory predicted to the byte, and check(offloaded, on_device, what) on
  // each rank's predicted bytes.
  template <class Check>
  static void train_splits(const std::string& prefix, const std::string& offload,
                           const std::vector<Split>& splits, Check check) {
    nlohmann::json on_device = gpt_config();
    nlohmann::json offloaded = on_device;
    offloaded["offload"] = offload;
    for (const Split& s : splits) {
      const std::string name = prefix + s.name;
      const TrainRun want =
          train(name + "_on_device", on_device, s.ranks, s.mesh, s.layout, s.extra);
      const TrainRun got = train(name, offloaded, s.ranks, s.mesh, s.layout, s.extra);
      expect_bitwise(got, want, name);
      expect_memory_exact(name);
      for (int r = 0; r < std::max(1, s.ranks); ++r)
        check(rank_memory(name, r), rank_memory(name + "_on_device", r),
              name + " rank " + std::to_string(r));
    }
  }
  static void expect_bitwise(const TrainRun& got, const TrainRun& want, const std::string& what) {
    ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
    for (size_t s = 0; s < want.steps.size(); ++s) {
      for (const char* key : {"loss", "grad_norm"}) {
        if (!want.steps[s].contains(key)) continue;
        EXPECT_EQ(got.steps[s][key].get<double>(), want.steps[s][key].get<double>())
            << what << ": " << key << " at step " << s;
      }
    }
    ASSERT_EQ(got.params.tensors.size(), want.params.tensors.size()) << what;
    for (const TensorRecord& w : want.params.tensors) {
      const TensorRecord* g = got.params.find(w.name);
      ASSERT_NE(g, nullptr) << what << ": " << w.name;
      EXPECT_TRUE(g->bytes == w.bytes) << what << ": parameter " << w.name << " differs";
    }
    const auto moments = [](const std::string& run) {
      return read_safetensors(
          (root() / run / "out" / "checkpoint" / "optimizer.safetensors").string());
    };
    const SafetensorsFile a = moments(what), b = moments(what + "_on_device");
    ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
    for (const TensorRecord& t : b.tensors)
      EXPECT_TRUE(a.find(t.name) && a.find(t.name)->bytes == t.bytes)
          << what << ": moment " << t.name << " differs";
  }
  static nlohmann::json rank_memory(const std::string& run, int rank) {
    return nlohmann::json::parse(
               std::ifstream(root() / run / "out" / "summary.json"))["memory_per_rank"]
        .at(rank)["predicted_bytes"];
  }
};

TEST_F(Offload, TrainsBitwiseLikeTheMomentsOnTheDeviceOnEveryLayout) {
  train_splits("offload_", "optimizer", state_offload_splits(),
               [](const nlohmann::json& a, const nlohmann::json& b, const std::string& what) {
                 EXPECT_GT(b["optimizer"].get<int64_t>(), 0) << what;
                 EXPECT_EQ(a["optimizer"].get<int64_t>(), 0) << what;
                 EXPECT_EQ(a["device"].get<int64_t>(),
                           b["device"].get<int64_t>() - b["optimizer"].get<int64_t>())
                     << what;
               });
  nlohmann::json offloaded = gpt_config();
  offloaded["offload"] = "optimizer";
  expect_same(train("offload_single_again", offloaded, 0), reference("gpt"), "offload single");
}

// offload: optimizer,weights. The f32 weights live in pinned host memory
// too, where the programs read them in place and the host updates them
// with only the gradient copied out, so the run is bitwise equal to the
// same layout on the device (in bf16 too); the device is lower by exactly
// the moments and the weights (an asynchronous pipeline's weight copies
// stay there), the host holds the weights, and both are predicted to the
// byte on every rank.
TEST_F(Offload, WeightsTooTrainBitwiseWithTheDeviceLowerByTheWeights) {
  std::vector<Split> splits = state_offload_splits();
  splits.push_back(Split{"bf16", "", "", "--set precision=bf16", 0});
  train_splits("offload_weights_", "optimizer,weights", splits,
               [](const nlohmann::json& a, const nlohmann::json& b, const std::string& what) {
                 const int64_t weights = b["parameters"].get<int64_t>();
                 EXPECT_GT(weights, 0) << what;
                 EXPECT_EQ(a["parameters"].get<int64_t>(), 0) << what;
                 EXPECT_EQ(a["host_weights"].get<int64_t>(), weights) << what;
                 EXPECT_EQ(a["device"].get<int64_t>(),
                           b["device"].get<int64_t>() - b["optimizer"].get<int64_t>() - weights)
                     << what;
               });
}

// offload: activations. Each offloaded value is copied to pinned host memory
// after it is written and back before the backward reads it, so the run is
// bitwise equal to the same layout without offload; the memory it frees is
// the arena's (the device's other parts are the same), the host holds the
// offloaded values, and both are predicted to the byte on every rank.
TEST_F(Offload, ActivationsTrainBitwiseWithLessDeviceMemoryOnEveryLayout) {
  for (const Split& s :
       {Split{"single", "", "", "", 0}, Split{"bf16", "", "", "--set precision=bf16", 0},
        Split{"data2_zero1", "data=2", "", "--zero 1", 2},
        Split{"data2_zero3", "data=2", "", "--zero 3", 2},
        Split{"model2", "model=2", kTensor, "", 2},
        Split{"seq2", "model=2", kTensor + ",seq=model", "", 2},
        Split{"ctx2_ring", "ctx=2", "seq=ctx", "--set context_parallel=ring", 2},
        Split{"pipe2_1f1b", "pipe=2", "", "--schedule 1f1b --microbatches 4", 2},
        Split{"pipe2_zb", "pipe=2", "", "--schedule zb-h1 --microbatches 4", 2},
        Split{"pipe2_pipedream", "pipe=2", "", "--schedule pipedream --microbatches 4", 2}}) {
    for (const std::string& what :
         {std::string("activations"), std::string("optimizer,activations")}) {
      if (what != "activations" && s.name != "data2_zero1") continue;
      nlohmann::json on_device = gpt_config();
      nlohmann::json offloaded = on_device;
      offloaded["offload"] = what;
      if (what != "activations") on_device["offload"] = "optimizer";
      const std::string name =
          std::string("offload_") + (what == "activations" ? "act_" : "both_") + s.name;
      const TrainRun want =
          train(name + "_on_device", on_device, s.ranks, s.mesh, s.layout, s.extra);
      const TrainRun got = train(name, offloaded, s.ranks, s.mesh, s.layout, s.extra);
      expect_bitwise(got, want, name);
      expect_memory_exact(name);
      for (int r = 0; r < std::max(1, s.ranks); ++r) {
        const nlohmann::json a = rank_memory(name, r), b = rank_memory(name + "_on_device", r);
        const std::string at = name + " rank " + std::to_string(r);
        EXPECT_GT(a["host_activations"].get<int64_t>(), 0) << at;
        EXPECT_EQ(b["host_activations"].get<int64_t>(), 0) << at;
        EXPECT_LT(a["arena"].get<int64_t>(), b["arena"].get<int64_t>()) << at;
        EXPECT_EQ(a["device"].get<int64_t>() - a["arena"].get<int64_t>(),
                  b["device"].get<int64_t>() - b["arena"].get<int64_t>())
            << at;
      }
    }
  }
}

TEST_F(Offload, ResumesBitwiseWithTheMomentsInHostMemory) {
  for (const std::string offload : {"optimizer", "optimizer,weights"}) {
    nlohmann::json c = gpt_config();
    c["offload"] = offload;
    const std::string name = offload == "optimizer" ? "offload_resume" : "offload_weights_resume";
    const TrainRun whole =
        train(name + "_whole", c, 2, "data=2", "", "--zero 1 --checkpoint-every 4");
    const fs::path step4 = root() / (name + "_whole") / "out" / "checkpoints" / "step-4";
    const TrainRun resumed =
        train(name + "_rest", c, 2, "data=2", "", "--zero 1 --resume " + step4.string());
    ASSERT_EQ(resumed.steps.size() + 4, whole.steps.size()) << offload;
    for (size_t i = 0; i < resumed.steps.size(); ++i)
      EXPECT_EQ(resumed.steps[i]["loss"].get<double>(), whole.steps[i + 4]["loss"].get<double>())
          << offload << " step " << i + 4;
    for (const TensorRecord& w : whole.params.tensors) {
      const TensorRecord* g = resumed.params.find(w.name);
      EXPECT_TRUE(g && g->bytes == w.bytes) << offload << " " << w.name;
    }
  }
}

TEST_F(Offload, NeedsAdamWAndAKnownChoice) {
  nlohmann::json c = gpt_config();
  c["offload"] = "optimizer";
  c["optimizer"] = "sgd";
  expect_fails("offload_sgd", c, 2, "--mesh data=2",
               "'offload' \"optimizer\" moves AdamW's moments to host memory; optimizer 'sgd'");
  c["optimizer"] = "adamw";
  c["offload"] = "gradients";
  expect_fails("offload_gradients", c, 2, "--mesh data=2",
               "'offload' must be none or a comma list of optimizer, weights and activations, "
               "got \"gradients\"");
  c["offload"] = "weights,activations";
  expect_fails("offload_weights_alone", c, 2, "--mesh data=2",
               "'offload' \"weights\" keeps the f32 weights where the offloaded optimizer "
               "updates them; offload the optimizer too");
}

}  // namespace
}  // namespace tessel
