#include "tessel/plan/calibrate/contention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tessel/base/error.h"
#include "tessel/runtime/machine_peak.h"

namespace tessel::plan {
namespace {

double number_of(const std::string& key, const std::string& value, const char* spec) {
  char* end = nullptr;
  const double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(x) || x < 0)
    TS_THROW("TESSEL_CONTENTION: '", key, "' needs a number >= 0, got '", value, "' in '", spec,
             "'");
  return x;
}

}  // namespace

ContentionSettings contention_settings() {
  ContentionSettings s;
  const char* spec = std::getenv("TESSEL_CONTENTION");
  if (spec == nullptr || *spec == '\0') return s;
  std::stringstream items(spec);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (key == "loadavg" && !value.empty())
      s.loadavg = value;
    else if (key == "load_margin")
      s.load_margin = number_of(key, value, spec);
    else if (key == "spread")
      s.spread = number_of(key, value, spec);
    else if (key == "mismatch")
      s.mismatch = number_of(key, value, spec);
    else if (key == "probe_gflops")
      s.probe_gflops = number_of(key, value, spec);
    else
      TS_THROW("TESSEL_CONTENTION: unknown or empty '", item, "' in '", spec,
               "' (keys: loadavg, load_margin, spread, mismatch, probe_gflops)");
  }
  return s;
}

std::optional<double> read_load_average(const std::string& path) {
  std::ifstream in(path);
  double load = 0;
  if (!(in >> load)) return std::nullopt;
  return load;
}

std::string busy_by_load(double load, double own_load, int threads, int cores, double load_margin) {
  const double others = std::max(0.0, load - own_load);
  const double allowed = std::max(0, cores - threads) + load_margin;
  if (others <= allowed) return "";
  char text[256];
  std::snprintf(text, sizeof(text),
                "load %.2f on %d cores (%.2f not calibrate's own, where calibrating on %d "
                "thread%s leaves room for %.2f)",
                load, cores, others, threads, threads == 1 ? "" : "s", allowed);
  return text;
}

double spread_of(const std::vector<double>& repeats) {
  if (repeats.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(repeats.begin(), repeats.end());
  return *lo > 0 ? *hi / *lo - 1 : 0;
}

std::string probe_mismatch(double probe_gflops, double profile_gflops, double mismatch,
                           const std::string& profile_path) {
  if (profile_gflops <= 0 || std::abs(probe_gflops / profile_gflops - 1) <= mismatch) return "";
  char text[512];
  std::snprintf(text, sizeof(text),
                "WARNING: the profile %s does not match this machine now: a quick probe of "
                "the single-core FMA peak measured %.1f GFLOP/s where the profile has %.1f "
                "(%+.0f%%, more than the %.0f%% allowed). The machine is busy now, or was "
                "busy when it was calibrated; predictions may be far off. Recalibrate on a "
                "quiet machine with `tessel calibrate`",
                profile_path.c_str(), probe_gflops, profile_gflops,
                100 * (probe_gflops / profile_gflops - 1), 100 * mismatch);
  return text;
}

double quick_probe_gflops(const ContentionSettings& settings) {
  if (settings.probe_gflops) return *settings.probe_gflops;
  return measure_fma_peak_gflops(1, 0.05);
}

}  // namespace tessel::plan
