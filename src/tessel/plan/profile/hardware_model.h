// What the planner's cost model knows about the hardware a plan runs on.
//
// The time of a GEMM of a given shape, of a memory-bound kernel moving a
// given number of bytes, of each collective over a group of ranks on a link,
// and of a point-to-point transfer. Two sources implement it: a machine
// profile measured on this machine by `tessel calibrate`
// (machine_profile.h), and a cluster file describing hardware this machine
// is not (cluster_spec.h). All times are seconds for one rank; all byte
// counts follow the Communicator's payload conventions (comm/communicator.h):
// all-reduce and reduce-scatter take the full buffer, all-gather one shard,
// all-to-all the full buffer, send one message.
//
// Besides the times, five properties say how the hardware runs a program
// (each with a default that is right for a GPU cluster): how non-blocking
// communication progresses while a rank computes (progress()), how many
// ranks share one core (compute_share()), how much slower a rank computes
// while the other ranks of its node are busy (co_run()), whether an einsum
// is costed by the kernels this build compiled or as a device GEMM
// (einsum_costing()), and how much longer an einsum takes inside a program
// than its GEMM rate says (einsum_in_situ_factor()).
#pragma once

#include <cstdint>
#include <string>

namespace tessel::plan {

enum class Precision { kF32, kBF16 };
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
// Which link a group of ranks communicates over: all on one node, or not.
enum class Link { kIntraNode, kInterNode };

const char* precision_name(Precision p);        // "f32", "bf16"
const char* collective_name(CollectiveKind k);  // "all_reduce", ...

// How a rank's non-blocking communication (the gradient buckets'
// all-reduces, pipeline sends) advances while the rank computes.
//   background: on its own (a GPU with NCCL, a NIC with offload): it takes
//     its time on its link, behind compute, and costs the rank nothing;
//   polled: only inside MPI calls the rank makes (Open MPI over shared
//     memory without a progress thread: the runtime tests pending requests
//     between instructions). Each poll advances it by at most poll_bytes;
//     the copies and reductions run on the rank's own core, so the share
//     (1 - overlap) of its time is charged to the rank as it progresses;
//     what is not done when the rank waits for it takes the rest of its time
//     then. A send is advanced only by its sender's polls (without a
//     single-copy mechanism the sender copies every fragment).
// All fractions are in [0, 1]; poll_bytes > 0.
struct CommProgress {
  enum class Mode { kBackground, kPolled };
  Mode mode = Mode::kBackground;
  // Polled only:
  double all_reduce_overlap = 1;        // share of a non-blocking all-reduce hidden behind compute
  double all_reduce_poll_bytes = 1e18;  // payload bytes one poll of every rank advances
  double nonblocking_factor = 1;        // a non-blocking all-reduce alone over the blocking one
  double send_overlap = 1;              // share of a send hidden behind the sender's compute
  double send_poll_bytes = 1e18;        // bytes one poll of the sender advances
};
const char* progress_mode_name(CommProgress::Mode m);  // "background", "polled"

// How much slower a rank's kernels run while the other ranks of its node are
// busy, over their time with the node to itself (what the profile's GEMM
// grid and kernel rates measured): cores that share a cache and memory
// bandwidth slow each other down. `computing`: the others run kernels too;
// `polling`: they wait in a blocking MPI call, spinning on their cores
// (Open MPI over shared memory with yield_when_idle). Both positive; 1 = no
// effect (the default: a GPU has its device to itself). Measured on `ranks`
// ranks (calibrate_corun.h); the cost model applies them to any number.
struct CoRun {
  int ranks = 2;
  double computing = 1;
  double polling = 1;
};

// How the cost model times an einsum (cost_model.h):
//   kCompiled: the GEMM plus the scratch copies of the kernels this build
//     compiled for it (this machine runs exactly those);
//   kStridedDevice: a device GEMM library's strided batched GEMM
//     (cuBLAS-style): an operand, or the result, is read or written in place
//     when its batch, row and column dims each merge into one strided index
//     and its rows or its columns are contiguous; any other is permuted into
//     a dense copy first (device_einsum.h). Independent of this CPU.
enum class EinsumCosting { kCompiled, kStridedDevice };

class HardwareModel {
 public:
  virtual ~HardwareModel() = default;
  // "this machine (AMD EPYC ..., profile FILE)" or the cluster's name.
  virtual std::string name() const = 0;
  // A (batch x) m x k by k x n product, f32 accumulation, on one rank using
  // `threads` threads (threads is ignored by devices that are not CPUs).
  virtual double gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Precision p,
                              int threads) const = 0;
  // A memory-bound kernel (elementwise, row reductions, copies) that reads
  // and writes `bytes` in total.
  virtual double memory_seconds(double bytes, int threads) const = 0;
  // A non-GEMM kernel of op kind `op` (op_name(): "softmax", ...) that reads
  // and writes `bytes` and does `flops` (kernel_work.h: a causal fused
  // attention's half of its node FLOPs). By default the larger of its memory
  // time and its FLOPs at peak; a profile that measured the kind charges its
  // measured byte rate, and the fused attention the longer of that and its
  // FLOPs at its measured FLOP rate (kernel_rates.h); a cluster file charges
  // the fused attention its FLOPs at the device's attention efficiency.
  virtual double kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                                int threads) const;
  // Offload (config key `offload`): copying `bytes` between the device and
  // pinned host memory, one direction; and a memory-bound pass over `bytes`
  // of host memory (the offloaded optimizer's update). By default both are
  // this machine's memory passes (a copy reads and writes each byte, on one
  // thread, as the CPU backend's memcpy runs): on a CPU, device and host
  // memory are the same memory.
  virtual double host_copy_seconds(double bytes, int threads) const;
  virtual double host_memory_seconds(double bytes, int threads) const;
  // One collective over `ranks` ranks (ranks >= 2) on `link`.
  virtual double collective_seconds(CollectiveKind kind, double bytes, int ranks,
                                    Link link) const = 0;
  // One point-to-point message of `bytes` on `link` (latency + bytes / bandwidth).
  virtual double p2p_seconds(double bytes, Link link) const = 0;
  // Ranks that share one node: consecutive ranks (row-major mesh order) fill a node first.
  virtual int devices_per_node() const = 0;
  virtual int total_devices() const = 0;  // every device the model describes
  // Memory of one device in bytes; 0 when unknown (this machine: no limit but --memory-limit).
  virtual int64_t device_memory_bytes() const = 0;
  // Host memory of one node in bytes, which the host buffers of its ranks
  // share; 0 when unknown or where they are on the device
  // (host_buffers_on_device: counted in device_memory_bytes' check).
  virtual int64_t host_memory_bytes() const { return 0; }
  // Whether a rank's host buffers (RankMemory::host: input staging, the
  // checkpoint gather buffer) take device memory: on this machine's CPUs
  // they do; on a GPU cluster they are host memory and plans leave them out.
  virtual bool host_buffers_on_device() const { return true; }
  // Peak FLOP/s of one rank at `threads` threads, for "fraction of peak".
  virtual double peak_flops(Precision p, int threads) const = 0;
  // How non-blocking communication progresses (default: background).
  virtual CommProgress progress() const { return {}; }
  // How many ranks' work one core carries when `ranks` ranks of `threads`
  // threads each run on this hardware: 1 unless they outnumber its cores
  // (oversubscribed runs on a CPU), then ranks x threads / cores. Default 1.
  virtual double compute_share(int ranks, int threads) const;
  // How a rank slows while the others of its node are busy (default: not).
  virtual CoRun co_run() const { return {}; }
  // Default: kStridedDevice (hardware this build does not run on).
  virtual EinsumCosting einsum_costing() const { return EinsumCosting::kStridedDevice; }
  // Whether its ranks compute on CPU threads (this machine's profile), so a
  // plan names the thread count it was costed at; a device has none.
  bool runs_on_cpu_threads() const { return einsum_costing() == EinsumCosting::kCompiled; }
  // The factor on an einsum of `flops` FLOPs (its GEMM and copies) in
  // precision `p` at `threads` threads for running inside a training
  // program rather than alone (einsum_in_situ.h). Default 1: a cluster's
  // GEMM efficiency is already what its programs achieve.
  virtual double einsum_in_situ_factor(double flops, Precision p, int threads) const { return 1; }
  // The least time one kernel instruction takes: a GPU's launch (the host
  // enqueues kernels no faster than this, so a shorter kernel leaves the
  // device waiting). Default 0: a profile's rates were measured with the
  // CPU's dispatch in them.
  virtual double launch_seconds() const { return 0; }
  // `draws` Philox random numbers (dropout masks: kernel_work.h) at
  // `threads` threads, on top of the kernel's own time. Default 0: a
  // cluster file does not price them.
  virtual double draw_seconds(double draws, int threads) const { return 0; }
};

}  // namespace tessel::plan
