#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

// Functional schemas (no mutated arguments) so torch.compile can place the ops
// in a graph; their fake kernels are registered in rmsnorm/__init__.py.
TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("rms_norm(Tensor input, Tensor? weight, float eps) -> Tensor");
  ops.def("fused_add_rms_norm(Tensor input, Tensor residual, Tensor? weight, float eps) -> (Tensor, Tensor)");
}

#if defined(CUDA_KERNEL)
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {
  ops.impl("rms_norm", &rms_norm_cuda);
  ops.impl("fused_add_rms_norm", &fused_add_rms_norm_cuda);
}
#elif defined(CPU_KERNEL)
TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {
  ops.impl("rms_norm", &rms_norm_cpu);
  ops.impl("fused_add_rms_norm", &fused_add_rms_norm_cpu);
}
#endif

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
