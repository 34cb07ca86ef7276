// Periodic checkpoint directories: publishing, pruning, what `--resume auto`
// picks (and that it never picks an incomplete one), the background writer's
// error reporting, and host snapshots of a checkpoint's tensors.
#include "tessel/train/checkpoint/checkpoint_dirs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/tensor/aligned_buffer.h"
#include "tessel/train/checkpoint/background_writer.h"
#include "tessel/train/checkpoint/checkpoint.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

struct OutDir {
  fs::path path = fs::temp_directory_path() / ("tessel_ckdirs_" + std::to_string(::getpid()));
  OutDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~OutDir() { fs::remove_all(path); }
  // A complete step directory (what save_checkpoint renames into place).
  void complete_step(int64_t step) const {
    write_checkpoint(periodic_checkpoint_dir(path.string(), step), step);
  }
  // A real (tiny) checkpoint: one tensor, a manifest that reads back.
  static void write_checkpoint(const fs::path& dir, int64_t step) {
    fs::create_directories(dir.parent_path());
    CheckpointSource source;
    source.params = {{"w", Shape{{"a", 4}}, false}};
    const std::vector<float> w = {1, 2, 3, 4};
    source.full = [&](size_t, CheckpointSource::Part) { return w.data(); };
    save_checkpoint(dir.string(), TrainConfig{}, source, step);
  }
};

TEST(CheckpointDirs, PublishMovesLatestAndKeepsTheNewest) {
  OutDir out;
  const std::string o = out.path.string();
  for (int64_t step : {2, 4, 6}) {
    out.complete_step(step);
    publish_periodic_checkpoint(o, step, 2);
    EXPECT_EQ(newest_checkpoint(o), periodic_checkpoint_dir(o, step));
  }
  EXPECT_FALSE(fs::exists(periodic_checkpoint_dir(o, 2)));
  EXPECT_TRUE(fs::exists(periodic_checkpoint_dir(o, 4)));
  EXPECT_TRUE(fs::exists(periodic_checkpoint_dir(o, 6)));
  std::ifstream latest(out.path / "checkpoints" / "latest");
  std::string name;
  std::getline(latest, name);
  EXPECT_EQ(name, "step-6");
}

TEST(CheckpointDirs, PublishRemovesStaleTemporariesAndRefusesAnIncompleteStep) {
  OutDir out;
  const std::string o = out.path.string();
  fs::create_directories(out.path / "checkpoints" / "step-3.tmp-99999");
  out.complete_step(4);
  publish_periodic_checkpoint(o, 4, 2);
  EXPECT_FALSE(fs::exists(out.path / "checkpoints" / "step-3.tmp-99999"));
  fs::create_directories(periodic_checkpoint_dir(o, 8));  // no manifest: a killed save
  EXPECT_NE(error_of([&] { publish_periodic_checkpoint(o, 8, 2); }).find("not complete"),
            std::string::npos);
  EXPECT_EQ(newest_checkpoint(o), periodic_checkpoint_dir(o, 4));
}

TEST(CheckpointDirs, AutoFallsBackToTheNewestCompleteStepThenTheFinalCheckpoint) {
  OutDir out;
  const std::string o = out.path.string();
  EXPECT_EQ(newest_checkpoint(o), "");
  EXPECT_NE(error_of([&] { resolve_resume("auto", o); }).find("no complete checkpoint under"),
            std::string::npos);
  OutDir::write_checkpoint(out.path / "checkpoint", 20);
  EXPECT_EQ(resolve_resume("auto", o), (out.path / "checkpoint").string());
  out.complete_step(2);
  out.complete_step(10);
  fs::create_directories(periodic_checkpoint_dir(o, 12));  // incomplete: skipped
  // `latest` names a directory that is gone: fall back to the highest complete step.
  std::ofstream(out.path / "checkpoints" / "latest") << "step-14\n";
  EXPECT_EQ(resolve_resume("auto", o), periodic_checkpoint_dir(o, 10));
  std::ofstream(out.path / "checkpoints" / "latest") << "step-2\n";
  EXPECT_EQ(resolve_resume("auto", o), periodic_checkpoint_dir(o, 2));
  EXPECT_NE(error_of([&] {
              resolve_resume((out.path / "nope").string(), o);
            }).find("not a complete checkpoint"),
            std::string::npos);
}

