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
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessel::plan {

enum class Precision { kF32, kBF16 };
enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
// Which link a group of ranks communicates over: all on one node, or not.
enum class Link { kIntraNode, kInterNode };

const char* precision_name(Precision p);        // "f32", "bf16"
const char* collective_name(CollectiveKind k);  // "all_reduce", ...

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
  // and writes `bytes` and does `flops`. By default the larger of its memory
  // time and its FLOPs at peak; a profile that measured the kind charges its
  // measured rate (kernel_rates.h).
  virtual double kernel_seconds(const std::string& op, double bytes, double flops, Precision p,
                                int threads) const;
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
  // Peak FLOP/s of one rank at `threads` threads, for "fraction of peak".
  virtual double peak_flops(Precision p, int threads) const = 0;
};

}  // namespace tessel::plan
