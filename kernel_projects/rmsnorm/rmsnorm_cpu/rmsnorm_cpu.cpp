// CPU RMSNorm: rows split over torch's intra-op threads (at::parallel_for, OpenMP), each row
// read twice from the core's own cache (sum of squares, then the scaling), in the widest vectors
// the CPU has. One build runs anywhere: the AVX-512 and AVX2 paths are compiled for those
// instruction sets alone (function attributes, not global -m flags) and picked at run time from
// what the CPU says it supports; other CPUs (and aarch64) take the portable path.
// Same numbers on every path: fp32 accumulation, one rounding (to nearest even) to the storage
// type; the fused sum is rounded to the storage type before the norm, as `x + residual` is.
#include <ATen/Parallel.h>
#include <torch/all.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "torch_binding.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RMSNORM_X86 1
#endif

namespace {

using c10::BFloat16;
using c10::Half;

// ---- the vector types: W floats, loads and stores from and to each storage type ----

// Portable: 8 lanes in plain arrays, loops the compiler may vectorize for its baseline.
struct Portable {
  static constexpr int W = 8;
  struct F {
    float v[W];
  };
  template <typename T>
  static F load(const T* p) {
    F r;
    for (int j = 0; j < W; ++j) r.v[j] = static_cast<float>(p[j]);
    return r;
  }
  template <typename T>
  static void store(T* p, const F& a) {
    for (int j = 0; j < W; ++j) p[j] = static_cast<T>(a.v[j]);
  }
  static F zero() { return F{}; }
  static F set1(float s) {
    F r;
    for (int j = 0; j < W; ++j) r.v[j] = s;
    return r;
  }
  static F add(const F& a, const F& b) {
    F r;
    for (int j = 0; j < W; ++j) r.v[j] = a.v[j] + b.v[j];
    return r;
  }
  static F mul(const F& a, const F& b) {
    F r;
    for (int j = 0; j < W; ++j) r.v[j] = a.v[j] * b.v[j];
    return r;
  }
  static F square_add(const F& a, const F& acc) {
    F r;
    for (int j = 0; j < W; ++j) r.v[j] = acc.v[j] + a.v[j] * a.v[j];
    return r;
  }
  static float sum(const F& a) {
    float s = 0.f;
    for (int j = 0; j < W; ++j) s += a.v[j];
    return s;
  }
};

#ifdef RMSNORM_X86
#define RMSNORM_AVX2 __attribute__((target("avx2,fma,f16c")))
#define RMSNORM_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

struct Avx2 {
  static constexpr int W = 8;
  using F = __m256;
  RMSNORM_AVX2 static F load(const float* p) { return _mm256_loadu_ps(p); }
  RMSNORM_AVX2 static F load(const Half* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  RMSNORM_AVX2 static void store(float* p, F a) { _mm256_storeu_ps(p, a); }
  RMSNORM_AVX2 static void store(Half* p, F a) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
  }
  // bf16 in pairs: 2W elements as the floats of the even and the odd ones (a bf16 is the top half
  // of a float: a shift and a mask, no shuffle), and back, rounded as c10::BFloat16 rounds: to
  // nearest even, NaN to the quiet NaN 0x7fc0.
  RMSNORM_AVX2 static void load2(const BFloat16* p, F& even, F& odd) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  RMSNORM_AVX2 static __m256i round_bits(F a) {
    const __m256i bits = _mm256_castps_si256(a);
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc00000), _mm256_castps_si256(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
  }
  RMSNORM_AVX2 static void store2(BFloat16* p, F even, F odd) {
    const __m256i hi = _mm256_and_si256(round_bits(odd), _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_or_si256(hi, _mm256_srli_epi32(round_bits(even), 16)));
  }
  RMSNORM_AVX2 static F zero() { return _mm256_setzero_ps(); }
  RMSNORM_AVX2 static F set1(float s) { return _mm256_set1_ps(s); }
  RMSNORM_AVX2 static F add(F a, F b) { return _mm256_add_ps(a, b); }
  RMSNORM_AVX2 static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  RMSNORM_AVX2 static F square_add(F a, F acc) { return _mm256_fmadd_ps(a, a, acc); }
  RMSNORM_AVX2 static float sum(F a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

struct Avx512 {
  static constexpr int W = 16;
  using F = __m512;
  RMSNORM_AVX512 static F load(const float* p) { return _mm512_loadu_ps(p); }
  RMSNORM_AVX512 static F load(const Half* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  RMSNORM_AVX512 static void store(float* p, F a) { _mm512_storeu_ps(p, a); }
  RMSNORM_AVX512 static void store(Half* p, F a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
  }
  RMSNORM_AVX512 static void load2(const BFloat16* p, F& even, F& odd) {
    const __m512i v = _mm512_loadu_si512(p);
    even = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    odd = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(static_cast<int>(0xffff0000u))));
  }
  RMSNORM_AVX512 static __m512i round_bits(F a) {
    const __m512i bits = _mm512_castps_si512(a);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_add_epi32(bits, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff)));
    return _mm512_mask_mov_epi32(r, _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc00000));
  }
  RMSNORM_AVX512 static void store2(BFloat16* p, F even, F odd) {
    const __m512i hi = _mm512_and_si512(round_bits(odd), _mm512_set1_epi32(static_cast<int>(0xffff0000u)));
    _mm512_storeu_si512(p, _mm512_or_si512(hi, _mm512_srli_epi32(round_bits(even), 16)));
  }
  RMSNORM_AVX512 static F zero() { return _mm512_setzero_ps(); }
  RMSNORM_AVX512 static F set1(float s) { return _mm512_set1_ps(s); }
  RMSNORM_AVX512 static F add(F a, F b) { return _mm512_add_ps(a, b); }
  RMSNORM_AVX512 static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  RMSNORM_AVX512 static F square_add(F a, F acc) { return _mm512_fmadd_ps(a, a, acc); }
  RMSNORM_AVX512 static float sum(F a) { return _mm512_reduce_add_ps(a); }
};
#endif

