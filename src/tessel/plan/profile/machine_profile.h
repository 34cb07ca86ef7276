// The hardware model of this machine, as measured by `tessel calibrate`.
//
// A profile holds the CPU model, the FMA peak per thread count, GEMM
// throughput on a grid of shapes per thread count (gemm_grid.h; f32 only
// until the build has bf16 kernels: "gemm.bf16" is the slot, empty today, and
// a bf16 query on an empty slot is an error), the bandwidth of streaming
// (elementwise) and row (LayerNorm) kernels per thread count, and alpha-beta
// fits of each collective per rank count and of send/recv, measured under
// mpirun. All ranks of this host share one node: devices_per_node() ==
// total_devices() == the core count, and the inter-node link is the
// intra-node one unless the profile has inter-node fits. Non-blocking
// communication progresses only when a rank polls (CommProgress, polled),
// with the overlap calibrate measured ("progress"; a profile without it:
// nothing hidden). More ranks than cores share them (compute_share), and an
// einsum costs what this build's kernels do (EinsumCosting::kCompiled).
// A rank computes slower beside busy ranks by the measured co-run factors
// ("co_run", calibrate_corun.h; a profile without it: factor 1, and
// has_co_run() says so). An einsum inside a program takes the measured
// in-situ factor for its size ("einsum_in_situ", einsum_in_situ.h; a
// profile without it: factor 1). The fused attention kernels are charged
// the longer of their byte rule and their FLOPs at the measured attention
// rate ("attention_rates", kernel_rates.h; a profile without them: the byte
// rule alone, has_attention_rates() says so).
//
// The JSON form is versioned (kProfileVersion) and read strictly: an unknown
// or missing key, a wrong type or a negative number is an error naming the
// file and the key. Immutable after construction; safe to share.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tessel/plan/model/alpha_beta.h"
#include "tessel/plan/model/einsum_in_situ.h"
#include "tessel/plan/profile/gemm_grid.h"
#include "tessel/plan/profile/hardware_model.h"
#include "tessel/plan/profile/kernel_rates.h"

namespace tessel::plan {

inline constexpr int kProfileVersion = 1;

struct ThreadRate {
  int threads = 1;
  double gflops = 0;
};

// Bandwidth of the memory-bound kernels, reads plus writes.
struct MemoryRate {
  int threads = 1;
  double elementwise_gbs = 0;  // a + b -> c on contiguous arrays
  double row_gbs = 0;          // LayerNorm forward over rows
  double philox_gdraws = 0;    // dropout's Philox draws per second, 1e9 (0: not measured)
};

// One alpha-beta fit: a collective kind ("all_reduce", "all_gather",
// "reduce_scatter", "all_to_all") or "send_recv", over `ranks` ranks.
struct LinkFit {
  std::string kind;
  int ranks = 2;
  Link link = Link::kIntraNode;
  AlphaBeta fit;
  std::vector<std::pair<double, double>> samples;  // (payload bytes, median seconds)
};

// One "links" entry of the profile's JSON form, and back (strict: errors name
// `file` and `path`, e.g. "links[2]").
nlohmann::json link_fit_to_json(const LinkFit& l);
LinkFit link_fit_from_json(const nlohmann::json& j, const std::string& file,
                           const std::string& path);

struct MachineProfileData {
  std::string cpu_model;
  int nproc = 1;
  std::vector<ThreadRate> fma_peak_gflops;
  std::vector<GemmPoint> gemm_f32, gemm_bf16;
  // Optional (empty where the CPU has no native bf16, and in older
  // profiles): the bf16 peak (runtime/machine_peak.h). gemm_bf16 and
  // einsum_in_situ_bf16 are empty exactly when it is: calibrate measures
  // the three together (calibrate_compute.h).
  std::vector<ThreadRate> bf16_peak_gflops;
  std::vector<MemoryRate> memory;
  std::vector<LinkFit> links;
  // Optional (older profiles lack it): measured non-GEMM kernel rates.
  std::vector<KernelRate> kernels;
  // Optional (older profiles lack it): how non-blocking communication
  // progressed under the runtime's polling (calibrate_progress.h). Without
  // it: polled, nothing hidden (unmeasured_progress()).
  bool has_progress = false;
  CommProgress progress;
  // Optional (older profiles lack it): how much slower a rank's
  // training program ran while the other rank computed or polled
  // (calibrate_corun.h). Without it: factor 1 (HardwareModel's default).
  bool has_co_run = false;
  CoRun co_run;
  // Optional (older profiles lack it): the in-situ factor's
  // points (einsum_in_situ.h). Without it: factor 1. The bf16 points come
  // from the same programs run in bf16.
  std::vector<InSituPoint> einsum_in_situ, einsum_in_situ_bf16;
  // Optional (older profiles lack it): the fused attention kernels' FLOP
  // rates (kernel_rates.h), f32 and, where gemm_bf16 has entries, bf16.
  std::vector<AttentionRate> attention_rates;
};

// What a profile without a "progress" entry assumes: polled, every
// all-reduce and send charged to the rank in full, on the first poll.
CommProgress unmeasured_progress();
// The profile's "progress" object, and back (strict: errors name `file`).
nlohmann::json progress_to_json(const CommProgress& p);
CommProgress progress_from_json(const nlohmann::json& j, const std::string& file,
                                const std::string& path);

// The profile's "co_run" object, and back (strict: errors name `file` and
// the key, e.g. "co_run.computing").
nlohmann::json co_run_to_json(const CoRun& c);
CoRun co_run_from_json(const nlohmann::json& j, const std::string& file, const std::string& path);

class MachineProfile : public HardwareModel {
 public:
  // Validates (throws naming `source` and the key); `source` is the file.
  MachineProfile(MachineProfileData data, std::string source);

