#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_bf16(Args a, cudaStream_t stream) { return run<__nv_bfloat16>(a, stream); }
}  // namespace rmsnorm
