#include "tessel/plan/profile/machine_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "tessel/base/error.h"
#include "tessel/ir/op_table.h"
#include "tessel/plan/profile/by_threads.h"
#include "tessel/plan/profile/json_fields.h"

namespace tessel::plan {
namespace {

const char* const kFitKinds[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all",
                                 "send_recv"};

const char* link_name(Link link) { return link == Link::kIntraNode ? "intra_node" : "inter_node"; }

std::string item_path(const std::string& key, size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

std::vector<GemmPoint> read_gemm(const JsonFields& gemm, const char* key) {
  return gemm.objects(key, [](const JsonFields& f) {
    f.allow_only({"threads", "batch", "m", "n", "k", "gflops"});
    return GemmPoint{static_cast<int>(f.integer("threads", 1)),
                     f.integer("batch", 1),
                     f.integer("m", 1),
                     f.integer("n", 1),
                     f.integer("k", 1),
                     f.number("gflops", true)};
  });
}

std::vector<AttentionRate> read_attention_rates(const JsonFields& top) {
  return top.objects("attention_rates", [](const JsonFields& f) {
    f.allow_only({"op", "precision", "threads", "gflops", "work_in_forwards"});
    AttentionRate r;
    r.op = f.string("op");
    if (r.op != "attention" && r.op != "attention_grad")
      f.fail("op", "is '" + r.op + "'; expected attention or attention_grad");
    const std::string precision = f.string("precision");
    if (precision != "f32" && precision != "bf16")
      f.fail("precision", "is '" + precision + "'; expected f32 or bf16");
    r.precision = precision == "bf16" ? Precision::kBF16 : Precision::kF32;
    r.threads = static_cast<int>(f.integer("threads", 1));
    r.gflops = f.number("gflops", true);
    // Restated at today's work count (3.5 forwards before the field
    // existed): the same measured time.
    if (r.op == "attention_grad")
      r.gflops *= kAttentionGradForwards /
                  (f.has("work_in_forwards") ? f.number("work_in_forwards", true) : 3.5);
    return r;
  });
}

// One item of a profile's list, as JSON (json_list).
nlohmann::json item_json(const GemmPoint& p) {
  return {{"threads", p.threads}, {"batch", p.batch}, {"m", p.m}, {"n", p.n}, {"k", p.k},
          {"gflops", p.gflops}};
}

nlohmann::json item_json(const ThreadRate& r) {
  return {{"threads", r.threads}, {"gflops", r.gflops}};
}

nlohmann::json item_json(const MemoryRate& r) {
  nlohmann::json j = {
      {"threads", r.threads}, {"elementwise_gbs", r.elementwise_gbs}, {"row_gbs", r.row_gbs}};
  if (r.philox_gdraws > 0) j["philox_gdraws"] = r.philox_gdraws;
  return j;
}

nlohmann::json item_json(const KernelRate& k) {
  return {{"op", k.op}, {"threads", k.threads}, {"gbs", k.gbs}};
}

nlohmann::json item_json(const InSituPoint& p) {
  return {{"threads", p.threads}, {"log2_flops", p.log2_flops}, {"factor", p.factor}};
}

nlohmann::json item_json(const AttentionRate& r) {
  nlohmann::json j = {{"op", r.op},
                      {"precision", precision_name(r.precision)},
                      {"threads", r.threads},
                      {"gflops", r.gflops}};
  if (r.op == "attention_grad") j["work_in_forwards"] = kAttentionGradForwards;
  return j;
}

nlohmann::json item_json(const LinkFit& l) { return link_fit_to_json(l); }

template <class T>
nlohmann::json json_list(const std::vector<T>& items) {
  nlohmann::json list = nlohmann::json::array();
  for (const T& item : items) list.push_back(item_json(item));
  return list;
}

}  // namespace

CommProgress unmeasured_progress() {
  return {.mode = CommProgress::Mode::kPolled, .all_reduce_overlap = 0, .send_overlap = 0};
}

nlohmann::json progress_to_json(const CommProgress& p) {
  return {{"mode", progress_mode_name(p.mode)},
          {"all_reduce_overlap", p.all_reduce_overlap},
          {"all_reduce_poll_bytes", p.all_reduce_poll_bytes},
          {"nonblocking_factor", p.nonblocking_factor},
          {"send_overlap", p.send_overlap},
          {"send_poll_bytes", p.send_poll_bytes}};
}

CommProgress progress_from_json(const nlohmann::json& j, const std::string& file,
                                const std::string& path) {
  JsonFields f(j, file, path);
  f.allow_only({"mode", "all_reduce_overlap", "all_reduce_poll_bytes", "nonblocking_factor",
                "send_overlap", "send_poll_bytes"});
  CommProgress p;
  const std::string mode = f.string("mode");
  if (mode != "background" && mode != "polled")
    f.fail("mode", "is '" + mode + "'; expected background or polled");
  p.mode = mode == "polled" ? CommProgress::Mode::kPolled : CommProgress::Mode::kBackground;
  auto fraction = [&](const char* key) {
    const double v = f.number(key, false);
    if (v > 1) f.fail(key, "must be a fraction in [0, 1], got " + std::to_string(v));
    return v;
  };
  p.all_reduce_overlap = fraction("all_reduce_overlap");
  p.all_reduce_poll_bytes = f.number("all_reduce_poll_bytes", true);
  p.nonblocking_factor = f.number("nonblocking_factor", true);
  p.send_overlap = fraction("send_overlap");
  p.send_poll_bytes = f.number("send_poll_bytes", true);
  return p;
}

nlohmann::json co_run_to_json(const CoRun& c) {
  return {{"ranks", c.ranks}, {"computing", c.computing}, {"polling", c.polling}};
}

CoRun co_run_from_json(const nlohmann::json& j, const std::string& file, const std::string& path) {
  JsonFields f(j, file, path);
  f.allow_only({"ranks", "computing", "polling"});
  return {static_cast<int>(f.integer("ranks", 2)), f.number("computing", true),
          f.number("polling", true)};
}

nlohmann::json link_fit_to_json(const LinkFit& l) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& [bytes, seconds] : l.samples) samples.push_back({bytes, seconds});
  return {{"kind", l.kind},
          {"ranks", l.ranks},
          {"link", link_name(l.link)},
          {"alpha_s", l.fit.alpha_s},
          {"beta_s_per_byte", l.fit.beta_s_per_byte},
          {"samples", samples}};
}

