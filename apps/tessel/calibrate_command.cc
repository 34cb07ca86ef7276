// `tessel calibrate`: measures this machine for the planner (GEMM throughput
// by shape and threads, kernel bandwidth, collective and send/recv
// alpha-beta) and writes the machine profile (plan/calibrate.h). It launches
// mpirun itself for the collectives; the hidden --collectives-out is that
// inner run.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/plan/calibrate.h"
#include "tessel/plan/calibrate_links.h"

namespace tessel::cli {
namespace {

struct CalibrateCliOptions {
  plan::CalibrateOptions calibrate;
  std::string collectives_out;
};

// Headline figures, one line each.
void print_summary(const plan::MachineProfile& profile, int threads) {
  using plan::Link;
  using plan::Precision;
  std::printf("machine: %s, %d cores\n", profile.data().cpu_model.c_str(), profile.data().nproc);
  for (int t : {1, threads}) {
    std::printf("%d thread%s: FMA peak %.1f GFLOP/s; GEMM GFLOP/s", t, t == 1 ? "" : "s",
                profile.peak_flops(Precision::kF32, t) / 1e9);
    for (auto [m, n, k] : {std::array<int64_t, 3>{1024, 1024, 1024},
                           {1024, 1536, 384},
                           {512, 512, 64},
                           {128, 128, 64}}) {
      const double s = profile.gemm_seconds(1, m, n, k, Precision::kF32, t);
      std::printf(" %lldx%lldx%lld %.1f", static_cast<long long>(m), static_cast<long long>(n),
                  static_cast<long long>(k), 2.0 * m * n * k / s / 1e9);
    }
    std::printf("; elementwise %.1f GB/s, row %.1f GB/s\n", profile.elementwise_gbs(t),
                profile.row_gbs(t));
    if (threads == 1) break;
  }
  for (const plan::LinkFit& l : profile.data().links)
    std::printf("%-14s %d ranks: alpha %.2f us, beta %.3f ms/MB (%.2f GB/s)\n", l.kind.c_str(),
                l.ranks, l.fit.alpha_s * 1e6, l.fit.beta_s_per_byte * 1e9,
                l.fit.beta_s_per_byte > 0 ? 1e-9 / l.fit.beta_s_per_byte : 0.0);
  std::printf("profile: %s\n", profile.source().c_str());
}

int run_calibrate(const CalibrateCliOptions& opt) {
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
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quick", opt->calibrate.quick,
                "fewer shapes and sizes, collectives on 2 ranks only (a few seconds)");
  cmd->add_option("--collectives-out", opt->collectives_out,
                  "internal: measure collectives on the mpirun world, write the fits here")
      ->group("");
  return {cmd, [opt] { return run_calibrate(*opt); }};
}

}  // namespace tessel::cli
