#pragma once

#include <torch/all.h>

#include <optional>
#include <tuple>

#if defined(CUDA_KERNEL)
torch::Tensor rms_norm_cuda(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps);
std::tuple<torch::Tensor, torch::Tensor> fused_add_rms_norm_cuda(const torch::Tensor& input,
                                                                  const torch::Tensor& residual,
                                                                  const std::optional<torch::Tensor>& weight,
                                                                  double eps);
#elif defined(CPU_KERNEL)
torch::Tensor rms_norm_cpu(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps);
std::tuple<torch::Tensor, torch::Tensor> fused_add_rms_norm_cpu(const torch::Tensor& input,
                                                                 const torch::Tensor& residual,
                                                                 const std::optional<torch::Tensor>& weight,
                                                                 double eps);
#endif
