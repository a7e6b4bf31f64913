#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_fp32(Args a, const Launch* shape, cudaStream_t stream) { return run<float>(a, shape, stream); }
}  // namespace rmsnorm
