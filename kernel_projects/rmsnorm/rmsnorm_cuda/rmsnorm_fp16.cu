#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_fp16(Args a, cudaStream_t stream) { return run<__half>(a, stream); }
}  // namespace rmsnorm
