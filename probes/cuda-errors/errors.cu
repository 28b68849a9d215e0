// Prints the CUDA runtime's error names and strings as YAML, the source of
// gpuconf/data/cuda_errors.yaml. Build and run:  nvcc -o errors errors.cu && ./errors
// The strings come from the runtime itself (cudaGetErrorName / cudaGetErrorString), so the
// messages the compatibility engine predicts are the ones a probe really prints.
#include <cstdio>
#include <cuda_runtime.h>

static const int kCodes[] = {1, 2, 3, 34, 35, 36, 46, 100, 101, 200, 209, 218, 222,
                             304, 700, 719, 801, 802, 803, 804, 805, 999};

int main() {
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    std::printf("schema: 1\n");
    std::printf("sources:\n  - \"CUDA runtime %d.%d: cudaGetErrorName/cudaGetErrorString, printed by "
                "probes/cuda-errors/errors.cu\"\n", runtime / 1000, (runtime % 1000) / 10);
    std::printf("errors:\n");
    for (int code : kCodes) {
        cudaError_t e = static_cast<cudaError_t>(code);
        std::printf("  - code: %d\n    name: %s\n    message: \"%s\"\n", code, cudaGetErrorName(e),
                    cudaGetErrorString(e));
    }
    return 0;
}
