#include "tessel/plan/calibrate/calibrate.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tessel/base/error.h"
#include "tessel/base/steady_clock.h"
#include "tessel/plan/calibrate/calibrate_compute.h"
#include "tessel/plan/calibrate/calibrate_links.h"
#include "tessel/plan/calibrate/contention.h"
#include "tessel/plan/model/einsum_in_situ.h"
#include "tessel/plan/profile/kernel_rates.h"
#include "tessel/runtime/machine_peak.h"

namespace tessel::plan {

namespace fs = std::filesystem;

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

// The machine's online cores, not this process's affinity: a rank under
// mpirun may be bound to one core, and must find the same cached profile.
int core_count() { return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

std::string default_profile_path() {
  const std::string key = cpu_model_name() + "|" + std::to_string(core_count());
  uint64_t hash = 1469598103934665603ull;  // FNV-1a, 64-bit
  for (unsigned char c : key) hash = (hash ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  fs::path dir = xdg && *xdg ? fs::path(xdg) : fs::path(home && *home ? home : ".") / ".cache";
  return (dir / "tessel" / ("profile-" + std::string(hex) + ".json")).string();
}

namespace {

// Why the machine looks busy now ("" if quiet): the load, less `own_load`.
std::string busy_now(const ContentionSettings& s, double own_load, int threads, int cores) {
  const std::optional<double> load = read_load_average(s.loadavg);
  return load ? busy_by_load(*load, own_load, threads, cores, s.load_margin) : "";
}

// Contention found after measuring: a warning with --force, else an error
// (unless use_when_busy: a warning, and the profile is not saved).
bool refuse_to_save(const CalibrateOptions& options, const std::string& why) {
  if (why.empty()) return false;
  if (options.force) {
    std::fprintf(stderr,
                 "calibrate: WARNING: the machine was busy while calibrating (%s); saving the "
                 "profile anyway (--force): plans priced with it may be far off\n",
                 why.c_str());
    return false;
  }
  if (!options.use_when_busy)
    TS_THROW("calibrate: the machine was busy while calibrating (", why,
             "), so the profile would misprice every plan; it was not saved (a profile "
             "already there is untouched). Calibrate again on a quiet machine, or pass --force "
             "to save it anyway");
  std::fprintf(stderr,
               "tessel: WARNING: the machine was busy while calibrating (%s); this plan uses "
               "the profile, but it is not cached: run `tessel calibrate` on a quiet machine\n",
               why.c_str());
  return true;
}

// The fused attention's FLOP rates, f32 and (where the grid has bf16) bf16.
void measure_attention(MachineProfileData& d, const std::vector<int>& counts,
                       const CalibrateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Precision> precisions = {Precision::kF32};
  if (!d.gemm_bf16.empty()) precisions.push_back(Precision::kBF16);
  d.attention_rates = measure_attention_rates(counts, precisions, options.quick);
  if (!options.progress) return;
  std::fprintf(
      stderr, "calibrate: fused attention at context %lld (GFLOP/s, causal halved):",
      static_cast<long long>(attention_rate_config(options.quick, Precision::kF32).context));
  for (const AttentionRate& r : d.attention_rates)
    std::fprintf(stderr, " %s %s %dt %.1f", r.op.c_str(), precision_name(r.precision), r.threads,
                 r.gflops);
  std::fprintf(stderr, ", %.1f s\n", seconds_since(t0));
}

}  // namespace

MachineProfile calibrate_machine(const CalibrateOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const int cores = core_count();
  const int threads = options.threads > 0 ? options.threads : cores;
  const ContentionSettings contention = contention_settings();
  if (const std::string why = busy_now(contention, 0, threads, cores); !why.empty()) {
    if (!options.force)
      TS_THROW("calibrate: this machine is busy (", why,
               "): a profile measured now would misprice every plan, so nothing was measured "
               "or saved. Wait for the other jobs (the load is a one-minute average), or pass "
               "--force to calibrate anyway");
    std::fprintf(stderr, "calibrate: WARNING: this machine is busy (%s); calibrating anyway\n",
                 why.c_str());
  }
  std::vector<int> counts = {1};
  if (threads > 1) counts.push_back(threads);
  const std::string out = options.out.empty() ? default_profile_path() : options.out;
  const std::string binary = options.tessel_binary.empty()
                                 ? fs::read_symlink("/proc/self/exe").string()
                                 : options.tessel_binary;

  MachineProfileData d = measure_compute(counts, options.quick, options.progress);
  // The single-core FMA probe, repeated after each phase: its spread is noise.
  std::vector<double> probes = {d.fma_peak_gflops.front().gflops};
  const double probe_s = options.quick ? 0.1 : 0.2;
  probes.push_back(measure_fma_peak_gflops(1, probe_s));
  d.cpu_model = cpu_model_name();
  d.nproc = cores;
  d.kernels = measure_kernel_rates(counts, options.quick);
  measure_attention(d, counts, options);
  for (int ranks : options.quick ? std::vector<int>{2} : std::vector<int>{2, 4}) {
    const auto t0 = std::chrono::steady_clock::now();
    LinkCalibration links = measure_links(binary, ranks, options.quick);
    for (LinkFit& fit : links.links) d.links.push_back(fit);
    if (links.has_progress) {
      d.has_progress = true;
      d.progress = links.progress;
      if (options.progress)
        std::fprintf(stderr,
                     "calibrate: polled progress: all-reduce %.0f%% hidden, %.0f KiB a poll, "
                     "non-blocking %.2fx the blocking one; send %.0f%% hidden, %.0f KiB a poll\n",
                     100 * links.progress.all_reduce_overlap,
                     links.progress.all_reduce_poll_bytes / 1024, links.progress.nonblocking_factor,
                     100 * links.progress.send_overlap, links.progress.send_poll_bytes / 1024);
    }
    if (links.has_co_run) {
      d.has_co_run = true;
      d.co_run = links.co_run;
      if (options.progress)
        std::fprintf(stderr,
                     "calibrate: co-run: a rank's training step %.3fx as long beside a computing "
                     "rank, %.3fx beside a polling one\n",
                     links.co_run.computing, links.co_run.polling);
    }
    if (options.progress)
      std::fprintf(stderr, "calibrate: collectives and send/recv on %d ranks, %.1f s\n", ranks,
                   seconds_since(t0));
  }
  // The memory rates again, after the other phases: each keeps its faster
  // figure, so one noisy measurement does not misprice every
  // memory-bound kernel.
  for (MemoryRate& rate : d.memory)
    keep_faster(rate, measure_memory_rates(rate.threads, options.quick));
  {
    // The in-situ factors are measured against the finished grid's charges.
    const auto t0 = std::chrono::steady_clock::now();
    const MachineProfile grid_only(d, out);
    d.einsum_in_situ = measure_in_situ(grid_only, counts, options.quick);
    if (!d.gemm_bf16.empty())
      d.einsum_in_situ_bf16 = measure_in_situ(grid_only, counts, options.quick, Precision::kBF16);
    if (options.progress) {
      std::fprintf(stderr, "calibrate: einsums in a program over alone (by log2 FLOPs):");
      for (const InSituPoint& p : d.einsum_in_situ)
        std::fprintf(stderr, " %dt@%.1f %.2fx", p.threads, p.log2_flops, p.factor);
      if (!d.einsum_in_situ_bf16.empty()) std::fprintf(stderr, "; bf16:");
      for (const InSituPoint& p : d.einsum_in_situ_bf16)
        std::fprintf(stderr, " %dt@%.1f %.2fx", p.threads, p.log2_flops, p.factor);
      std::fprintf(stderr, ", %.1f s\n", seconds_since(t0));
    }
  }
  probes.push_back(measure_fma_peak_gflops(1, probe_s));
  std::string why = busy_now(contention, threads, threads, cores);
  if (const double spread = spread_of(probes); spread > contention.spread) {
    char text[160];
    std::snprintf(text, sizeof(text),
                  "%srepeats of the single-core FMA probe spread %.0f%%, more than %.0f%%",
                  why.empty() ? "" : "; ", 100 * spread, 100 * contention.spread);
    why += text;
  }
  MachineProfile profile(std::move(d), out);
  if (refuse_to_save(options, why)) return profile;
  profile.save(out);
  if (options.progress)
    std::fprintf(stderr, "calibrate: wrote %s (%.1f s)\n", out.c_str(), seconds_since(start));
  return profile;
}

std::unique_ptr<HardwareModel> load_or_calibrate(const std::string& profile_path, bool* calibrated,
                                                 const std::string& how_to_skip) {
  if (calibrated) *calibrated = false;
  if (!profile_path.empty())
    return std::make_unique<MachineProfile>(MachineProfile::load(profile_path));
  const std::string path = default_profile_path();
  if (fs::exists(path)) return std::make_unique<MachineProfile>(MachineProfile::load(path));
  std::fprintf(stderr,
               "tessel: no machine profile cached at %s; calibrating this machine first "
               "(`tessel calibrate`, under a minute; the profile is cached there for later "
               "runs)%s%s\n",
               path.c_str(), how_to_skip.empty() ? "" : ". ", how_to_skip.c_str());
  CalibrateOptions options;
  options.out = path;
  auto profile = std::make_unique<MachineProfile>(calibrate_machine(options));
  if (calibrated) *calibrated = true;
  return profile;
}

}  // namespace tessel::plan
