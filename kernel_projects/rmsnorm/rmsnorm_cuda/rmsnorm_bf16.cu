#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_bf16(Args a, const Launch* shape, cudaStream_t stream) { return run<__nv_bfloat16>(a, shape, stream); }
}  // namespace rmsnorm
