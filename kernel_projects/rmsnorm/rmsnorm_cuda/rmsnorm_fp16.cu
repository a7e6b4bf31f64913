#include "rmsnorm_kernels.cuh"

namespace rmsnorm {
cudaError_t launch_fp16(Args a, const Launch* shape, cudaStream_t stream) { return run<__half>(a, shape, stream); }
}  // namespace rmsnorm
