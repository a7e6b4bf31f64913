// CPU RMSNorm: rows in parallel, each row converted once to an fp32 scratch
// row so that the sum of squares and the scaling are plain float loops the
// compiler vectorizes.
#include <ATen/Parallel.h>
#include <torch/all.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "torch_binding.h"

namespace {

constexpr int kLanes = 16;  // independent partial sums: lets the reduction vectorize

float sum_of_squares(const float* v, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) acc[j] += v[i + j] * v[i + j];
  float total = 0.f;
  for (; i < n; ++i) total += v[i] * v[i];
  for (int j = 0; j < kLanes; ++j) total += acc[j];
  return total;
}

template <typename T>
void rows_kernel(T* out, T* sum_out, const T* input, const T* residual, const T* weight, int64_t rows,
                 int64_t hidden, float eps) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(hidden, 1));
  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> row(hidden), w(weight != nullptr ? hidden : 0);
    for (int64_t i = 0; i < static_cast<int64_t>(w.size()); ++i) w[i] = static_cast<float>(weight[i]);
    for (int64_t r = begin; r < end; ++r) {
      const T* x = input + r * hidden;
      if (residual != nullptr) {
        const T* res = residual + r * hidden;
        T* s = sum_out + r * hidden;
        for (int64_t i = 0; i < hidden; ++i) {
          // Round the sum to T first: the normalized output is of the stored sum.
          s[i] = static_cast<T>(static_cast<float>(x[i]) + static_cast<float>(res[i]));
          row[i] = static_cast<float>(s[i]);
        }
      } else {
        for (int64_t i = 0; i < hidden; ++i) row[i] = static_cast<float>(x[i]);
      }
      const float rstd = 1.f / std::sqrt(sum_of_squares(row.data(), hidden) / static_cast<float>(hidden) + eps);
      T* y = out + r * hidden;
      if (weight != nullptr) {
        for (int64_t i = 0; i < hidden; ++i) y[i] = static_cast<T>(row[i] * rstd * w[i]);
      } else {
        for (int64_t i = 0; i < hidden; ++i) y[i] = static_cast<T>(row[i] * rstd);
      }
    }
  });
}

// Messages are built from strings only: streaming integers into c10::str
// crashed (inside the inlined std::ostream code) in an extension built with a
// newer g++ than the libstdc++ the process had loaded (seen on the H100 image).
std::string shape_str(c10::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

void check_inputs(const torch::Tensor& input, const std::optional<torch::Tensor>& weight) {
  TORCH_CHECK(input.device().is_cpu(), "rms_norm: input must be a CPU tensor");
  TORCH_CHECK(input.dim() >= 1, "rms_norm: input must have at least one dimension");
  const auto dtype = input.scalar_type();
  TORCH_CHECK(dtype == torch::kFloat || dtype == torch::kHalf || dtype == torch::kBFloat16,
              "rms_norm: input dtype must be float32, float16 or bfloat16, got ", dtype);
  if (weight) {
    TORCH_CHECK(weight->device() == input.device(), "rms_norm: weight must be on the input's device");
    TORCH_CHECK(weight->scalar_type() == dtype, "rms_norm: weight dtype ", weight->scalar_type(),
                " differs from input dtype ", dtype);
    TORCH_CHECK(weight->dim() == 1 && weight->size(0) == input.size(-1),
                "rms_norm: weight must have shape [" + std::to_string(input.size(-1)) + "], got " +
                    shape_str(weight->sizes()));
  }
}

void forward(torch::Tensor& out, torch::Tensor* sum_out, const torch::Tensor& input, const torch::Tensor* residual,
             const std::optional<torch::Tensor>& weight, double eps) {
  const int64_t hidden = input.size(-1);
  const int64_t rows = hidden == 0 ? 0 : input.numel() / hidden;
  if (rows == 0) return;
  torch::Tensor w;
  if (weight) w = weight->contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, input.scalar_type(), "rms_norm_cpu", [&] {
    rows_kernel<scalar_t>(out.data_ptr<scalar_t>(), sum_out ? sum_out->data_ptr<scalar_t>() : nullptr,
                          input.data_ptr<scalar_t>(), residual ? residual->data_ptr<scalar_t>() : nullptr,
                          weight ? w.data_ptr<scalar_t>() : nullptr, rows, hidden, static_cast<float>(eps));
  });
}

}  // namespace

torch::Tensor rms_norm_cpu(const torch::Tensor& input, const std::optional<torch::Tensor>& weight, double eps) {
  check_inputs(input, weight);
  const torch::Tensor x = input.contiguous();
  torch::Tensor out = torch::empty_like(x);
  forward(out, nullptr, x, nullptr, weight, eps);
  return out;
}

std::tuple<torch::Tensor, torch::Tensor> fused_add_rms_norm_cpu(const torch::Tensor& input,
                                                                 const torch::Tensor& residual,
                                                                 const std::optional<torch::Tensor>& weight,
                                                                 double eps) {
  check_inputs(input, weight);
  TORCH_CHECK(residual.sizes() == input.sizes(), "fused_add_rms_norm: residual shape " +
                                                   shape_str(residual.sizes()) + " differs from input shape " +
                                                   shape_str(input.sizes()));
  TORCH_CHECK(residual.scalar_type() == input.scalar_type() && residual.device() == input.device(),
              "fused_add_rms_norm: residual must match the input's dtype and device");
  const torch::Tensor x = input.contiguous();
  const torch::Tensor r = residual.contiguous();
  torch::Tensor out = torch::empty_like(x);
  torch::Tensor sum = torch::empty_like(x);
  forward(out, &sum, x, &r, weight, eps);
  return {out, sum};
}
