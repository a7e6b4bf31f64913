#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_fp32(Args a, cudaStream_t stream) { return run<float>(a, stream); }
}  // namespace rmsnorm
