// Whether a run's predicted memory fits the host it starts on, checked
// after this rank's compile and before any arena, weight or batch is
// allocated: Linux hands out memory it does not have (overcommit), so a run
// too large for its host would otherwise be killed mid-step by the kernel's
// out-of-memory killer, with no message naming the cause.
//
// What counts: on the CPU every byte the rank's memory plan holds
// (RankMemory::total: device memory is host memory there); on a GPU its
// host buffers (RankMemory::host: pinned offload, staging), the device's
// own memory being the backend's to refuse. The host's memory is its
// physical memory, or its cgroup's limit where lower (a container).
#pragma once

#include <cstdint>
#include <string>

#include "tessel/compile/memory_report.h"

namespace tessel {

// Bytes of memory this process's host has for it: physical memory, or the
// cgroup (v2 memory.max, v1 memory.limit_in_bytes) limit where lower; -1
// where neither can be read.
int64_t host_memory_bytes();

// What a rank holds in its host's memory: every byte on the CPU, the host
// buffers on a GPU.
int64_t host_bytes_of(const RankMemory& m, const std::string& device);

// What check_host_memory found: "" when the rank fits with every rank on
// the host as large as it, else a warning that they may not (ranks differ:
// pipeline stages); throws when this rank alone exceeds `host_bytes`.
// `local_ranks`: the ranks sharing the host (threads.h, local_rank_count).
std::string check_host_memory(const RankMemory& m, const std::string& device, int local_ranks,
                              int64_t host_bytes);

}  // namespace tessel
