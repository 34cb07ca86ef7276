// Keeps memory a process frees in its heap, for the next allocation of that
// size, instead of handing it back to the kernel.
//
// Why: Open MPI's collectives (reduce-scatter, all-reduce, non-blocking
// all-reduce) malloc a temporary as large as the message on every call.
// glibc serves blocks above its mmap threshold with a fresh mmap and unmaps
// them on free, so every call faults its pages in again and the kernel
// zeroes them; on the VMs we run on that made a 43 MB all-reduce on 2 ranks
// take 137 ms instead of 13 ms, and an 8 MB reduce-scatter 50 ms instead of
// 3 ms (bench/collectives_bench.sh, docs/performance.md). A training step
// allocates the same sizes every step, so reused heap blocks stay faulted
// in. The cost: freed memory stays in the process (RSS keeps its high-water
// mark). Tensor storage is not affected: AlignedBuffer maps its large blocks
// itself (tensor/aligned_buffer.cc).
//
// Process-wide (glibc's mallopt), idempotent; MpiRuntime::init applies it
// before starting MPI. Returns false where the allocator ignores the request
// (a sanitizer's allocator, another libc); then nothing changed.
#pragma once

namespace tessel {

bool keep_freed_memory_for_reuse();

}  // namespace tessel
