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
#ifdef RMSNORM_TUNING
torch::Tensor rms_norm_tuned_cuda(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps,
                                  int64_t vpt, int64_t tpr, int64_t rpb);
#endif
#elif defined(CPU_KERNEL)
torch::Tensor rms_norm_cpu(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps);
std::tuple<torch::Tensor, torch::Tensor> fused_add_rms_norm_cpu(const torch::Tensor& input,
                                                                 const torch::Tensor& residual,
                                                                 const std::optional<torch::Tensor>& weight,
                                                                 double eps);
#endif
