// Development harness, not part of the kernel build: the register kernel with
// its choices forced (launch shape, streaming loads, programmatic dependent
// launch) behind one C function per dtype, for benchmarks/variants.py (ctypes).
// A negative vpt, stream_loads or pdl leaves that choice to the kernel, as the
// ops do. Compile once per dtype with -DVARIANT_DTYPE=0 (bf16), 1 (fp16) or 2 (fp32).
#include "../rmsnorm_cuda/rmsnorm_kernels.cuh"

#if VARIANT_DTYPE == 0
using T = __nv_bfloat16;
#define VARIANT_NAME rmsnorm_variant_bf16
#elif VARIANT_DTYPE == 1
using T = __half;
#define VARIANT_NAME rmsnorm_variant_fp16
#else
using T = float;
#define VARIANT_NAME rmsnorm_variant_fp32
#endif

using namespace rmsnorm;

extern "C" int VARIANT_NAME(int stream_loads, int pdl, void* out, void* residual_out, const void* input,
                            const void* residual, const void* weight, long long rows, int hidden, float eps, int vpt,
                            int tpr, int rpb, void* stream) {
  Args a{};
  a.out = out;
  a.residual_out = residual_out;
  a.input = input;
  a.residual = residual;
  a.weight = weight;
  a.rows = rows;
  a.hidden = hidden;
  a.inv_hidden = 1.0f / static_cast<float>(hidden);
  a.eps = eps;
  const Launch l{vpt, tpr, rpb};
  return run_variant<T>(a, vpt > 0 ? &l : nullptr, static_cast<cudaStream_t>(stream), stream_loads, pdl);
}
