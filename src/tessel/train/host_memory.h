// Whether a run's predicted memory fits the host it starts on, checked
// before any arena, weight or batch is allocated: Linux hands out memory it
// does not have (overcommit), so a run too large for its host would
// otherwise be killed mid-step by the kernel's out-of-memory killer, with
// no message naming the cause.
//
// What counts: on the CPU every byte the rank's memory plan holds
// (RankMemory::total: device memory is host memory there); on a GPU its
// host buffers (RankMemory::host: pinned offload, staging), the device's
// own memory being the backend's to refuse. The host's memory is its
// physical memory, or its cgroup's limit where lower (a container). Ranks
// share a host when their host names are equal; what they hold together is
// exact (every rank's own figure, gathered), so every rank of a host that
// cannot hold them refuses alike.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/comm/communicator.h"
#include "tessel/compile/memory_report.h"

namespace tessel {

// Bytes of memory this process's host has for it: physical memory, or the
// cgroup (v2 memory.max, v1 memory.limit_in_bytes) limit where lower; -1
// where neither can be read.
int64_t host_memory_bytes();

// A cgroup limit file's value in bytes; -1 for "max", an unset v1 limit
// (a number of 2^60 or more), a file that is missing or unreadable.
int64_t cgroup_limit_bytes(const std::string& path);

// What a rank holds in its host's memory: every byte on the CPU, the host
// buffers on a GPU.
int64_t host_bytes_of(const RankMemory& m, const std::string& device);

// The ranks on this rank's host and what they hold together.
struct HostShare {
  int ranks = 1;      // this one included
  int64_t bytes = 0;  // their host_bytes_of, summed
};

// Gathers every rank's `bytes` and host name over `world` and sums those of
// this rank's host. Collective: every rank of `world` calls it.
HostShare share_of_this_host(Communicator& world, int64_t bytes);

// Throws, naming the figures, when this rank alone or the ranks sharing its
// host (`share`, this rank included) need more than `host_bytes`; nothing
// when host_bytes is unknown (<= 0).
void check_host_memory(const RankMemory& m, const std::string& device, const HostShare& share,
                       int64_t host_bytes);

}  // namespace tessel