// ---- one block of rows, written once over the vector type V ----

struct Rows {
  void* out;
  void* sum_out;  // or null
  const void* input;
  const void* residual;  // or null
  const void* weight;    // or null
  int64_t rows, hidden;
  float eps;
};

// Rows [begin, end). `w` holds the weight as floats (or is null). Each row is read twice from
// the core's own cache, converted where it is read: once for the sum of squares, once for the
// output (with a residual, the stored sum is what is read back).
template <typename V, typename T>
inline void norm_rows(const Rows& a, int64_t begin, int64_t end, const float* w) {
  using F = typename V::F;
  constexpr int W = V::W;
  const int64_t n = a.hidden;
  const int64_t nv = n / W * W;
  const float inv_n = 1.f / static_cast<float>(n);
  for (int64_t r = begin; r < end; ++r) {
    const T* x = static_cast<const T*>(a.input) + r * n;
    T* y = static_cast<T*>(a.out) + r * n;
    F acc0 = V::zero(), acc1 = V::zero();
    float tail = 0.f;
    if (a.residual != nullptr) {
      const T* res = static_cast<const T*>(a.residual) + r * n;
      T* s = static_cast<T*>(a.sum_out) + r * n;
      int64_t i = 0;
      for (; i < nv; i += W) {
        V::store(s + i, V::add(V::load(x + i), V::load(res + i)));
        acc0 = V::square_add(V::load(s + i), acc0);  // the sum rounded to T, as stored
      }
      for (; i < n; ++i) {
        s[i] = static_cast<T>(static_cast<float>(x[i]) + static_cast<float>(res[i]));
        const float v = static_cast<float>(s[i]);
        tail += v * v;
      }
      x = s;
    } else {
      int64_t i = 0;
      for (; i + 2 * W <= nv; i += 2 * W) {
        acc0 = V::square_add(V::load(x + i), acc0);
        acc1 = V::square_add(V::load(x + i + W), acc1);
      }
      for (; i < nv; i += W) acc0 = V::square_add(V::load(x + i), acc0);
      for (; i < n; ++i) {
        const float v = static_cast<float>(x[i]);
        tail += v * v;
      }
    }
    const float rstd = 1.f / std::sqrt((V::sum(V::add(acc0, acc1)) + tail) * inv_n + a.eps);
    const F vr = V::set1(rstd);
    int64_t i = 0;
    if (w != nullptr) {
      for (; i < nv; i += W) V::store(y + i, V::mul(V::mul(V::load(x + i), vr), V::load(w + i)));
      for (; i < n; ++i) y[i] = static_cast<T>(static_cast<float>(x[i]) * rstd * w[i]);
    } else {
      for (; i < nv; i += W) V::store(y + i, V::mul(V::load(x + i), vr));
      for (; i < n; ++i) y[i] = static_cast<T>(static_cast<float>(x[i]) * rstd);
    }
  }
}

