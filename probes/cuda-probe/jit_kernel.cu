// PTX-only kernel of the cuda-probe; see jit_kernel.h. build.sh compiles this file alone with a
// PTX-only -gencode, so none of the SASS targets of probe.cu applies here.
#include "jit_kernel.h"

__global__ void gpuconf_jit_kernel(int* out, int n, int seed) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = i * 3 + seed;
}

cudaError_t gpuconf_launch_jit_kernel(int* out, int n, int seed) {
  const int threads = 256;
  const int blocks = (n + threads - 1) / threads;
  gpuconf_jit_kernel<<<blocks, threads>>>(out, n, seed);
  return cudaGetLastError();
}