  static MachineProfile load(const std::string& path);
  static MachineProfile from_json(const nlohmann::json& j, const std::string& source);
  nlohmann::json to_json() const;
  // Writes a temporary file beside `path` and renames it into place.
  void save(const std::string& path) const;

  const MachineProfileData& data() const { return data_; }
  const std::string& source() const { return source_; }
  // Interpolated over the measured thread counts, clamped beyond them.
  double elementwise_gbs(int threads) const;
  double row_gbs(int threads) const;

  std::string name() const override;
  double gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                      int threads) const override;
  // bytes / harmonic mean of the elementwise and row bandwidths (a kernel mix
  // half streaming, half row kernels).
  double memory_seconds(double bytes, int threads) const override;
  // At the calibrated draw rate; 0 for a profile from before it was measured.
  double draw_seconds(double draws, int threads) const override;
  // The measured byte rate of `op` (interpolated over thread counts), else
  // the default roofline; for a kind with a measured FLOP rate in precision
  // `p` (the fused attention), the longer of that and flops at the rate.
  double kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                        int threads) const override;
  // At a measured rank count: the measured samples, interpolated piecewise
  // (alpha_beta.h's piecewise_seconds: exact at every measured size). At
  // another: the alpha-beta fit at the nearest measured rank count p0,
  // alpha scaled by the ring's steps and beta by its bandwidth factor.
  double collective_seconds(CollectiveKind kind, double bytes, int ranks, Link link) const override;
  // The send/recv samples, interpolated piecewise.
  double p2p_seconds(double bytes, Link link) const override;
  int devices_per_node() const override { return data_.nproc; }
  int total_devices() const override { return data_.nproc; }
  int64_t device_memory_bytes() const override { return 0; }
  double peak_flops(Precision p, int threads) const override;
  CommProgress progress() const override {
    return data_.has_progress ? data_.progress : unmeasured_progress();
  }
  CoRun co_run() const override { return data_.has_co_run ? data_.co_run : CoRun{}; }
  bool has_co_run() const { return data_.has_co_run; }
  // Whether the profile measured the fused attention's FLOP rate in `p`.
  bool has_attention_rates(Precision p) const;
  // max(1, ranks x threads / nproc).
  double compute_share(int ranks, int threads) const override;
  EinsumCosting einsum_costing() const override { return EinsumCosting::kCompiled; }
  double einsum_in_situ_factor(double flops, Precision p, int threads) const override {
    return (p == Precision::kBF16 ? in_situ_bf16_ : in_situ_).factor(flops, threads);
  }

 private:
  const LinkFit& nearest_fit(const std::string& kind, int ranks, Link link) const;

  MachineProfileData data_;
  std::string source_;
  GemmGrid f32_, bf16_;
  InSituCurve in_situ_, in_situ_bf16_;
};

}  // namespace tessel::plan