LinkFit link_fit_from_json(const nlohmann::json& j, const std::string& file,
                           const std::string& path) {
  JsonFields f(j, file, path);
  f.allow_only({"kind", "ranks", "link", "alpha_s", "beta_s_per_byte", "samples"});
  LinkFit l;
  l.kind = f.string("kind");
  if (std::find(std::begin(kFitKinds), std::end(kFitKinds), l.kind) == std::end(kFitKinds))
    f.fail("kind", "is '" + l.kind +
                       "'; expected all_reduce, all_gather, reduce_scatter, all_to_all or "
                       "send_recv");
  l.ranks = static_cast<int>(f.integer("ranks", 2));
  const std::string link = f.string("link");
  if (link != "intra_node" && link != "inter_node")
    f.fail("link", "is '" + link + "'; expected intra_node or inter_node");
  l.link = link == "intra_node" ? Link::kIntraNode : Link::kInterNode;
  l.fit = {f.number("alpha_s", false), f.number("beta_s_per_byte", false)};
  const nlohmann::json& samples = f.array("samples");
  for (size_t s = 0; s < samples.size(); ++s) {
    const nlohmann::json& pair = samples[s];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number() || !pair[1].is_number() ||
        pair[0].get<double>() < 0 || pair[1].get<double>() < 0)
      f.fail(item_path("samples", s),
             "must be [bytes, seconds] with both non-negative, got " + pair.dump());
    if (!l.samples.empty() && !(pair[0].get<double>() > l.samples.back().first))
      f.fail(item_path("samples", s), "must have more bytes than the sample before it");
    if (!(pair[1].get<double>() > 0)) f.fail(item_path("samples", s), "must take a positive time");
    l.samples.emplace_back(pair[0].get<double>(), pair[1].get<double>());
  }
  return l;
}

