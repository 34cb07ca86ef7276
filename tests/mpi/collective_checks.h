// Checks every f32 collective of a Communicator against its documented
// results (tests/mpi: the MPI communicator, the staged one).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/comm/communicator.h"

namespace tessel {

// Expects every collective of `comm` to produce the documented results for
// `n` elements per block. Each rank's inputs are small integers, so float sums
// are exact.
inline void check_collectives(Communicator& comm, int64_t n) {
  const int p = comm.size();
  const int me = comm.rank();
  const std::string ctx = comm.name() + " n=" + std::to_string(n);

  std::vector<float> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = float((me + 1) * (i % 7 + 1));
  comm.all_reduce(data.data(), n, ReduceKind::kSum, "test_sum");
  const float ranks_sum = float(p * (p + 1) / 2);
  for (int64_t i = 0; i < n; ++i) {
    if (data[i] != ranks_sum * float(i % 7 + 1)) {
      ADD_FAILURE() << ctx << " all_reduce sum [" << i << "] = " << data[i];
      break;
    }
  }

  for (int64_t i = 0; i < n; ++i) data[i] = i % 2 == 0 ? float(me) : float(-me - i % 5);
  comm.all_reduce(data.data(), n, ReduceKind::kMax, "test_max");
  for (int64_t i = 0; i < n; ++i) {
    float want = i % 2 == 0 ? float(p - 1) : float(-(i % 5));
    if (data[i] != want) {
      ADD_FAILURE() << ctx << " all_reduce max [" << i << "] = " << data[i] << ", want " << want;
      break;
    }
  }

  std::vector<float> in(n), out(p * n, -1.0f);
  for (int64_t i = 0; i < n; ++i) in[i] = float(me * 1000 + i % 1000);
  comm.all_gather(in.data(), out.data(), n, "test_gather");
  for (int r = 0; r < p; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (out[r * n + i] != float(r * 1000 + i % 1000)) {
        ADD_FAILURE() << ctx << " all_gather block " << r << " [" << i << "] = " << out[r * n + i];
        r = p;
        break;
      }
    }
  }

  // reduce_scatter: rank r's in[j] = j % 4096 + 100 * r.
  std::vector<float> blocks(p * n), mine(n, -1.0f);
  for (int64_t j = 0; j < p * n; ++j) blocks[j] = float(j % 4096 + 100 * me);
  comm.reduce_scatter(blocks.data(), mine.data(), n, "test_scatter");
  for (int64_t i = 0; i < n; ++i) {
    float want = float(p * ((me * n + i) % 4096) + 100 * p * (p - 1) / 2);
    if (mine[i] != want) {
      ADD_FAILURE() << ctx << " reduce_scatter [" << i << "] = " << mine[i] << ", want " << want;
      break;
    }
  }

  // all_to_all: sender s puts 10000 * s + 100 * d + i % 100 in block d.
  std::vector<float> send(p * n), recv(p * n, -1.0f);
  for (int d = 0; d < p; ++d) {
    for (int64_t i = 0; i < n; ++i) send[d * n + i] = float(10000 * me + 100 * d + i % 100);
  }
  comm.all_to_all(send.data(), recv.data(), n, "test_all_to_all");
  for (int s = 0; s < p; ++s) {
    for (int64_t i = 0; i < n; ++i) {
      float want = float(10000 * s + 100 * me + i % 100);
      if (recv[s * n + i] != want) {
        ADD_FAILURE() << ctx << " all_to_all from " << s << " [" << i << "] = " << recv[s * n + i]
                      << ", want " << want;
        s = p;
        break;
      }
    }
  }
}

}  // namespace tessel
