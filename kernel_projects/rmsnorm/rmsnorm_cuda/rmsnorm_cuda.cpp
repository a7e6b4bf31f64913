// Torch side of the CUDA RMSNorm: argument checks, outputs, stream. Plain C++ (no
// device code), so torch headers are compiled once, by the host compiler.
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/all.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

#include "rmsnorm_launch.h"
#include "torch_binding.h"

namespace rmsnorm {
namespace {

// Messages are built from strings only: streaming integers into c10::str
// crashed (inside the inlined std::ostream code) in an extension built with a
// newer g++ than the libstdc++ the process had loaded (seen on the H100 image).
std::string shape_str(c10::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

void check_inputs(const torch::Tensor& input, const std::optional<torch::Tensor>& weight) {
  TORCH_CHECK(input.is_cuda(), "rms_norm: input must be a CUDA tensor");
  TORCH_CHECK(input.dim() >= 1, "rms_norm: input must have at least one dimension");
  const auto dtype = input.scalar_type();
  TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kHalf || dtype == torch::kBFloat16,
              "rms_norm: input dtype must be float32, float16 or bfloat16, got ", dtype);
  TORCH_CHECK(input.size(-1) <= std::numeric_limits<int>::max(), "rms_norm: hidden size too large");
  if (weight) {
    TORCH_CHECK(weight->device() == input.device(), "rms_norm: weight must be on the input's device");
    TORCH_CHECK(weight->scalar_type() == dtype, "rms_norm: weight dtype ", weight->scalar_type(),
                " differs from input dtype ", dtype);
    TORCH_CHECK(weight->dim() == 1 && weight->size(0) == input.size(-1),
                "rms_norm: weight must have shape [" + std::to_string(input.size(-1)) + "], got " +
                    shape_str(weight->sizes()));
  }
}

// A contiguous output like `x`, straight from the CUDA allocator: torch::empty_like
// goes through the dispatcher (autograd keys included) twice, which cost ~1 us of
// host time per output on an H100 host, a tenth of a small call.
torch::Tensor empty_out(const torch::Tensor& x) {
  return at::detail::empty_cuda(x.sizes(), x.scalar_type(), x.device(), std::nullopt);
}

void forward(const torch::Tensor& out, const std::optional<torch::Tensor>& residual_out, const torch::Tensor& input,
             const std::optional<torch::Tensor>& residual, const std::optional<torch::Tensor>& weight, double eps) {
  const int hidden = static_cast<int>(input.size(-1));
  const int64_t rows = hidden == 0 ? 0 : input.numel() / hidden;
  if (rows == 0) return;
  const c10::cuda::CUDAGuard guard(input.device());
  torch::Tensor w;
  if (weight) w = weight->contiguous();
  Args a{};
  a.out = out.data_ptr();
  a.residual_out = residual_out ? residual_out->data_ptr() : nullptr;
  a.input = input.data_ptr();
  a.residual = residual ? residual->data_ptr() : nullptr;
  a.weight = weight ? w.data_ptr() : nullptr;
  a.rows = rows;
  a.hidden = hidden;
  a.inv_hidden = 1.0f / static_cast<float>(hidden);
  a.eps = static_cast<float>(eps);
  TORCH_CHECK(rows <= std::numeric_limits<int>::max(), "rms_norm: too many rows");
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t err;
  switch (input.scalar_type()) {
    case torch::kFloat: err = launch_fp32(a, stream); break;
    case torch::kHalf: err = launch_fp16(a, stream); break;
    default: err = launch_bf16(a, stream); break;
  }
  TORCH_CHECK(err == cudaSuccess, "rms_norm: kernel launch failed: ", cudaGetErrorString(err));
}

}  // namespace
}  // namespace rmsnorm

torch::Tensor rms_norm_cuda(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps) {
  rmsnorm::check_inputs(input, weight);
  const torch::Tensor x = input.contiguous();
  torch::Tensor out = rmsnorm::empty_out(x);
  rmsnorm::forward(out, std::nullopt, x, std::nullopt, weight, eps);
  return out;
}

std::tuple<torch::Tensor, torch::Tensor> fused_add_rms_norm_cuda(const torch::Tensor& input,
                                                                  const torch::Tensor& residual,
                                                                  const std::optional<torch::Tensor>& weight,
                                                                  double eps) {
  rmsnorm::check_inputs(input, weight);
  TORCH_CHECK(residual.sizes() == input.sizes(), "fused_add_rms_norm: residual shape " +
                                                   rmsnorm::shape_str(residual.sizes()) + " differs from input shape " +
                                                   rmsnorm::shape_str(input.sizes()));
  TORCH_CHECK(residual.scalar_type() == input.scalar_type() && residual.device() == input.device(),
              "fused_add_rms_norm: residual must match the input's dtype and device");
  const torch::Tensor x = input.contiguous();
  const torch::Tensor r = residual.contiguous();
  torch::Tensor out = rmsnorm::empty_out(x);
  torch::Tensor sum = rmsnorm::empty_out(x);
  rmsnorm::forward(out, sum, x, r, weight, eps);
  return {out, sum};
}