// bf16 rows on a vector type that reads bf16 in pairs (load2/store2): 2W elements a step, no
// shuffles; the weight read as bf16 (half the bytes of a float copy). The same roundings as
// norm_rows: fp32 accumulation, one rounding of each output, the fused sum rounded before the norm.
template <typename V>
inline void norm_rows_bf16(const Rows& a, int64_t begin, int64_t end) {
  using F = typename V::F;
  constexpr int W2 = 2 * V::W;
  const int64_t n = a.hidden;
  const int64_t nv = n / W2 * W2;
  const float inv_n = 1.f / static_cast<float>(n);
  const BFloat16* w = static_cast<const BFloat16*>(a.weight);
  for (int64_t r = begin; r < end; ++r) {
    const BFloat16* x = static_cast<const BFloat16*>(a.input) + r * n;
    BFloat16* y = static_cast<BFloat16*>(a.out) + r * n;
    F acc0 = V::zero(), acc1 = V::zero(), e, o;
    float tail = 0.f;
    if (a.residual != nullptr) {
      const BFloat16* res = static_cast<const BFloat16*>(a.residual) + r * n;
      BFloat16* s = static_cast<BFloat16*>(a.sum_out) + r * n;
      for (int64_t i = 0; i < nv; i += W2) {
        F re, ro;
        V::load2(x + i, e, o);
        V::load2(res + i, re, ro);
        V::store2(s + i, V::add(e, re), V::add(o, ro));
        V::load2(s + i, e, o);  // the sum rounded to bf16, as stored
        acc0 = V::square_add(e, acc0);
        acc1 = V::square_add(o, acc1);
      }
      for (int64_t i = nv; i < n; ++i) {
        s[i] = static_cast<BFloat16>(static_cast<float>(x[i]) + static_cast<float>(res[i]));
        const float v = static_cast<float>(s[i]);
        tail += v * v;
      }
      x = s;
    } else {
      for (int64_t i = 0; i < nv; i += W2) {
        V::load2(x + i, e, o);
        acc0 = V::square_add(e, acc0);
        acc1 = V::square_add(o, acc1);
      }
      for (int64_t i = nv; i < n; ++i) {
        const float v = static_cast<float>(x[i]);
        tail += v * v;
      }
    }
    const float rstd = 1.f / std::sqrt((V::sum(V::add(acc0, acc1)) + tail) * inv_n + a.eps);
    const F vr = V::set1(rstd);
    if (w != nullptr) {
      for (int64_t i = 0; i < nv; i += W2) {
        F we, wo;
        V::load2(x + i, e, o);
        V::load2(w + i, we, wo);
        V::store2(y + i, V::mul(V::mul(e, vr), we), V::mul(V::mul(o, vr), wo));
      }
      for (int64_t i = nv; i < n; ++i)
        y[i] = static_cast<BFloat16>(static_cast<float>(x[i]) * rstd * static_cast<float>(w[i]));
    } else {
      for (int64_t i = 0; i < nv; i += W2) {
        V::load2(x + i, e, o);
        V::store2(y + i, V::mul(e, vr), V::mul(o, vr));
      }
      for (int64_t i = nv; i < n; ++i) y[i] = static_cast<BFloat16>(static_cast<float>(x[i]) * rstd);
    }
  }
}

// One task's rows, [begin, end). bf16 on x86 vectors: in pairs (norm_rows_bf16). Otherwise the
// weight converted to floats once per task, then the rows.
template <typename V, typename T>
inline void norm_block(const Rows& a, int64_t begin, int64_t end) {
  if constexpr (std::is_same_v<T, BFloat16> && !std::is_same_v<V, Portable>) {
    norm_rows_bf16<V>(a, begin, end);
  } else if (a.weight == nullptr || std::is_same_v<T, float>) {
    norm_rows<V, T>(a, begin, end, static_cast<const float*>(a.weight));
  } else {
    std::vector<float> w(a.hidden);
    const T* wt = static_cast<const T*>(a.weight);
    for (int64_t i = 0; i < a.hidden; ++i) w[i] = static_cast<float>(wt[i]);
    norm_rows<V, T>(a, begin, end, w.data());
  }
}

using Block = void (*)(const Rows&, int64_t, int64_t);