MachineProfile::MachineProfile(MachineProfileData data, std::string source)
    : data_(std::move(data)), source_(std::move(source)) {
  const std::string& f = source_;
  if (data_.nproc < 1) TS_THROW(f, ": key 'nproc' must be at least 1");
  if (data_.fma_peak_gflops.empty()) TS_THROW(f, ": key 'fma_peak_gflops' has no entries");
  if (data_.memory.empty()) TS_THROW(f, ": key 'memory' has no entries");
  if (data_.gemm_f32.empty()) TS_THROW(f, ": key 'gemm.f32' has no entries");
  f32_ = GemmGrid(data_.gemm_f32, f + ": key 'gemm.f32'");
  if (!data_.gemm_bf16.empty()) bf16_ = GemmGrid(data_.gemm_bf16, f + ": key 'gemm.bf16'");
  in_situ_ = InSituCurve(data_.einsum_in_situ, f + ": key 'einsum_in_situ'");
  in_situ_bf16_ = InSituCurve(data_.einsum_in_situ_bf16, f + ": key 'einsum_in_situ_bf16'");
  if (data_.bf16_peak_gflops.empty() != data_.gemm_bf16.empty())
    TS_THROW(f, ": keys 'bf16_peak_gflops' and 'gemm.bf16' must both have entries or neither");
  for (const char* kind : kFitKinds)
    if (std::none_of(data_.links.begin(), data_.links.end(), [&](const LinkFit& l) {
          return l.kind == kind && l.link == Link::kIntraNode;
        }))
      TS_THROW(f, ": key 'links' has no intra_node fit for '", kind, "'");
  for (const LinkFit& l : data_.links) {
    if (std::find(std::begin(kFitKinds), std::end(kFitKinds), l.kind) == std::end(kFitKinds))
      TS_THROW(f, ": key 'links': unknown kind '", l.kind, "'");
    if (l.ranks < 2) TS_THROW(f, ": key 'links': '", l.kind, "' over ", l.ranks, " ranks");
  }
}

MachineProfile MachineProfile::load(const std::string& path) {
  return from_json(read_json_file(path, "machine profile"), path);
}

MachineProfile MachineProfile::from_json(const nlohmann::json& j, const std::string& source) {
  JsonFields top(j, source, "");
  top.allow_only({"version", "cpu_model", "nproc", "fma_peak_gflops", "bf16_peak_gflops", "gemm",
                  "memory", "links", "kernels", "progress", "co_run", "einsum_in_situ",
                  "einsum_in_situ_bf16", "attention_rates"});
  const int64_t version = top.integer("version", 0);
  if (version != kProfileVersion)
    top.fail("version", "is " + std::to_string(version) + "; this build reads version " +
                            std::to_string(kProfileVersion) + " (run `tessel calibrate` again)");
  MachineProfileData d;
  d.cpu_model = top.string("cpu_model");
  d.nproc = static_cast<int>(top.integer("nproc", 1));

  auto read_peaks = [&](const char* key) {
    return top.objects(key, [](const JsonFields& f) {
      f.allow_only({"threads", "gflops"});
      return ThreadRate{static_cast<int>(f.integer("threads", 1)), f.number("gflops", true)};
    });
  };
  d.fma_peak_gflops = read_peaks("fma_peak_gflops");
  if (top.has("bf16_peak_gflops")) d.bf16_peak_gflops = read_peaks("bf16_peak_gflops");

  JsonFields gemm(top.required("gemm"), source, "gemm");
  gemm.allow_only({"f32", "bf16"});
  d.gemm_f32 = read_gemm(gemm, "f32");
  d.gemm_bf16 = read_gemm(gemm, "bf16");

  d.memory = top.objects("memory", [](const JsonFields& f) {
    f.allow_only({"threads", "elementwise_gbs", "row_gbs", "philox_gdraws"});
    return MemoryRate{static_cast<int>(f.integer("threads", 1)), f.number("elementwise_gbs", true),
                      f.number("row_gbs", true),
                      f.has("philox_gdraws") ? f.number("philox_gdraws", true) : 0};
  });

  if (top.has("kernels")) {
    d.kernels = top.objects("kernels", [](const JsonFields& f) {
      f.allow_only({"op", "threads", "gbs"});
      if (!f.required("op").is_string()) f.fail("op", "must be a string");
      return KernelRate{f.required("op").get<std::string>(),
                        static_cast<int>(f.integer("threads", 1)), f.number("gbs", true)};
    });
  }

  const nlohmann::json& links = top.array("links");
  for (size_t i = 0; i < links.size(); ++i)
    d.links.push_back(link_fit_from_json(links[i], source, item_path("links", i)));
  if (top.has("progress")) {
    d.has_progress = true;
    d.progress = progress_from_json(top.required("progress"), source, "progress");
  }
  if (top.has("co_run")) {
    d.has_co_run = true;
    d.co_run = co_run_from_json(top.required("co_run"), source, "co_run");
  }
  auto read_in_situ = [&](const char* key, std::vector<InSituPoint>& out) {
    if (!top.has(key)) return;
    out = top.objects(key, [](const JsonFields& f) {
      f.allow_only({"threads", "log2_flops", "factor"});
      return InSituPoint{static_cast<int>(f.integer("threads", 1)), f.number("log2_flops", false),
                         f.number("factor", true)};
    });
  };
  read_in_situ("einsum_in_situ", d.einsum_in_situ);
  read_in_situ("einsum_in_situ_bf16", d.einsum_in_situ_bf16);
  if (top.has("attention_rates")) d.attention_rates = read_attention_rates(top);
  return MachineProfile(std::move(d), source);
}

