// RMSNorm device code: y = x * rsqrt(mean(x^2) + eps) * w, fp32 accumulation,
// one rounding to the storage type. Optional fused residual add:
// s = x + r (rounded to the storage type, stored), y = rmsnorm(s).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "rmsnorm_launch.h"

namespace rmsnorm {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// N elements moved as one access of N * sizeof(T) bytes (16 at most).
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T e[N];
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the blockDim.x threads that share a row (blockDim.y rows per block).
// Every thread of the block must call it (it holds a barrier when a row spans warps).
__device__ __forceinline__ float row_sum(float v) {
  v = warp_sum(v);
  const int warps_per_row = blockDim.x >> 5;
  if (warps_per_row == 1) return v;
  __shared__ float partial[32];
  const int lane = threadIdx.x & 31;
  const int first = threadIdx.y * warps_per_row;
  if (lane == 0) partial[first + (threadIdx.x >> 5)] = v;
  __syncthreads();
  v = lane < warps_per_row ? partial[first + lane] : 0.f;
  return warp_sum(v);
}

// Programmatic dependent launch (sm_90+): a kernel launched with the
// programmatic-serialization attribute may start while the kernel before it
// finishes; it must wait for that kernel's results before touching memory.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// Input that this kernel reads exactly once. STREAM: ld.global.cs, which
// marks the lines evict-first in L1 and L2, so the L2 keeps what the next kernel
// reads (such as this kernel's output) rather than the spent input.
template <bool STREAM, typename P>
__device__ __forceinline__ P load_input(const P* p) {
  static_assert(sizeof(P) == 16, "16-byte vectors only");
  if constexpr (STREAM) {
    uint4 v;
    // "memory": never hoisted above wait_for_previous_grid().
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p)
                 : "memory");
    P r;
    memcpy(&r, &v, sizeof(P));
    return r;
  } else {
    return *p;
  }
}

// The whole row stays in registers: each of blockDim.x threads holds VPT
// vectors of VEC elements, so the input is read from memory exactly once.
// Thread i of a row owns vectors i, i + blockDim.x, ... so every load and
// store instruction of a warp covers one contiguous 512-byte span.
template <typename T, int VEC, int VPT, bool RESIDUAL, int MAX_THREADS, bool STREAM>
__global__ void __launch_bounds__(MAX_THREADS) rms_norm_registers(const Args a) {
  using P = Pack<T, VEC>;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool live = row < a.rows;
  const int64_t base = row * a.vectors;
  const P* in = static_cast<const P*>(a.input) + base;
  const P* res = static_cast<const P*>(a.residual) + base;
  const P* w = static_cast<const P*>(a.weight);

  wait_for_previous_grid();
  P x[VPT], r[VPT], wv[VPT];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (live && i < a.vectors) x[k] = load_input<STREAM>(in + i);
  }
  if constexpr (RESIDUAL) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (live && i < a.vectors) r[k] = load_input<STREAM>(res + i);
    }
  }
  if (w != nullptr) {
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
      const int i = threadIdx.x + k * blockDim.x;
      if (live && i < a.vectors) wv[k] = w[i];
    }
  }
  allow_next_grid();

  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (live && i < a.vectors) {
      if constexpr (RESIDUAL) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) x[k].e[j] = from_float<T>(to_float(x[k].e[j]) + to_float(r[k].e[j]));
        static_cast<P*>(a.residual_out)[base + i] = x[k];
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float v = to_float(x[k].e[j]);
        ss = fmaf(v, v, ss);
      }
    }
  }
  const float rstd = rsqrtf(row_sum(ss) * a.inv_hidden + a.eps);

  P* out = static_cast<P*>(a.out) + base;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (live && i < a.vectors) {
      P y;
      if (w != nullptr) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) y.e[j] = from_float<T>(to_float(x[k].e[j]) * rstd * to_float(wv[k].e[j]));
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) y.e[j] = from_float<T>(to_float(x[k].e[j]) * rstd);
      }
      out[i] = y;
    }
  }
}

