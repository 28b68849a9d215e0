// The PTX-only kernel of the cuda-probe. jit_kernel.cu is compiled with
// `-gencode arch=compute_XX,code=compute_XX` (no SASS), so the driver must JIT-compile it when it
// is first launched: a driver older than the toolkit's PTX ISA fails that launch with
// cudaErrorUnsupportedPtxVersion (222), which is exactly the minor-version-compatibility exception
// the probe exists to report.
#pragma once

#include <cuda_runtime.h>

// Launches the PTX-only kernel on the current device: out[i] = gpuconf_jit_expected(i, seed) for
// 0 <= i < n. Returns the launch's error (cudaGetLastError), without synchronizing.
cudaError_t gpuconf_launch_jit_kernel(int* out, int n, int seed);

inline int gpuconf_jit_expected(int i, int seed) { return i * 3 + seed; }