nlohmann::json MachineProfile::to_json() const {
  nlohmann::json j = {
      {"version", kProfileVersion},
      {"cpu_model", data_.cpu_model},
      {"nproc", data_.nproc},
      {"fma_peak_gflops", json_list(data_.fma_peak_gflops)},
      {"gemm", {{"f32", json_list(data_.gemm_f32)}, {"bf16", json_list(data_.gemm_bf16)}}},
      {"memory", json_list(data_.memory)},
      {"links", json_list(data_.links)},
      {"kernels", json_list(data_.kernels)}};
  if (data_.has_progress) j["progress"] = progress_to_json(data_.progress);
  if (data_.has_co_run) j["co_run"] = co_run_to_json(data_.co_run);
  if (!data_.bf16_peak_gflops.empty()) j["bf16_peak_gflops"] = json_list(data_.bf16_peak_gflops);
  if (!data_.einsum_in_situ.empty()) j["einsum_in_situ"] = json_list(data_.einsum_in_situ);
  if (!data_.einsum_in_situ_bf16.empty())
    j["einsum_in_situ_bf16"] = json_list(data_.einsum_in_situ_bf16);
  if (!data_.attention_rates.empty()) j["attention_rates"] = json_list(data_.attention_rates);
  return j;
}

void MachineProfile::save(const std::string& path) const {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp);
    if (!out) TS_THROW("cannot write machine profile '", temp, "'");
    out << to_json().dump(2) << "\n";
    if (!out) TS_THROW("cannot write machine profile '", temp, "'");
  }
  fs::rename(temp, target);
}

double MachineProfile::elementwise_gbs(int threads) const {
  return by_threads(data_.memory, threads, [](const MemoryRate& r) { return r.elementwise_gbs; });
}

double MachineProfile::draw_seconds(double draws, int threads) const {
  const double gdraws =
      by_threads(data_.memory, threads, [](const MemoryRate& r) { return r.philox_gdraws; });
  return draws > 0 && gdraws > 0 ? draws / (gdraws * 1e9) : 0;
}

double MachineProfile::row_gbs(int threads) const {
  return by_threads(data_.memory, threads, [](const MemoryRate& r) { return r.row_gbs; });
}

double MachineProfile::kernel_seconds(const std::string& op, double bytes, double flops,
                                      Precision p, int threads) const {
  std::vector<KernelRate> measured;
  for (const KernelRate& k : data_.kernels)
    if (k.op == op) measured.push_back(k);
  const double by_bytes =
      measured.empty() || bytes <= 0
          ? HardwareModel::kernel_seconds(op, bytes, flops, p, threads)
          : bytes /
                (by_threads(measured, threads, [](const KernelRate& k) { return k.gbs; }) * 1e9);
  std::vector<AttentionRate> rates;
  for (const AttentionRate& r : data_.attention_rates)
    if (r.op == op && r.precision == p) rates.push_back(r);
  if (rates.empty() || flops <= 0) return by_bytes;
  const double gflops = by_threads(rates, threads, [](const AttentionRate& r) { return r.gflops; });
  return std::max(by_bytes, flops / (gflops * 1e9));
}