template <typename T>
void block_portable(const Rows& a, int64_t begin, int64_t end) {
  norm_block<Portable, T>(a, begin, end);
}

#ifdef RMSNORM_X86
// flatten: everything a block calls (the vector type's functions above all) is inlined into code
// compiled for that instruction set.
template <typename T>
RMSNORM_AVX2 __attribute__((flatten)) void block_avx2(const Rows& a, int64_t begin, int64_t end) {
  norm_block<Avx2, T>(a, begin, end);
}
template <typename T>
RMSNORM_AVX512 __attribute__((flatten)) void block_avx512(const Rows& a, int64_t begin, int64_t end) {
  norm_block<Avx512, T>(a, begin, end);
}
#endif

// The widest vectors this CPU runs, asked once, capped as torch's own kernels are by
// ATEN_CPU_CAPABILITY (default, avx2, avx512): how each path can be run on one machine.
template <typename T>
Block pick_block() {
#ifdef RMSNORM_X86
  const char* cap = std::getenv("ATEN_CPU_CAPABILITY");
  const std::string cap_s = cap != nullptr ? cap : "";
  __builtin_cpu_init();
  if (cap_s != "default" && cap_s != "avx2" && __builtin_cpu_supports("avx512f")) return block_avx512<T>;
  if (cap_s != "default" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return block_avx2<T>;
#endif
  return block_portable<T>;
}

// Tasks of at least this many elements (one row of 2048 and up): small inputs use as many of
// torch's threads as they have rows. Measured on 16 Xeon cores (benchmarks/cpu_sweep.py,
// RMSNORM_GRAIN overrides it there): 2048 against the 32768 it was, 1x32x4096 bf16 9.2 vs
// 14.7 µs, fp32 10.7 vs 15.3. Inputs of 8 rows per thread and more are split as before.
#ifndef RMSNORM_GRAIN
#define RMSNORM_GRAIN 2048
#endif
constexpr int64_t kGrainElements = RMSNORM_GRAIN;

template <typename T>
void run(const Rows& a) {
  static const Block block = pick_block<T>();
  const int64_t grain = std::max<int64_t>(1, kGrainElements / a.hidden);
  at::parallel_for(0, a.rows, grain, [&](int64_t begin, int64_t end) { block(a, begin, end); });
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

#ifndef RMSNORM_HUGE_PAGES
#define RMSNORM_HUGE_PAGES 1
#endif

// A fresh output of many MiB costs more in page faults (4 KiB each, on first write) than in the
// norm itself: asked for transparent huge pages (2 MiB), where the system grants them on request
// (/sys/kernel/mm/transparent_hugepage/enabled: madvise or always), it takes 512 times fewer.
// Only memory the process has not touched yet (its first page not resident: a fresh mapping, as
// the allocator gives for large blocks) and only its 2 MiB-aligned part is advised; memory the
// allocator hands out again is left as it is (advising it measured slower), and a refusal
// changes nothing. On 16 Xeon cores (benchmarks/cpu_sweep.py): 32-192 MiB outputs 1.5-2.5x faster.
void advise_huge_pages(const torch::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE) && RMSNORM_HUGE_PAGES
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t at = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t begin = (at + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (at + t.nbytes()) & ~(kHuge - 1);
  if (end < begin + 4 * kHuge) return;
  unsigned char resident = 1;
  if (mincore(reinterpret_cast<void*>(begin), 1, &resident) == 0 && (resident & 1) == 0)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

void forward(torch::Tensor& out, torch::Tensor* sum_out, const torch::Tensor& input, const torch::Tensor* residual,
             const std::optional<torch::Tensor>& weight, double eps) {
  const int64_t hidden = input.size(-1);
  const int64_t rows = hidden == 0 ? 0 : input.numel() / hidden;
  if (rows == 0) return;
  advise_huge_pages(out);
  if (sum_out != nullptr) advise_huge_pages(*sum_out);
  torch::Tensor w;
  if (weight) w = weight->contiguous();
  const Rows a{out.data_ptr(), sum_out ? sum_out->data_ptr() : nullptr, input.data_ptr(),
               residual ? residual->data_ptr() : nullptr, weight ? w.data_ptr() : nullptr, rows, hidden,
               static_cast<float>(eps)};
  switch (input.scalar_type()) {
    case torch::kFloat: return run<float>(a);
    case torch::kHalf: return run<Half>(a);
    default: return run<BFloat16>(a);
  }
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
