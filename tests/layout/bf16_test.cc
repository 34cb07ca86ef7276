// bf16 mixed precision under real mpirun: every mesh trains to within 2e-3
// relative of one process in bf16 (per step, over 6 steps), recomputation is
// bitwise identical to storing, and bf16 really changes the result (so the
// option cannot be a silent no-op). bf16-stored activations change no
// number and halve the sequence-parallel all-gathers; gradient buckets in
// bf16 (grad_reduce_precision) halve the gradient bytes, exactly, and so do
// tensor-parallel partial sums in bf16 (tp_comm_precision). The memory
// side (predicted == measured in bf16) is in layout_invariance_test.cc's
// MeasuredMemory cases.
#include "layout/layout_harness.h"
#include "tessel/base/error.h"
#include "tessel/kernels/einsum_bf16.h"

namespace tessel {
namespace {

constexpr double kBf16RelTol = 2e-3;

nlohmann::json bf16_config() {
  nlohmann::json c = gpt_config();
  c["steps"] = 6;
  c["eval_every"] = 0;
  c["precision"] = "bf16";
  return c;
}

// Runs on every CPU: where oneDNN has no bf16 matmul, the einsums take the
// widened-f32 route (kernels/einsum_bf16.h), with the same numerics.
class Bf16Training : public LayoutInvariance {
 protected:
  static const TrainRun& bf16_reference() {
    static TrainRun r = train("bf16_single", bf16_config(), 0);
    return r;
  }
};

void expect_close(const TrainRun& got, const TrainRun& want, double tol, const std::string& what) {
  ASSERT_EQ(got.steps.size(), want.steps.size()) << what;
  for (size_t s = 0; s < want.steps.size(); ++s) {
    double a = got.steps[s]["loss"], b = want.steps[s]["loss"];
    EXPECT_LE(std::abs(a - b), tol * std::abs(b))
        << what << ": loss at step " << s << ": " << a << " vs " << b;
  }
}

struct Bf16Case {
  const char* name;
  int ranks;
  const char* mesh;
  const char* args;
};
void PrintTo(const Bf16Case& c, std::ostream* out) { *out << c.name; }

class Bf16Layouts : public Bf16Training, public ::testing::WithParamInterface<Bf16Case> {};

// The planner's choice in bf16 joins the matrix: `train --plan auto` on 4
// ranks, from a profile `calibrate --quick` writes into a private cache,
// prices bf16 with the profile's bf16 figures and trains within 2e-3 of one
// process. Calibrate measures bf16 only where the CPU multiplies it
// natively; elsewhere the plan is refused (MachineProfile's tests).
TEST_F(Bf16Training, PlanAutoMatchesSingleProcess) {
  if (!kernels::cpu_has_native_bf16())
    GTEST_SKIP() << "no native bf16 on this CPU: calibrate measures no bf16 figures";
  TrainRun got = train_plan_auto("bf16_plan_auto_4", bf16_config(), 4);
  expect_close(got, bf16_reference(), kBf16RelTol, "train --plan auto in bf16 on 4 ranks");
}

TEST_P(Bf16Layouts, LossesWithinTwoThousandthsOfOneProcess) {
  const Bf16Case& c = GetParam();
  TrainRun got = train(c.name, bf16_config(), c.ranks, c.mesh, "", c.args);
  expect_close(got, bf16_reference(), kBf16RelTol, c.name);
  EXPECT_NE(got.output.find("precision bf16: matmul on "), std::string::npos) << got.output;
}

INSTANTIATE_TEST_SUITE_P(Bf16, Bf16Layouts,
                         ::testing::Values(Bf16Case{"bf16_data2", 2, "data=2", ""},
                                           Bf16Case{"bf16_model2", 2, "model=2", ""},
                                           Bf16Case{"bf16_data2_model2", 4, "data=2,model=2", ""},
                                           Bf16Case{"bf16_pipe2", 2, "pipe=2", "--microbatches 2"},
                                           // ZeRO-3 gathers GEMM weights in bf16
                                           Bf16Case{"bf16_zero3_data2", 2, "data=2", "--zero 3"},
                                           // tensor-parallel partial sums in bf16
                                           Bf16Case{"bf16_tp_data2_model2", 4, "data=2,model=2",
                                                    "--set tp_comm_precision=bf16"},
                                           Bf16Case{"bf16_tp_sp_model2", 2, "model=2",
                                                    "--layout heads=model,hidden=model,"
                                                    "vocab=model,seq=model "
                                                    "--set tp_comm_precision=bf16"},
                                           Bf16Case{"bf16_tp_pipe2_model2", 4, "pipe=2,model=2",
                                                    "--microbatches 2 "
                                                    "--set tp_comm_precision=bf16"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_F(Bf16Training, RecomputeIsBitwiseEqualToStoring) {
  nlohmann::json config = bf16_config();
  config["recompute"] = "blocks";
  TrainRun got = train("bf16_recompute_blocks", config, 0);
  const TrainRun& want = bf16_reference();
  ASSERT_EQ(got.steps.size(), want.steps.size());
  for (size_t s = 0; s < want.steps.size(); ++s)
    EXPECT_EQ(got.steps[s]["loss"].get<double>(), want.steps[s]["loss"].get<double>())
        << "step " << s;
  for (const TensorRecord& w : want.params.tensors) {
    const TensorRecord* g = got.params.find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->bytes, w.bytes) << "parameter " << w.name << " differs";
  }
}

TEST_F(Bf16Training, ChangesTheResultButStaysClose) {
  nlohmann::json f32 = bf16_config();
  f32["precision"] = "f32";
  TrainRun want = train("bf16_vs_f32", f32, 0);
  const TrainRun& got = bf16_reference();
  ASSERT_EQ(got.steps.size(), want.steps.size());
  bool differs = false;
  for (size_t s = 0; s < want.steps.size(); ++s)
    differs |= got.steps[s]["loss"].get<double>() != want.steps[s]["loss"].get<double>();
  EXPECT_TRUE(differs) << "bf16 trained bit-identically to f32: the GEMMs did not run in bf16";
  expect_close(got, want, 2e-2, "bf16 vs f32");
}

// Sequence parallelism gathers on the model axis, per step: the
// LayerNorm outputs read by GEMMs (2 per block and ln_f) and the output
// gradients read by the row-parallel GEMMs' backward (2 per block). Stored in
// bf16, they are gathered in bf16: the same numbers as gathering f32 and
// rounding, 2 bytes per element instead of 4. The other gathers stay as they
// were: tokens and targets (i32), the embedding's output gradient (read by
// the embedding's backward) and the position table's gradient.
TEST_F(Bf16Training, SequenceParallelGathersCarryBf16) {
  const std::string layout = "heads=model,hidden=model,vocab=model,seq=model";
  const nlohmann::json config = bf16_config();
  nlohmann::json f32_stored = config;
  f32_stored["bf16_activations"] = false;
  TrainRun off = train("bf16_sp_f32_stored", f32_stored, 2, "model=2", layout);
  TrainRun on = train("bf16_sp_bf16_stored", config, 2, "model=2", layout);
  const int64_t layers = config["n_layer"];
  const int64_t shard = config["batch"].get<int64_t>() * config["context"].get<int64_t>() *
                        config["d_model"].get<int64_t>() / 2;  // elements per rank
  const int64_t bf16_gathers = 2 * layers + 1 + 2 * layers;
  ASSERT_EQ(on.steps.size(), off.steps.size());
  for (size_t s = 0; s + 1 < on.steps.size(); ++s) {  // the last step adds evaluation
    auto [calls_off, bytes_off] = comm(off, s, "model", "all_gather");
    auto [calls_on, bytes_on] = comm(on, s, "model", "all_gather");
    EXPECT_EQ(calls_on, calls_off) << "step " << s;
    EXPECT_GT(bytes_off, bf16_gathers * shard * 4) << "step " << s;
    EXPECT_EQ(bytes_on, bytes_off - bf16_gathers * shard * 2) << "step " << s;
  }
  for (size_t s = 0; s < on.steps.size(); ++s) {
    const double a = on.steps[s]["loss"], b = off.steps[s]["loss"];
    if (kernels::bf16_route() == kernels::Bf16Route::kWidenedF32)
      EXPECT_EQ(a, b) << "step " << s;  // the same f32 GEMMs on the same bf16 values
    else
      EXPECT_LE(std::abs(a - b), 1e-5 * std::abs(b)) << "step " << s;
  }
  expect_close(on, bf16_reference(), kBf16RelTol, "bf16 sequence parallel");
}

// grad_reduce_precision bf16: the gradient buckets carry 2 bytes per
// parameter instead of 4 (the loss keeps its own f32 all-reduce), summed in
// f32; the losses stay within 2e-3 of one process.
TEST_F(Bf16Training, GradReduceInBf16HalvesTheGradientBytes) {
  // Batch 32: every gradient is all-reduced (see LayoutInvariance.
  // DataParallelMovesTheGradientBytesInBuckets).
  nlohmann::json config = bf16_config();
  config["batch"] = 32;
  TrainRun single = train("bf16_grad_single", config, 0);
  TrainRun f32_reduce = train("bf16_grad_f32", config, 2, "data=2");
  config["grad_reduce_precision"] = "bf16";
  TrainRun bf16_reduce = train("bf16_grad_bf16", config, 2, "data=2");
  int64_t psi = 0;
  for (const TensorRecord& t : f32_reduce.params.tensors) psi += t.bytes.size() / 4;
  ASSERT_GT(psi, 0);
  for (size_t s = 0; s + 1 < f32_reduce.steps.size(); ++s) {  // the last step adds evaluation
    EXPECT_EQ(comm(f32_reduce, s, "data", "all_reduce"), std::make_pair(int64_t{1}, 4 * psi + 4))
        << "step " << s;
    // One bf16 bucket of gradients, and the loss alone in f32.
    EXPECT_EQ(comm(bf16_reduce, s, "data", "all_reduce"), std::make_pair(int64_t{2}, 2 * psi + 4))
        << "step " << s;
  }
  expect_close(f32_reduce, single, kBf16RelTol, "bf16, f32 gradient reduction");
  expect_close(bf16_reduce, single, kBf16RelTol, "bf16, bf16 gradient reduction");
  bool differs = false;
  for (size_t s = 0; s < f32_reduce.steps.size(); ++s)
    differs |= f32_reduce.steps[s]["loss"] != bf16_reduce.steps[s]["loss"];
  EXPECT_TRUE(differs) << "rounding the gradients to bf16 changed no loss";
}

// tp_comm_precision bf16: the partial sums of tensor parallelism (model
// axis) carry 2 bytes per element instead of 4, summed in f32. Per step, on
// model=2: 4 per block (forward: attention output and MLP output; backward:
// the gradients of ln1's and ln2's outputs) and 2 for the tied,
// vocab-split embedding (the lookup, and the LM head's input gradient), each
// of batch * context * d_model elements: all-reduces, or under sequence
// parallelism reduce-scatters. The other model-axis all-reduces (the
// cross-entropy's row statistics, the sequence-parallel LayerNorm and bias
// gradients) stay f32, as do the calls.
TEST_F(Bf16Training, TensorParallelPartialSumsCarryBf16) {
  const nlohmann::json config = bf16_config();
  nlohmann::json bf16_sums = config;
  bf16_sums["tp_comm_precision"] = "bf16";
  const int64_t layers = config["n_layer"];
  const int64_t elements = config["batch"].get<int64_t>() * config["context"].get<int64_t>() *
                           config["d_model"].get<int64_t>();
  const int64_t sums = 4 * layers + 2;
  const std::string sp = "heads=model,hidden=model,vocab=model,seq=model";
  struct Pair {
    const char* name;
    std::string layout;
    const char* kind;  // the collective the partial sums are
  };
  for (const Pair& c : {Pair{"tp", "", "all_reduce"}, Pair{"sp", sp, "reduce_scatter"}}) {
    TrainRun off = train(str_cat("bf16_tp_f32sums_", c.name), config, 2, "model=2", c.layout);
    TrainRun on = train(str_cat("bf16_tp_bf16sums_", c.name), bf16_sums, 2, "model=2", c.layout);
    ASSERT_EQ(on.steps.size(), off.steps.size()) << c.name;
    for (size_t s = 0; s + 1 < on.steps.size(); ++s) {  // the last step adds evaluation
      auto [calls_off, bytes_off] = comm(off, s, "model", c.kind);
      auto [calls_on, bytes_on] = comm(on, s, "model", c.kind);
      EXPECT_EQ(calls_on, calls_off) << c.name << " step " << s;
      EXPECT_GE(bytes_off, sums * elements * 4) << c.name << " step " << s;
      EXPECT_EQ(bytes_on, bytes_off - sums * elements * 2) << c.name << " step " << s;
      for (const char* other : {"all_reduce", "all_gather"}) {
        if (std::string(other) == c.kind) continue;
        EXPECT_EQ(comm(on, s, "model", other), comm(off, s, "model", other))
            << c.name << " " << other << " step " << s;
      }
    }
    expect_close(on, bf16_reference(), kBf16RelTol, str_cat("bf16 partial sums, ", c.name));
    expect_close(off, bf16_reference(), kBf16RelTol, str_cat("f32 partial sums, ", c.name));
    bool differs = false;
    for (size_t s = 0; s < on.steps.size(); ++s)
      differs |= on.steps[s]["loss"] != off.steps[s]["loss"];
    EXPECT_TRUE(differs) << c.name << ": rounding the partial sums to bf16 changed no loss";
  }
}

// grad_reduce_precision bf16 under ZeRO 1-3: the gradients' reduce-scatters
// on the data axis carry 2 bytes per element instead of 4 (summed in f32,
// each rank's shard kept in f32), with the same calls; the losses stay within
// 2e-3 of one process.
TEST_F(Bf16Training, GradReduceInBf16HalvesZeroReduceScatters) {
  nlohmann::json config = bf16_config();
  for (int zero : {1, 2, 3}) {
    const std::string args = str_cat("--zero ", zero);
    TrainRun f32_reduce =
        train(str_cat("bf16_zero", zero, "_grad_f32"), config, 2, "data=2", "", args);
    nlohmann::json bf16 = config;
    bf16["grad_reduce_precision"] = "bf16";
    TrainRun bf16_reduce =
        train(str_cat("bf16_zero", zero, "_grad_bf16"), bf16, 2, "data=2", "", args);
    ASSERT_EQ(bf16_reduce.steps.size(), f32_reduce.steps.size());
    for (size_t s = 0; s + 1 < f32_reduce.steps.size(); ++s) {
      auto [calls_f32, bytes_f32] = comm(f32_reduce, s, "data", "reduce_scatter");
      auto [calls_bf16, bytes_bf16] = comm(bf16_reduce, s, "data", "reduce_scatter");
      EXPECT_GT(calls_f32, 0) << "zero " << zero;
      EXPECT_EQ(calls_bf16, calls_f32) << "zero " << zero << " step " << s;
      EXPECT_EQ(2 * bytes_bf16, bytes_f32) << "zero " << zero << " step " << s;
    }
    expect_close(bf16_reduce, bf16_reference(), kBf16RelTol, str_cat("zero ", zero, " bf16 grads"));
    bool differs = false;
    for (size_t s = 0; s < f32_reduce.steps.size(); ++s)
      differs |= f32_reduce.steps[s]["loss"] != bf16_reduce.steps[s]["loss"];
    EXPECT_TRUE(differs) << "zero " << zero << ": rounding the gradients changed no loss";
  }
}

TEST_F(Bf16Training, GradReduceInBf16IsRefusedWherePipelinesReduce) {
  nlohmann::json config = bf16_config();
  config["grad_reduce_precision"] = "bf16";
  expect_fails("bf16_grad_pipe", config, 2, "--mesh pipe=2 --microbatches 2",
               "'grad_reduce_precision' bf16 reduces the gradients of a run without pipeline");
}

}  // namespace
}  // namespace tessel
