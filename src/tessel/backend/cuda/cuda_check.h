// Checking CUDA calls: every runtime, cuBLASLt call and kernel launch of the
// CUDA backend goes through these, so a failure is a tessel Error naming the
// call and CUDA's own error string ("device cuda: cudaMalloc(...) failed:
// out of memory"). Compiled, never run on a GPU yet.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace tessel::cuda {

// Throws unless `status` is success, naming `call` (its source text).
void check_cuda(cudaError_t status, const char* call);
void check_cublas(cublasStatus_t status, const char* call);
// After a kernel launch: throws naming `kernel` if the launch failed.
void check_launch(const char* kernel);

}  // namespace tessel::cuda

#define TS_CUDA_CHECK(call) ::tessel::cuda::check_cuda((call), #call)
#define TS_CUBLAS_CHECK(call) ::tessel::cuda::check_cublas((call), #call)