bool MachineProfile::has_attention_rates(Precision p) const {
  return std::any_of(data_.attention_rates.begin(), data_.attention_rates.end(),
                     [&](const AttentionRate& r) { return r.precision == p; });
}

std::string MachineProfile::name() const {
  return "this machine (" + data_.cpu_model + ", " + std::to_string(data_.nproc) +
         " cores, profile " + source_ + ")";
}

double MachineProfile::gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                                    int threads) const {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return 0;
  if (threads < 1) TS_THROW("gemm_seconds: threads must be at least 1, got ", threads);
  const GemmGrid& grid = p == Precision::kF32 ? f32_ : bf16_;
  if (grid.empty())
    TS_THROW(source_,
             ": no bf16 GEMM figures ('gemm.bf16' is empty): `tessel calibrate` measures bf16 "
             "only where the CPU multiplies bf16 natively (AVX512-BF16 or AMX), and this "
             "profile's CPU (",
             data_.cpu_model, ") did not, or the profile predates it; plan this machine in f32");
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  return flops / (grid.gflops(batch, m, n, k, threads) * 1e9);
}

double MachineProfile::memory_seconds(double bytes, int threads) const {
  if (threads < 1) TS_THROW("memory_seconds: threads must be at least 1, got ", threads);
  return 0.5 * bytes / 1e9 * (1 / elementwise_gbs(threads) + 1 / row_gbs(threads));
}

const LinkFit& MachineProfile::nearest_fit(const std::string& kind, int ranks, Link link) const {
  const LinkFit* best = nullptr;
  for (int pass = 0; pass < 2 && !best; ++pass) {
    // Inter-node falls back to intra-node: one host measures one link.
    const Link want = pass == 0 ? link : Link::kIntraNode;
    for (const LinkFit& l : data_.links) {
      if (l.kind != kind || l.link != want) continue;
      const double d = std::abs(std::log(double(l.ranks) / ranks));
      if (!best || d < std::abs(std::log(double(best->ranks) / ranks)) ||
          (d == std::abs(std::log(double(best->ranks) / ranks)) && l.ranks > best->ranks))
        best = &l;
    }
  }
  TS_CHECK(best, "no fit for ", kind, " (validated at construction)");
  return *best;
}

double MachineProfile::collective_seconds(CollectiveKind kind, double bytes, int ranks,
                                          Link link) const {
  if (ranks < 2) return 0;
  const LinkFit& l = nearest_fit(collective_name(kind), ranks, link);
  if (l.ranks == ranks && !l.samples.empty())
    return piecewise_seconds(l.samples, bytes, l.fit.alpha_s, l.fit.beta_s_per_byte);
  const double alpha = l.fit.alpha_s * ring_steps(kind, ranks) / ring_steps(kind, l.ranks);
  const double beta = l.fit.beta_s_per_byte * ring_bandwidth_factor(kind, ranks) /
                      ring_bandwidth_factor(kind, l.ranks);
  return alpha + beta * bytes;
}

double MachineProfile::p2p_seconds(double bytes, Link link) const {
  const LinkFit& l = nearest_fit("send_recv", 2, link);
  if (l.samples.empty()) return l.fit.seconds(bytes);
  return piecewise_seconds(l.samples, bytes, l.fit.alpha_s, l.fit.beta_s_per_byte);
}

double MachineProfile::compute_share(int ranks, int threads) const {
  return std::max(1.0, static_cast<double>(ranks) * std::max(1, threads) / data_.nproc);
}

double MachineProfile::peak_flops(Precision p, int threads) const {
  if (p == Precision::kBF16 && data_.bf16_peak_gflops.empty())
    TS_THROW(source_,
             ": no bf16 peak: `tessel calibrate` measures bf16 only where the CPU multiplies "
             "bf16 natively (AVX512-BF16 or AMX), and this profile's CPU (",
             data_.cpu_model, ") did not, or the profile predates it; plan this machine in f32");
  const std::vector<ThreadRate>& peaks =
      p == Precision::kBF16 ? data_.bf16_peak_gflops : data_.fma_peak_gflops;
  return by_threads(peaks, threads, [](const ThreadRate& r) { return r.gflops; }) * 1e9;
}

}  // namespace tessel::plan