// Any row length and any alignment: one row per block, looping over the row
// twice (the second pass mostly hits L2). Used when the row does not fit in
// registers, or when the hidden size or a pointer rules out 16-byte vectors
// (VEC is then the widest width that divides both).
template <typename T, int VEC>
__global__ void __launch_bounds__(1024) rms_norm_looped(const Args a) {
  using P = Pack<T, VEC>;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * a.vectors;
  const P* in = static_cast<const P*>(a.input) + base;
  const P* w = static_cast<const P*>(a.weight);
  P* sum_out = a.residual != nullptr ? static_cast<P*>(a.residual_out) + base : nullptr;

  wait_for_previous_grid();
  float ss = 0.f;
  for (int i = threadIdx.x; i < a.vectors; i += blockDim.x) {
    P x = in[i];
    if (sum_out != nullptr) {
      const P r = static_cast<const P*>(a.residual)[base + i];
#pragma unroll
      for (int j = 0; j < VEC; ++j) x.e[j] = from_float<T>(to_float(x.e[j]) + to_float(r.e[j]));
      sum_out[i] = x;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const float v = to_float(x.e[j]);
      ss = fmaf(v, v, ss);
    }
  }
  const float rstd = rsqrtf(row_sum(ss) * a.inv_hidden + a.eps);

  // The second pass reads back what this same thread wrote (the sum), so
  // no barrier is needed between the passes.
  const P* src = sum_out != nullptr ? sum_out : in;
  P* out = static_cast<P*>(a.out) + base;
  for (int i = threadIdx.x; i < a.vectors; i += blockDim.x) {
    const P x = src[i];
    P y;
    if (w != nullptr) {
      const P wv = w[i];
#pragma unroll
      for (int j = 0; j < VEC; ++j) y.e[j] = from_float<T>(to_float(x.e[j]) * rstd * to_float(wv.e[j]));
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) y.e[j] = from_float<T>(to_float(x.e[j]) * rstd);
    }
    out[i] = y;
  }
}

// Register-resident rows: up to this many vectors per thread and threads per
// row (VPT * threads <= 2048 vectors: 16384 bf16/fp16 or 8192 fp32 elements).
constexpr int kMaxRegisterVectors = 2048;

// Launch shape of the register-resident kernel.
struct Launch {
  int vpt;  // vectors per thread: 1, 2, 4 or 8
  int tpr;  // threads per row, a multiple of 32
  int rpb;  // rows per block
};

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

inline int max_threads_for(int vpt) { return vpt <= 2 ? 1024 : (vpt == 4 ? 512 : 256); }

// The fewest vectors per thread, from `min_vpt` up, that keep a row within 512
// threads. Swept on an H100: 8 elements per thread for bf16/fp16 (one 16-byte
// vector) and 16 for fp32 (min_vpt 4) beat fewer threads with more loads each,
// most at small row counts. Rows shorter than 128 threads share a block.
inline Launch choose_launch(int vectors, int min_vpt) {
  for (int vpt = min_vpt; vpt <= 8; vpt *= 2) {
    const int tpr = round_up((vectors + vpt - 1) / vpt, 32);
    if (tpr <= 512 && tpr <= max_threads_for(vpt)) return {vpt, tpr, tpr >= 128 ? 1 : 128 / tpr};
  }
  return {8, round_up((vectors + 7) / 8, 32), 1};
}

// Whether KERNEL, as loaded on device `dev`, was compiled for sm_90 or newer and
// so holds the griddepcontrol.wait that programmatic launch needs (a device
// can run older code through PTX). Read once per kernel and device.
template <auto KERNEL>
bool waits_for_previous_grid(int dev) {
  static std::atomic<int> cache[64];  // 1 + binaryVersion; 0: not read yet (static: zero-initialized)
  int v = dev >= 0 && dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (v == 0) {
    cudaFuncAttributes attr;
    v = 1 + (cudaFuncGetAttributes(&attr, KERNEL) == cudaSuccess ? attr.binaryVersion : 0);
    if (dev >= 0 && dev < 64) cache[dev].store(v, std::memory_order_relaxed);
  }
  return v - 1 >= 90;
}

