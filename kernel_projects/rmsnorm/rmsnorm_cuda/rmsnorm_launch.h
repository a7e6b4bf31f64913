// Interface between the torch glue (rmsnorm_cuda.cpp) and the per-dtype kernel
// files, which include no torch headers so that they compile fast and in parallel.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rmsnorm {

struct Args {
  void* out;           // [rows, hidden]
  void* residual_out;  // [rows, hidden] or null
  const void* input;
  const void* residual;  // or null
  const void* weight;    // [hidden] or null
  int64_t rows;
  int hidden;
  int vectors;  // hidden / vector width
  float inv_hidden;
  float eps;
};

cudaError_t launch_bf16(Args a, cudaStream_t stream);
cudaError_t launch_fp16(Args a, cudaStream_t stream);
cudaError_t launch_fp32(Args a, cudaStream_t stream);

}  // namespace rmsnorm