// A damaged newest checkpoint (truncated tensors, a broken manifest) is
// skipped with the reason; the newest one that validates is picked; when none
// does, the error names each one tried.
TEST(CheckpointDirs, AutoSkipsDamagedCheckpointsAndNamesEachWhenNoneValidates) {
  OutDir out;
  const std::string o = out.path.string();
  for (int64_t step : {2, 4, 6}) {
    out.complete_step(step);
    publish_periodic_checkpoint(o, step, 3);
  }
  const fs::path s6 = periodic_checkpoint_dir(o, 6), s4 = periodic_checkpoint_dir(o, 4),
                 s2 = periodic_checkpoint_dir(o, 2);
  fs::resize_file(s6 / "model.safetensors", fs::file_size(s6 / "model.safetensors") - 3);
  std::ofstream(s4 / "manifest.json") << "{\"format\": \"tessel-chec";
  std::vector<std::string> skipped;
  EXPECT_EQ(resolve_resume("auto", o, &skipped), s2.string());
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_NE(skipped[0].find(s6.string()), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[0].find("model.safetensors"), std::string::npos) << skipped[0];
  EXPECT_NE(skipped[1].find(s4.string()), std::string::npos) << skipped[1];
  EXPECT_NE(skipped[1].find("manifest.json"), std::string::npos) << skipped[1];

  fs::remove(s2 / "model.safetensors");
  const std::string e = error_of([&] { resolve_resume("auto", o); });
  for (const fs::path& d : {s6, s4, s2}) EXPECT_NE(e.find(d.string()), std::string::npos) << e;
  EXPECT_NE(e.find("no checkpoint under '" + o + "' validates"), std::string::npos) << e;
}

TEST(BackgroundWriter, RunsOneJobAtATimeAndReportsItsError) {
  BackgroundWriter writer;
  int done = 0;
  writer.start([&] { ++done; });
  writer.start([&] { ++done; });  // waits for the first
  writer.wait();
  EXPECT_EQ(done, 2);
  writer.start([] { throw std::runtime_error("disk full"); });
  EXPECT_THROW(writer.wait(), std::runtime_error);
  writer.wait();  // reported once
}

// Two parameters, one with AdamW moments; `full` counts its calls and fills
// each tensor from its index and part.
CheckpointSource two_params(std::vector<float>& scratch, int& calls) {
  CheckpointSource source;
  source.params = {{"w", Shape{{"a", 2}, {"b", 3}}, true}, {"b", Shape{{"b", 3}}, false}};
  scratch.assign(6, 0.0f);
  source.full = [&](size_t i, CheckpointSource::Part part) -> const float* {
    ++calls;
    for (size_t k = 0; k < scratch.size(); ++k)
      scratch[k] = static_cast<float>(100 * i + 10 * static_cast<int>(part) + k);
    return scratch.data();
  };
  source.state = {{"next_step", 7}};
  return source;
}

TEST(CheckpointSnapshot, CopiesWhatTheSourceProducesAndWritesTheSameFile) {
  OutDir out;
  std::vector<float> scratch;
  int calls = 0;
  const CheckpointSource source = two_params(scratch, calls);
  CheckpointSnapshot snapshot;
  snapshot.take(source, /*keep=*/true);
  EXPECT_EQ(calls, 4);  // w, w.m, w.v, b
  EXPECT_EQ(snapshot.bytes(), snapshot_bytes(source.params));
  TrainConfig config;
  save_checkpoint((out.path / "direct").string(), config, source, 7);
  save_checkpoint((out.path / "snap").string(), config, snapshot.source(), 7);
  for (const char* f : {"model.safetensors", "optimizer.safetensors", "manifest.json"}) {
    std::ifstream a(out.path / "direct" / f, std::ios::binary),
        b(out.path / "snap" / f, std::ios::binary);
    std::string x((std::istreambuf_iterator<char>(a)), {}),
        y((std::istreambuf_iterator<char>(b)), {});
    EXPECT_FALSE(x.empty()) << f;
    EXPECT_EQ(x, y) << f;
  }
  EXPECT_EQ(read_checkpoint_info((out.path / "snap").string()).state["next_step"], 7);
  CheckpointSnapshot other;
  other.take(source, /*keep=*/false);  // a rank that only joins the gathers
  EXPECT_EQ(other.bytes(), 0);
}

// reserve() allocates the buffer ahead without reading a tensor; the take
// after it copies into that buffer, allocating nothing more.
TEST(CheckpointSnapshot, ReserveAllocatesAheadSoTheTakeOnlyCopies) {
  std::vector<float> scratch;
  int calls = 0;
  const CheckpointSource source = two_params(scratch, calls);
  const int64_t before = allocation_stats().live_bytes;
  CheckpointSnapshot snapshot;
  snapshot.reserve(source, /*keep=*/true);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(snapshot.bytes(), snapshot_bytes(source.params));
  EXPECT_EQ(allocation_stats().live_bytes - before, snapshot.bytes());
  reset_allocation_peak();
  snapshot.take(source, /*keep=*/true);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(allocation_stats().peak_bytes - before, snapshot.bytes()) << "a second buffer";
}

}  // namespace
}  // namespace tessel