// `KERNEL<<<grid, block, 0, stream>>>(a)`, with programmatic dependent launch
// allowed when `pdl` is set and the kernel's code waits for the previous grid.
template <auto KERNEL>
void launch(dim3 grid, dim3 block, cudaStream_t stream, bool pdl, int dev, const Args& a) {
  if (!pdl || !waits_for_previous_grid<KERNEL>(dev)) {
    KERNEL<<<grid, block, 0, stream>>>(a);
    return;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  cudaLaunchKernelEx(&config, KERNEL, a);
}

template <typename T, int VEC, int VPT, bool RES, bool STREAM>
void launch_registers(const Args& a, const Launch& l, cudaStream_t stream, bool pdl, int dev) {
  const dim3 block(l.tpr, l.rpb);
  const dim3 grid(static_cast<unsigned>((a.rows + l.rpb - 1) / l.rpb));
  launch<rms_norm_registers<T, VEC, VPT, RES, (VPT <= 2 ? 1024 : (VPT == 4 ? 512 : 256)), STREAM>>(grid, block, stream,
                                                                                                   pdl, dev, a);
}

template <typename T, int VEC, bool RES, bool STREAM>
void dispatch_vpt(const Args& a, const Launch& l, cudaStream_t stream, bool pdl, int dev) {
  switch (l.vpt) {
    case 1: return launch_registers<T, VEC, 1, RES, STREAM>(a, l, stream, pdl, dev);
    case 2: return launch_registers<T, VEC, 2, RES, STREAM>(a, l, stream, pdl, dev);
    case 4: return launch_registers<T, VEC, 4, RES, STREAM>(a, l, stream, pdl, dev);
    default: return launch_registers<T, VEC, 8, RES, STREAM>(a, l, stream, pdl, dev);
  }
}

template <typename T, int VEC, bool RES>
void dispatch_stream(const Args& a, const Launch& l, cudaStream_t stream, bool streaming, bool pdl, int dev) {
  if (streaming)
    dispatch_vpt<T, VEC, RES, true>(a, l, stream, pdl, dev);
  else
    dispatch_vpt<T, VEC, RES, false>(a, l, stream, pdl, dev);
}

template <typename T, int VEC>
void launch_looped(const Args& a, cudaStream_t stream, bool pdl, int dev) {
  const int threads = round_up(std::min(a.vectors, 1024), 32);
  launch<rms_norm_looped<T, VEC>>(dim3(static_cast<unsigned>(a.rows)), dim3(threads), stream, pdl, dev, a);
}

inline bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Widest vector (in elements) that divides the hidden size and keeps every
// pointer aligned; 16 bytes where possible.
template <typename T>
int vector_width(const Args& a) {
  int vec = 16 / sizeof(T);
  while (vec > 1) {
    const int bytes = vec * sizeof(T);
    if (a.hidden % vec == 0 && aligned(a.out, bytes) && aligned(a.input, bytes) &&
        (a.weight == nullptr || aligned(a.weight, bytes)) &&
        (a.residual == nullptr || (aligned(a.residual, bytes) && aligned(a.residual_out, bytes))))
      break;
    vec /= 2;
  }
  return vec;
}

// Compute capability major and L2 size of the current device, read once per device.
struct DeviceInfo {
  int device;
  int major;
  int l2_bytes;
};

inline DeviceInfo current_device_info() {
  static std::atomic<int64_t> cache[64];  // zero-initialized (static): major << 32 | L2 bytes; 0: not read yet
  int dev = 0;
  cudaGetDevice(&dev);
  int64_t packed = dev < 64 ? cache[dev].load(std::memory_order_relaxed) : 0;
  if (packed == 0) {
    int major = 0, l2 = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
    packed = (static_cast<int64_t>(major) << 32) | static_cast<uint32_t>(l2);
    if (dev < 64) cache[dev].store(packed, std::memory_order_relaxed);
  }
  return {dev, static_cast<int>(packed >> 32), static_cast<int>(packed & 0xffffffff)};
}

// Streaming (evict-first) input loads while one call reads at most half the L2:
// measured on an H100, they cut 2-10 % at 1-16 MiB read per call and cost
// 1-2 % from 32 MiB up.
inline bool streaming_pays(const Args& a, int element_bytes, const DeviceInfo& d) {
  const int64_t read = a.rows * a.hidden * static_cast<int64_t>(element_bytes) * (a.residual != nullptr ? 2 : 1);
  return 2 * read <= d.l2_bytes;
}

// Programmatic dependent launch wherever the GPU has it (sm_90+): the kernel's
// blocks start while the previous kernel on the stream drains and wait in
// griddepcontrol.wait before reading anything. On an H100 it took 0.4-0.8 us off
// every call in CUDA-graph replay and 0.7-1.9 us off calls launched from Python,
// at every size measured, and never cost anything.
inline bool pdl_available(const DeviceInfo& d) { return d.major >= 9; }

template <typename T>
cudaError_t run(Args a, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const DeviceInfo device = current_device_info();
  const bool pdl = pdl_available(device);
  const int vec = vector_width<T>(a);
  a.vectors = a.hidden / vec;
  if (vec == kVec && a.vectors <= kMaxRegisterVectors) {
    const Launch l = choose_launch(a.vectors, sizeof(T) == 4 ? 4 : 1);
    const bool streaming = streaming_pays(a, sizeof(T), device);
    if (a.residual != nullptr)
      dispatch_stream<T, kVec, true>(a, l, stream, streaming, pdl, device.device);
    else
      dispatch_stream<T, kVec, false>(a, l, stream, streaming, pdl, device.device);
  } else {
    switch (vec) {
      case 1: launch_looped<T, 1>(a, stream, pdl, device.device); break;
      case 2: launch_looped<T, 2>(a, stream, pdl, device.device); break;
      case 4: launch_looped<T, 4>(a, stream, pdl, device.device); break;
      default: launch_looped<T, kVec>(a, stream, pdl, device.device); break;
    }
  }
  return cudaGetLastError();
}

}  // namespace rmsnorm
