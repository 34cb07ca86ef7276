// Exact resume and resharding under real mpirun.
//
// Exact resume: a run saving every 2 steps trains bitwise like one that never
// saves; a run resumed from its step-4 checkpoint (into a fresh --out, and
// with --resume auto into the same --out, whose metrics it appends to) has
// every later loss and the final parameters and AdamW moments bitwise equal
// to the uninterrupted run on the same layout.
//
// Resharding: a checkpoint saved on one layout (mesh, ZeRO stage, pipeline,
// rank count) and resumed on every other continues within the
// layout-invariance tolerance (relative 1e-5) of the uninterrupted run: the
// full matrix of 6 layouts, 30 pairs (about 40 s on 2 cores).
#include "layout/layout_harness.h"

namespace tessel {
namespace {

nlohmann::json resume_config() {
  nlohmann::json c = gpt_config();
  c["steps"] = 6;
  c["eval_every"] = 3;
  return c;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct ResumeCase {
  const char* name;
  int ranks;
  const char* mesh;
  const char* extra;
};
void PrintTo(const ResumeCase& c, std::ostream* out) { *out << c.name; }

class ExactResume : public LayoutInvariance, public ::testing::WithParamInterface<ResumeCase> {
 protected:
  static void expect_bitwise(const TrainRun& got, const TrainRun& want, size_t first,
                             const std::string& what) {
    ASSERT_EQ(got.steps.size(), want.steps.size() - first) << what;
    for (size_t i = 0; i < got.steps.size(); ++i) {
      EXPECT_EQ(got.steps[i]["step"], want.steps[first + i]["step"]) << what;
      EXPECT_EQ(got.steps[i]["loss"].get<double>(), want.steps[first + i]["loss"].get<double>())
          << what << ": loss at step " << first + i;
      EXPECT_EQ(got.steps[i]["grad_norm"].get<double>(),
                want.steps[first + i]["grad_norm"].get<double>())
          << what << ": grad_norm at step " << first + i;
    }
  }
  static void expect_same_files(const fs::path& a, const fs::path& b, const std::string& what) {
    for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
      SafetensorsFile x = read_safetensors((a / file).string());
      SafetensorsFile y = read_safetensors((b / file).string());
      ASSERT_EQ(x.tensors.size(), y.tensors.size()) << what << " " << file;
      for (const TensorRecord& t : y.tensors) {
        const TensorRecord* g = x.find(t.name);
        ASSERT_NE(g, nullptr) << what << ": " << t.name;
        EXPECT_TRUE(g->bytes == t.bytes)
            << what << ": " << file << " " << t.name << " differs from the uninterrupted run";
      }
    }
  }
};

TEST_P(ExactResume, ContinuesBitwise) {
  const ResumeCase& c = GetParam();
  const std::string n = c.name;
  const nlohmann::json config = resume_config();
  TrainRun ref = train(n + "_ref", config, c.ranks, c.mesh, "", c.extra);
  ASSERT_EQ(ref.steps.size(), 6u);

  // Saving every 2 steps (asynchronously) does not change training; keeps 2.
  TrainRun saving = train(n + "_saving", config, c.ranks, c.mesh, "",
                          std::string(c.extra) + " --checkpoint-every 2");
  expect_bitwise(saving, ref, 0, n + " with periodic saves");
  const fs::path ckpts = root() / (n + "_saving") / "out" / "checkpoints";
  EXPECT_FALSE(fs::exists(ckpts / "step-2")) << "--keep 2 should have pruned step-2";
  EXPECT_TRUE(fs::exists(ckpts / "step-4" / "manifest.json"));
  EXPECT_TRUE(fs::exists(ckpts / "step-6" / "manifest.json"));
  EXPECT_EQ(read_text(ckpts / "latest"), "step-6\n");
  for (const auto& line : saving.steps)
    EXPECT_EQ(line.contains("save_stall_ms"), (line["step"].get<int>() + 1) % 2 == 0) << line;
  nlohmann::json manifest =
      nlohmann::json::parse(std::ifstream(ckpts / "step-4" / "manifest.json"));
  const nlohmann::json& state = manifest["state"];
  EXPECT_EQ(state["next_step"], 4);
  EXPECT_EQ(state["rng"]["seed"], config.value("seed", 1234));
  EXPECT_EQ(state["saved_on"]["ranks"], std::max(1, c.ranks));
  EXPECT_EQ(state["saved_on"]["zero"],
            std::string(c.extra).find("--zero 1") != std::string::npos ? 1 : 0);
  EXPECT_EQ(state["saved_on"]["precision"], "f32");

  // Resumed from step 4 into a fresh output directory.
  TrainRun resumed = train(n + "_resumed", config, c.ranks, c.mesh, "",
                           std::string(c.extra) + " --resume " + (ckpts / "step-4").string());
  expect_bitwise(resumed, ref, 4, n + " resumed at step 4");
  expect_same_files(root() / (n + "_resumed") / "out" / "checkpoint",
                    root() / (n + "_ref") / "out" / "checkpoint", n + " resumed at step 4");

  // --resume auto in the same directory, as if killed after step 5 with
  // step-4 the newest published: metrics keep steps 0-3, then 4-5 again.
  const fs::path again = root() / (n + "_auto") / "out";
  fs::create_directories(again.parent_path());
  fs::copy(ckpts.parent_path(), again, fs::copy_options::recursive);
  fs::remove_all(again / "checkpoints" / "step-6");
  fs::remove_all(again / "checkpoint");
  std::ofstream(again / "checkpoints" / "latest") << "step-4\n";
  TrainRun autorun =
      train(n + "_auto", config, c.ranks, c.mesh, "", std::string(c.extra) + " --resume auto");
  expect_bitwise(autorun, ref, 0, n + " --resume auto");
  expect_same_files(again / "checkpoint", root() / (n + "_ref") / "out" / "checkpoint",
                    n + " --resume auto");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ExactResume,
    ::testing::Values(
        ResumeCase{"resume_one_rank", 1, "", ""},
        ResumeCase{"resume_data2_model2", 4, "data=2,model=2", ""},
        ResumeCase{"resume_pipe2", 2, "pipe=2", "--microbatches 2"},
        ResumeCase{"resume_pipe2_pipedream", 2, "pipe=2", "--microbatches 2 --schedule pipedream"},
        // Dropout masks are keyed by the step: a resumed run
        // draws what the uninterrupted one drew.
        ResumeCase{"resume_one_rank_dropout", 1, "", "--set dropout=0.1"},
        ResumeCase{"resume_pipe2_dropout", 2, "pipe=2", "--microbatches 2 --set dropout=0.1"},
        // ZeRO's flat moments of tensor-parallel leading dims (w2, wo, wte),
        // in a single program and on a pipeline.
        ResumeCase{"resume_data2_model2_zero1", 4, "data=2,model=2", "--zero 1"},
        ResumeCase{"resume_pipe2_data2_zero1", 4, "pipe=2,data=2", "--microbatches 2 --zero 1"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_F(LayoutInvariance, ResumeAutoWithoutACheckpointNamesTheDirectory) {
  fs::path dir = root() / "resume_nothing";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << resume_config().dump();
  int status = 0;
  std::string out =
      run(std::string(TESSEL_CLI_PATH) + " train --config " + (dir / "config.json").string() +
              " --out " + (dir / "out").string() + " --resume auto",
          &status);
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("no complete checkpoint under '" + (dir / "out").string()), std::string::npos)
      << out;
}

// --- Resharding ---------------------------------------------------------------

struct SavedLayout {
  const char* name;
  int ranks;
  const char* mesh;
  const char* extra;
};

const std::vector<SavedLayout>& reshard_layouts() {
  static const std::vector<SavedLayout> layouts = {
      {"one", 1, "", ""},
      {"data2", 2, "data=2", ""},
      {"model2", 2, "model=2", ""},
      {"data2_model2", 4, "data=2,model=2", ""},
      {"pipe2_data2_zero1", 4, "pipe=2,data=2", "--microbatches 2 --zero 1"},
      {"data4_zero3", 4, "data=4", "--zero 3"},
  };
  return layouts;
}

class Resharding : public LayoutInvariance {
 protected:
  static nlohmann::json config() {
    nlohmann::json c = gpt_config();
    c["steps"] = 4;
    c["eval_every"] = 0;
    return c;
  }
  // Each source layout trains 4 steps saving at step 2 (once per test binary).
  static fs::path saved(const SavedLayout& from) {
    static std::map<std::string, fs::path> done;
    auto it = done.find(from.name);
    if (it != done.end()) return it->second;
    train(std::string("reshard_src_") + from.name, config(), from.ranks, from.mesh, "",
          std::string(from.extra) + " --checkpoint-every 2");
    fs::path dir =
        root() / ("reshard_src_" + std::string(from.name)) / "out" / "checkpoints" / "step-2";
    return done.emplace(from.name, dir).first->second;
  }
  static void check(const SavedLayout& from, const SavedLayout& to) {
    static const TrainRun ref = train("reshard_ref", config(), 0);
    const std::string what = std::string(from.name) + " -> " + to.name;
    TrainRun got = train(std::string("reshard_") + from.name + "_to_" + to.name, config(), to.ranks,
                         to.mesh, "", std::string(to.extra) + " --resume " + saved(from).string());
    // Only steps 2 and 3 ran: compare them and the final weights.
    TrainRun want = ref;
    want.steps.erase(want.steps.begin(), want.steps.begin() + 2);
    expect_same(got, want, what);
  }
};

TEST_F(Resharding, EverySavedLayoutResumesOnEveryOther) {
  for (const SavedLayout& from : reshard_layouts())
    for (const SavedLayout& to : reshard_layouts())
      if (std::string(from.name) != to.name) check(from, to);
}

// ZeRO's flat moments with a model axis (w2's, wo's and wte's chunks of
// tensor-parallel blocks), to and from one process, a pipeline's ZeRO 1
// and ZeRO 3.
TEST_F(Resharding, FlatZeroMomentsOnAModelAxisResumeEverywhere) {
  const SavedLayout flat{"data2_model2_zero2", 4, "data=2,model=2", "--zero 2"};
  for (const SavedLayout& other : reshard_layouts()) {
    const std::string name = other.name;
    if (name != "one" && name != "pipe2_data2_zero1" && name != "data4_zero3") continue;
    check(flat, other);
    check(other, flat);
  }
}

}  // namespace
}  // namespace tessel
