// `collectives: staged` under real mpirun: every collective that programs,
// ZeRO and a pipeline's gradient sums run on device buffers goes through
// pinned host staging, a few hundred elements of each rank block at a time
// (staging_mib), and every pipeline transfer through its own pinned mirror
// (runtime/transfer_staging.h; two stages a rank under the interleaved
// schedule). Over a 2-rank axis MPI adds the same two numbers whatever the
// message size, so a staged run is bitwise equal to the same layout with
// Open MPI on the buffers themselves; on 4 ranks it is within the layout
// matrix's tolerance of one process. On every rank the staging is pinned
// host memory, predicted to the byte, and the device figure is unchanged.
#include "layout/layout_harness.h"

namespace tessel {
namespace {

class StagedCollectives : public LayoutInvariance {
 protected:
  static nlohmann::json staged(nlohmann::json c) {
    c["collectives"] = "staged";
    c["staging_mib"] = 0.002;  // 524 floats: most collectives take several pieces
    return c;
  }
  static nlohmann::json rank_memory(const std::string& run, int rank) {
    return nlohmann::json::parse(
               std::ifstream(root() / run / "out" / "summary.json"))["memory_per_rank"]
        .at(rank)["predicted_bytes"];
  }
  // Staging shows in the host figure only, and the device's is unchanged.
  static void expect_staging_on_host(const std::string& got, const std::string& want, int ranks) {
    for (int r = 0; r < ranks; ++r) {
      const nlohmann::json a = rank_memory(got, r), b = rank_memory(want, r);
      const std::string at = got + " rank " + std::to_string(r);
      EXPECT_GT(a["host_comm_staging"].get<int64_t>(), 0) << at;
      EXPECT_EQ(b["host_comm_staging"].get<int64_t>(), 0) << at;
      EXPECT_EQ(a["device"].get<int64_t>(), b["device"].get<int64_t>()) << at;
    }
  }
};

struct StagedSplit {
  std::string name, mesh, layout, extra;
};

TEST_F(StagedCollectives, TrainBitwiseLikeOpenMpiOnTheBuffersOnEveryTwoRankLayout) {
  const std::string tensor = "heads=model,hidden=model,vocab=model";
  for (const StagedSplit& s :
       {StagedSplit{"data2", "data=2", "", ""},
        StagedSplit{"data2_zero1", "data=2", "", "--zero 1"},
        StagedSplit{"data2_zero3", "data=2", "", "--zero 3"},
        StagedSplit{"data2_bf16", "data=2", "",
                    "--set precision=bf16 --set grad_reduce_precision=bf16 --zero 1"},
        StagedSplit{"model2", "model=2", tensor, ""},
        StagedSplit{"seq2", "model=2", tensor + ",seq=model", ""},
        StagedSplit{"ctx2_all_to_all", "ctx=2", "seq=ctx", "--set context_parallel=all_to_all"},
        StagedSplit{"pipe2_1f1b", "pipe=2", "", "--schedule 1f1b --microbatches 4"},
        StagedSplit{"pipe2_zb", "pipe=2", "", "--schedule zb-h1 --microbatches 4"},
        StagedSplit{"pipe2_interleaved", "pipe=2", "",
                    "--schedule interleaved --chunks 2 --microbatches 4 --set n_layer=4"},
        StagedSplit{"pipe2_pipedream", "pipe=2", "", "--schedule pipedream --microbatches 4"}}) {
    const std::string name = "staged_" + s.name;
    const TrainRun want = train(name + "_mpi", gpt_config(), 2, s.mesh, s.layout, s.extra);
    const TrainRun got = train(name, staged(gpt_config()), 2, s.mesh, s.layout, s.extra);
    ASSERT_EQ(got.steps.size(), want.steps.size()) << name;
    for (size_t i = 0; i < want.steps.size(); ++i) {
      for (const char* key : {"loss", "grad_norm"})
        EXPECT_EQ(got.steps[i][key].get<double>(), want.steps[i][key].get<double>())
            << name << ": " << key << " at step " << i;
      EXPECT_EQ(got.steps[i].value("comm", nlohmann::json()),
                want.steps[i].value("comm", nlohmann::json()))
          << name << ": collectives counted at step " << i;
    }
    for (const TensorRecord& w : want.params.tensors) {
      const TensorRecord* g = got.params.find(w.name);
      EXPECT_TRUE(g && g->bytes == w.bytes) << name << ": parameter " << w.name << " differs";
    }
    expect_memory_exact(name);
    expect_staging_on_host(name, name + "_mpi", 2);
  }
}

TEST_F(StagedCollectives, FourRanksMatchOneProcessWithTheStagingPredicted) {
  const std::string tensor = "heads=model,hidden=model,vocab=model";
  for (const StagedSplit& s :
       {StagedSplit{"data2_pipe2", "data=2,pipe=2", "",
                    "--schedule 1f1b "
                    "--microbatches 4 --zero 1"},
        StagedSplit{"data2_model2", "data=2,model=2", "batch=data," + tensor, ""}}) {
    const std::string name = "staged4_" + s.name;
    expect_same(train(name, staged(gpt_config()), 4, s.mesh, s.layout, s.extra), reference("gpt"),
                name);
    expect_memory_exact(name);
    train(name + "_mpi", gpt_config(), 4, s.mesh, s.layout, s.extra + " --steps 1");
    expect_staging_on_host(name, name + "_mpi", 4);
  }
}

// Ring attention is refused before any compute, an unknown value by name,
// and staging that cannot be allocated names the communicator and the key.
TEST_F(StagedCollectives, BadSettingsFailByName) {
  nlohmann::json c = staged(gpt_config());
  c["context_parallel"] = "ring";
  expect_fails("staged_ring", c, 2, "--mesh ctx=2 --layout seq=ctx",
               "'context_parallel' \"ring\" passes key and value blocks inside the attention "
               "kernel, which collectives \"staged\" does not stage yet");
  c["context_parallel"] = "";
  c["collectives"] = "nccl";
  expect_fails("staged_nccl", c, 2, "--mesh data=2",
               "'collectives' must be auto, mpi or staged, got \"nccl\"");
  c["collectives"] = "staged";
  c["staging_mib"] = 1e9;  // 2 PB: past any address space, so no overcommit grants it
  expect_fails("staged_too_large", c, 2, "--mesh data=2",
               "staged communicator 'data' (2 ranks, pieces of 262144000000000 elements): device "
               "cpu: cannot allocate 2097152000000000 bytes of pinned host memory for its "
               "staging; lower staging_mib");
}

}  // namespace
}  // namespace tessel
