// `tessel calibrate`: measures this machine for the planner (GEMM throughput
// by shape and threads, kernel bandwidth, collective and send/recv
// alpha-beta) and writes the machine profile (plan/calibrate/calibrate.h). It launches
// mpirun itself for the collectives; the hidden --collectives-out is that
// inner run. The hidden --check CONFIG times a config's training program
// instruction by instruction against a profile's prices (plan/calibrate/calibrate_check.h).
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.h"
#include "config_options.h"
#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/plan/calibrate/calibrate.h"
#include "tessel/plan/calibrate/calibrate_check.h"
#include "tessel/plan/calibrate/calibrate_links.h"

namespace tessel::cli {
namespace {

struct CalibrateCliOptions {
  plan::CalibrateOptions calibrate;
  std::string collectives_out;
  ConfigOptions check;  // --check CONFIG [--set k=v]: time a config against a profile
  std::string profile;
  int repeats = 5;
};

// --check: measured against predicted per instruction kind, one run of the
// program (each instruction's median run), at --threads (default 1).
int run_check(const CalibrateCliOptions& opt) {
  const TrainConfig config = opt.check.load(false);
  const std::unique_ptr<plan::HardwareModel> hw = plan::load_or_calibrate(opt.profile, nullptr);
  const int threads = opt.calibrate.threads > 0 ? opt.calibrate.threads : 1;
  const plan::ProgramCheck c = plan::check_program(config, *hw, threads, opt.repeats);
  std::printf("%-28s %5s %12s %12s %8s %9s\n", "kind", "count", "measured ms", "predicted ms",
              "error", "GFLOP/s");
  for (const plan::CheckedKind& k : c.kinds)
    std::printf("%-28s %5d %12.3f %12.3f %+7.1f%% %9.1f\n", k.kind.c_str(), k.count,
                k.measured_s * 1e3, k.predicted_s * 1e3, 100 * (k.predicted_s / k.measured_s - 1),
                k.gemm_flops > 0 ? k.gemm_flops / k.measured_s / 1e9 : 0.0);
  std::printf("%-28s %5s %12.3f %12.3f %+7.1f%%\n", "einsums", "", c.einsum_measured_s * 1e3,
              c.einsum_predicted_s * 1e3, 100 * (c.einsum_predicted_s / c.einsum_measured_s - 1));
  std::printf("%-28s %5s %12.3f %12.3f %+7.1f%%\n", "program", "", c.measured_s * 1e3,
              c.predicted_s * 1e3, 100 * (c.predicted_s / c.measured_s - 1));
  return 0;
}

// Headline figures: the FMA peak, GEMM rates at a cube and at the GPT
// benchmark's forward shapes (examples/gpt-bench.json: 1024 tokens, d_model
// 384, MLP 1536, vocab 256, 48 (batch, head) pairs of 128 x 64), kernel
// bandwidth, and every alpha-beta fit.
void print_summary(const plan::MachineProfile& profile, int threads) {
  using plan::Precision;
  std::vector<int> counts = {1};
  if (threads > 1) counts.push_back(threads);
  std::printf("machine: %s, %d cores\n", profile.data().cpu_model.c_str(), profile.data().nproc);
  std::printf("%-28s", "GFLOP/s at threads");
  for (int t : counts) std::printf(" %8d", t);
  const std::array<int64_t, 4> shapes[] = {
      {1, 1024, 1024, 1024}, {1, 1024, 384, 384}, {1, 1024, 1536, 384}, {1, 1024, 384, 1536},
      {1, 1024, 256, 384},   {48, 128, 128, 64},  {48, 128, 64, 128}};
  std::vector<Precision> precisions = {Precision::kF32};
  if (!profile.data().gemm_bf16.empty()) precisions.push_back(Precision::kBF16);
  for (Precision p : precisions) {
    const char* suffix = p == Precision::kBF16 ? " bf16" : "";
    std::printf("\n%-28s", p == Precision::kBF16 ? "bf16 peak" : "FMA peak");
    for (int t : counts) std::printf(" %8.1f", profile.peak_flops(p, t) / 1e9);
    std::printf("\n");
    for (const auto& [b, m, n, k] : shapes) {
      char label[64];
      std::snprintf(label, sizeof(label), "GEMM %s%lldx%lldx%lld%s", b > 1 ? "48 x " : "",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                    suffix);
      std::printf("%-28s", label);
      for (int t : counts)
        std::printf(" %8.1f", 2.0 * b * m * n * k / profile.gemm_seconds(b, m, n, k, p, t) / 1e9);
      std::printf("\n");
    }
    for (const char* op : {"attention", "attention_grad"}) {
      std::vector<double> gflops;
      for (int t : counts)
        for (const plan::AttentionRate& r : profile.data().attention_rates)
          if (r.op == op && r.precision == p && r.threads == t) gflops.push_back(r.gflops);
      if (gflops.size() != counts.size()) continue;
      std::printf("%-28s", (std::string(op) + suffix).c_str());
      for (double g : gflops) std::printf(" %8.1f", g);
      std::printf("\n");
    }
  }
  std::printf("%-28s", "elementwise / row GB/s");
  for (int t : counts) std::printf(" %4.1f/%4.1f", profile.elementwise_gbs(t), profile.row_gbs(t));
  std::printf("\n%-28s", "Philox draws, G/s");
  for (int t : counts) std::printf(" %9.2f", 1 / profile.draw_seconds(1e9, t));
  std::printf("\n");
  for (const plan::LinkFit& l : profile.data().links)
    std::printf("%-14s %d ranks: alpha %7.2f us, beta %.3f ms/MB (%.2f GB/s)\n", l.kind.c_str(),
                l.ranks, l.fit.alpha_s * 1e6, l.fit.beta_s_per_byte * 1e9,
                l.fit.beta_s_per_byte > 0 ? 1e-9 / l.fit.beta_s_per_byte : 0.0);
  std::printf("profile: %s\n", profile.source().c_str());
}

int run_calibrate(const CalibrateCliOptions& opt) {
  if (!opt.check.path.empty()) return run_check(opt);
  if (!opt.collectives_out.empty()) {
    plan::measure_links_on_world(opt.collectives_out, opt.calibrate.quick);
    return 0;
  }
  if (MpiRuntime::launched_under_mpi())
    TS_THROW(
        "run `tessel calibrate` without mpirun: it launches mpirun itself to measure the "
        "collectives");
  plan::MachineProfile profile = plan::calibrate_machine(opt.calibrate);
  const int threads = opt.calibrate.threads > 0 ? opt.calibrate.threads : plan::core_count();
  print_summary(profile, threads);
  return 0;
}

}  // namespace

Command add_calibrate_command(CLI::App& app) {
  auto opt = std::make_shared<CalibrateCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate", "measure this machine for the planner (GEMM, bandwidth, collectives)");
  cmd->add_option("--out", opt->calibrate.out,
                  "profile file (default: the cache, $XDG_CACHE_HOME/tessel/profile-*.json)");
  cmd->add_option("--threads", opt->calibrate.threads,
                  "largest thread count measured (default: every core)")
      ->check(at_least(1));
  cmd->add_flag("--quick", opt->calibrate.quick,
                "fewer shapes and sizes, collectives on 2 ranks only (a few seconds)");
  cmd->add_flag("--force", opt->calibrate.force,
                "calibrate and save the profile even when the machine is busy (load average "
                "beyond the free cores, or repeated probes more than 15% apart); without it a "
                "busy machine's profile is not saved");
  cmd->add_option("--collectives-out", opt->collectives_out,
                  "internal: measure collectives on the mpirun world, write the fits here")
      ->group("");
  cmd->add_option("--check", opt->check.path,
                  "diagnostic: time CONFIG's training program (one process) instruction by "
                  "instruction against the profile's prices, at --threads (default 1)")
      ->group("");
  cmd->add_option("--set", opt->check.overrides, "with --check: config overrides KEY=VALUE")
      ->group("");
  cmd->add_option("--profile", opt->profile, "with --check: the profile (default: the cache)")
      ->group("");
  cmd->add_option("--repeats", opt->repeats,
                  "with --check: timed runs (each instruction's median counts)")
      ->check(at_least(1))
      ->group("");
  return {cmd, [opt] { return run_calibrate(*opt); }};
}

}  // namespace tessel::cli
