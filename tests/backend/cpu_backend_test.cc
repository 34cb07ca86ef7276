// The backend seam on the CPU: the kernel table is complete, device memory
// is reached only through the backend (poisoned outside DeviceAccess in the
// sanitizer build), programs cross the host boundary by copies, and an
// unavailable device is refused by name.
#include "tessel/backend/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/tiny_gpt_training.h"
#include "tessel/backend/cpu/cpu_kernels.h"
#include "tessel/base/error.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/op_table.h"
#include "tessel/runtime/program.h"
#include "tessel/tensor/aligned_buffer.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

namespace tessel {
namespace {

TEST(CpuKernelTable, EveryInstructionKindHasAKernel) {
  const CpuKernelTable& table = cpu_kernel_table();
  int instructions = 0;
  for (size_t k = 0; k < table.size(); ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (!is_instruction_kind(kind)) {
      EXPECT_EQ(table[k], nullptr) << op_name(kind) << " is a leaf or a view: no kernel";
      continue;
    }
    ++instructions;
    EXPECT_NE(table[k], nullptr) << op_name(kind) << " has no CPU kernel";
  }
  EXPECT_GT(instructions, 30);
}

TEST(CpuBackend, DeviceMemoryIsCountedZeroedAndReturned) {
  Backend& backend = cpu_backend();
  const int64_t before = allocation_stats().live_bytes;
  {
    DeviceMemory block = backend.allocate(MemorySpace::kDevice, 1000);
    EXPECT_EQ(block.size(), 1000u);
    EXPECT_EQ(block.space(), MemorySpace::kDevice);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % 64, 0u);
    EXPECT_EQ(allocation_stats().live_bytes, before + 1000);
    std::vector<uint8_t> host(1000, 7);
    backend.copy_to_host(host.data(), block.data(), host.size());
    EXPECT_EQ(host, std::vector<uint8_t>(1000, 0));
    DeviceMemory moved = std::move(block);
    EXPECT_EQ(block.data(), nullptr);
    EXPECT_EQ(allocation_stats().live_bytes, before + 1000);
  }
  EXPECT_EQ(allocation_stats().live_bytes, before);
}

TEST(CpuBackend, HostBoundaryCopiesRoundTrip) {
  Backend& backend = cpu_backend();
  DeviceMemory a = backend.allocate(MemorySpace::kDevice, 16 * sizeof(float));
  DeviceMemory b = backend.allocate(MemorySpace::kDevice, 16 * sizeof(float));
  std::vector<float> host(16);
  for (int i = 0; i < 16; ++i) host[i] = 0.5f * i;
  backend.copy_from_host(a.data(), host.data(), a.size());
  backend.copy(b.data(), a.data(), a.size());
  backend.accumulate(reinterpret_cast<float*>(b.data()), reinterpret_cast<float*>(a.data()), 16);
  std::vector<float> back(16);
  backend.copy_to_host(back.data(), b.data(), b.size());
  for (int i = 0; i < 16; ++i) EXPECT_EQ(back[i], host[i] * 2) << i;
}

// A program's arena is device memory: a host pointer into it is poisoned
// outside the backend's scopes in the sanitizer build.
TEST(CpuBackend, ProgramMemoryIsPoisonedOutsideTheBackend) {
  if (!CpuBackend::poisons_device_memory())
    GTEST_SKIP() << "device memory is poisoned only in the sanitizer build (build-asan/)";
#if defined(__SANITIZE_ADDRESS__)
  TinyGptTraining t = tiny_gpt_training();
  Program p(t.graph, t.outputs);
  const ValueId tokens = p.input_id("tokens");
  const void* arena_value = p.device_ptr(tokens);
  EXPECT_TRUE(__asan_address_is_poisoned(arena_value));
  {
    DeviceAccess access(p.backend());
    EXPECT_FALSE(__asan_address_is_poisoned(arena_value));
  }
  EXPECT_TRUE(__asan_address_is_poisoned(arena_value));
  // The copies open their own scope.
  std::vector<int32_t> ids(p.value_bytes(tokens) / sizeof(int32_t), 3);
  p.write(tokens, ids.data());
  std::vector<int32_t> back(ids.size());
  p.read(tokens, back.data());
  EXPECT_EQ(back, ids);
  EXPECT_DEATH(
      {
        int32_t x;
        std::memcpy(&x, arena_value, sizeof(x));  // a stray host read of device memory
        std::printf("%d\n", x);
      },
      "use-after-poison");
#endif
}

TEST(Program, WritesAndReadsValuesByCopy) {
  Graph g;
  GraphBuilder b(g);
  const ValueId x = b.input("x", Shape{{"batch", 2}, {"embed", 3}}, DType::kF32);
  const ValueId y = b.scale(x, 2.0f);
  Program p(g, {y});
  const std::vector<float> xs = {1, 2, 3, -1, 0, 0.5f};
  p.write_input("x", xs.data(), xs.size() * sizeof(float));
  p.run();
  const std::vector<float> ys = p.read_f32(y);
  ASSERT_EQ(ys.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(ys[i], 2 * xs[i]);
  try {
    p.write_input("x", xs.data(), 4 * sizeof(float));
    ADD_FAILURE() << "a short input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("24 bytes, given 16"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p.write_input("nope", xs.data(), 24), Error);
}

// "cuda" is refused by name with a reason: a build without the CUDA backend
// says so; a build with it probes the GPU and, where there is none, names
// CUDA's error. (On a GPU machine the probe succeeds: nothing to refuse.)
TEST(Backend, AnUnavailableDeviceIsRefusedByName) {
  EXPECT_STREQ(backend_for("cpu").name(), "cpu");
  try {
    Backend& cuda = backend_for("cuda");
    EXPECT_TRUE(built_with_cuda()) << "cuda was accepted by a build without a CUDA backend";
    EXPECT_STREQ(cuda.name(), "cuda");
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("device cuda"), std::string::npos) << what;
    const bool no_backend =
        what.find("this build of Tessel has no CUDA backend") != std::string::npos;
    const bool no_gpu = what.find("no usable GPU (") != std::string::npos;
    EXPECT_TRUE(built_with_cuda() ? no_gpu : no_backend) << what;
  }
  try {
    backend_for("tpu");
    ADD_FAILURE() << "an unknown device was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'tpu'"), std::string::npos) << e.what();
  }
}

// Built with CUDA on a machine without a usable GPU, the probe's message
// names the CUDA call that failed and CUDA's own error string after it.
TEST(Backend, TheCudaProbeNamesCudasError) {
  if (!built_with_cuda()) GTEST_SKIP() << "this build has no CUDA backend";
  try {
    backend_for("cuda");
    GTEST_SKIP() << "a GPU is usable here: the probe succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    const size_t at = what.find("device cuda: no usable GPU (");
    ASSERT_NE(at, std::string::npos) << what;
    const std::string reason = what.substr(at + 28);
    EXPECT_TRUE(reason.rfind("cudaGetDeviceCount", 0) == 0 || reason.rfind("cudaSetDevice", 0) == 0)
        << what;
    // A call's name, a colon and CUDA's string (or the count), then ")".
    EXPECT_GT(reason.size(), std::string("cudaGetDeviceCount: )").size()) << what;
    EXPECT_EQ(what.back(), ')') << what;
  }
}

}  // namespace
}  // namespace tessel
