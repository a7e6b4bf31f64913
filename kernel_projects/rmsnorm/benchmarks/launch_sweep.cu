// Launch-shape sweep of the register-resident RMSNorm kernel, GPU time only: no torch, no Python.
// For each dtype and shape, every launch shape the kernel accepts (vectors per thread x rows per
// block, streaming loads on and off) and the shape `run` picks today are each captured in a CUDA
// graph of one call per input set (sets spanning 6x the L2, so no call reads its input from the
// cache), the graphs replayed in turns, in a new random order each round; one line of JSON per
// (dtype, shape, candidate): the median µs per call. A device-to-device copy of the same bytes,
// timed the same way, is the ceiling. Before timing, every candidate's output on the first set is
// compared with a float64 reference computed here (relative error of the whole output, as the
// project's study does); a candidate that is off is reported and exits non-zero.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I../rmsnorm_cuda launch_sweep.cu -o launch_sweep && ./launch_sweep
// --quick: three shapes; --shipped: every shape, only `run` and the copy (two builds of the kernel,
// compared by their time as a share of the copy's in the same process).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "rmsnorm_kernels.cuh"

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

using namespace rmsnorm;

struct Candidate {
  std::string name;
  int vpt, tpr, rpb;  // vpt 0: `run` as shipped; -1: copy
  bool stream;
  bool pdl = true;  // programmatic dependent launch where the GPU has it
  bool prefetch = false;
};

template <typename T, bool RES>
void launch_candidate(const Args& a, const Candidate& c, cudaStream_t s, int dev) {
  constexpr int kVec = 16 / sizeof(T);
  if (c.vpt == 0) {
    run<T>(a, s);
    return;
  }
  const Launch l{c.vpt, c.tpr, c.rpb, c.prefetch};
  if (c.stream)
    dispatch_vpt<T, kVec, RES, true>(a, l, s, c.pdl, dev);
  else
    dispatch_vpt<T, kVec, RES, false>(a, l, s, c.pdl, dev);
}

static bool quick = false;  // --quick: few shapes, launch shapes with and without PDL
static bool shipped = false;  // --shipped: every shape, `run` and the copy only (one build against another)

static std::vector<Candidate> candidates(int vectors) {
  std::vector<Candidate> out{{"run", 0, 0, 0, false}, {"copy", -1, 0, 0, false}};
  if (shipped) return out;
  if (quick) {
    for (int vpt = 1; vpt <= 4; vpt *= 2) {
      const int tpr = round_up((vectors + vpt - 1) / vpt, 32);
      if (tpr > max_threads_for(vpt)) continue;
      for (int pf = 0; pf < 2; ++pf)
        out.push_back({"v" + std::to_string(vpt) + "t" + std::to_string(tpr) + "r1" + (pf ? "p" : ""), vpt, tpr, 1,
                       false, true, pf == 1});
    }
    return out;
  }
  for (int vpt = 1; vpt <= 8; vpt *= 2) {
    const int tpr = round_up((vectors + vpt - 1) / vpt, 32);
    if (tpr > max_threads_for(vpt)) continue;
    if (vpt > 1 && (vectors + vpt / 2 - 1) / (vpt / 2) <= 32) continue;  // fewer loads per thread already one warp
    for (int rpb = 1; rpb <= 8; rpb *= 2) {
      if (tpr * rpb > max_threads_for(vpt)) break;
      for (int st = 0; st < 2; ++st)
        for (int pf = 0; pf < 2; ++pf)
          out.push_back({"v" + std::to_string(vpt) + "t" + std::to_string(tpr) + "r" + std::to_string(rpb) +
                             (st ? "s" : "") + (pf ? "p" : ""),
                         vpt, tpr, rpb, st == 1, true, pf == 1});
    }
  }
  return out;
}

template <typename T>
void sweep(const char* dtype, int64_t rows, int hidden, bool residual, int l2, int dev, std::mt19937& rng,
           bool swapped = false) {
  constexpr int kVec = 16 / sizeof(T);
  const size_t bytes = static_cast<size_t>(rows) * hidden * sizeof(T);
  const int tensors = residual ? 4 : 2;  // read + written per call
  int sets = static_cast<int>(std::min<size_t>(160, std::max<size_t>(2, (6ull * l2 + bytes * tensors - 1) / (bytes * tensors))));
  std::vector<void*> in(sets), res(sets), out(sets), sum(sets);
  void* w;
  CHECK(cudaMalloc(&w, hidden * sizeof(T)));
  std::vector<T> hw(hidden), hx(static_cast<size_t>(rows) * hidden), hr(hx.size());
  std::uniform_real_distribution<float> uni(-2.f, 2.f);
  for (auto& v : hw) v = T(uni(rng) * 0.25f + 1.f);
  for (auto& v : hx) v = T(uni(rng));
  for (auto& v : hr) v = T(uni(rng));
  if (swapped) {  // the other 16-bit type's bit patterns of the same values (timing only: no check)
    static_assert(sizeof(__half) == sizeof(__nv_bfloat16));
    for (auto& v : hx) {
      float f = static_cast<float>(v);
      if constexpr (sizeof(T) == 2) {
        if constexpr (std::is_same_v<T, __half>) {
          const __nv_bfloat16 o(f);
          memcpy(&v, &o, 2);
        } else {
          const __half o(f);
          memcpy(&v, &o, 2);
        }
      }
    }
  }
  CHECK(cudaMemcpy(w, hw.data(), hidden * sizeof(T), cudaMemcpyHostToDevice));
  for (int i = 0; i < sets; ++i) {
    CHECK(cudaMalloc(&in[i], bytes));
    CHECK(cudaMalloc(&out[i], bytes));
    CHECK(cudaMemcpy(in[i], hx.data(), bytes, cudaMemcpyHostToDevice));
    if (residual) {
      CHECK(cudaMalloc(&res[i], bytes));
      CHECK(cudaMalloc(&sum[i], bytes));
      CHECK(cudaMemcpy(res[i], hr.data(), bytes, cudaMemcpyHostToDevice));
    }
  }
  const auto cands = candidates(hidden / kVec);
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<cudaGraphExec_t> graphs;
  for (const auto& c : cands) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < sets; ++i) {
      if (c.vpt < 0) {
        CHECK(cudaMemcpyAsync(out[i], in[i], bytes, cudaMemcpyDeviceToDevice, s));
        if (residual) CHECK(cudaMemcpyAsync(sum[i], res[i], bytes, cudaMemcpyDeviceToDevice, s));
        continue;
      }
      Args a{};
      a.out = out[i];
      a.input = in[i];
      a.weight = w;
      a.residual = residual ? res[i] : nullptr;
      a.residual_out = residual ? sum[i] : nullptr;
      a.rows = rows;
      a.hidden = hidden;
      a.vectors = hidden / kVec;
      a.inv_hidden = 1.f / hidden;
      a.eps = 1e-6f;
      if (residual)
        launch_candidate<T, true>(a, c, s, dev);
      else
        launch_candidate<T, false>(a, c, s, dev);
    }
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t e;
    CHECK(cudaGraphInstantiate(&e, g, 0));
    CHECK(cudaGraphDestroy(g));
    CHECK(cudaGraphLaunch(e, s));
    graphs.push_back(e);
  }
  CHECK(cudaStreamSynchronize(s));
  {  // each candidate against the float64 reference, on set 0 (the graphs wrote every set once)
    std::vector<double> ref(hx.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int h = 0; h < hidden; ++h) {
        const size_t e = static_cast<size_t>(r) * hidden + h;
        double v = static_cast<float>(hx[e]);
        if (residual) v = static_cast<float>(T(static_cast<float>(hx[e]) + static_cast<float>(hr[e])));
        ref[e] = v;
        ss += v * v;
      }
      const double rstd = 1.0 / std::sqrt(ss / hidden + 1e-6);
      for (int h = 0; h < hidden; ++h) ref[static_cast<size_t>(r) * hidden + h] *= rstd * static_cast<float>(hw[h]);
    }
    std::vector<T> got(hx.size());
    for (size_t k = 0; k < cands.size() && !swapped; ++k) {
      if (cands[k].vpt < 0) continue;
      CHECK(cudaGraphLaunch(graphs[k], s));
      CHECK(cudaStreamSynchronize(s));
      if (residual) {  // the stored sum: the very bits of x + r rounded to T
        CHECK(cudaMemcpy(got.data(), sum[0], bytes, cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < got.size(); ++e) {
          const T want(static_cast<float>(hx[e]) + static_cast<float>(hr[e]));
          if (memcmp(&got[e], &want, sizeof(T)) != 0) {
            fprintf(stderr, "%s %lldx%d %s: sum element %zu differs from x + r\n", dtype,
                    static_cast<long long>(rows), hidden, cands[k].name.c_str(), e);
            exit(3);
          }
        }
      }
      CHECK(cudaMemcpy(got.data(), out[0], bytes, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        const double d = static_cast<float>(got[e]) - ref[e];
        num += d * d;
        den += ref[e] * ref[e];
      }
      const double err = std::sqrt(num / den);
      const double tol = sizeof(T) == 4 ? 1e-5 : (std::is_same_v<T, __half> ? 1e-3 : 8e-3);
      if (!(err < tol)) {
        fprintf(stderr, "%s %lldx%d fused=%d %s: relative error %.3g\n", dtype, static_cast<long long>(rows), hidden,
                residual ? 1 : 0, cands[k].name.c_str(), err);
        exit(3);
      }
    }
  }
  std::vector<std::vector<float>> samples(cands.size());
  std::vector<int> order(cands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  for (int round = 0; round < 15; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int k : order) {
      CHECK(cudaEventRecord(e0, s));
      CHECK(cudaGraphLaunch(graphs[k], s));
      CHECK(cudaEventRecord(e1, s));
      CHECK(cudaEventSynchronize(e1));
      float ms;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      samples[k].push_back(ms * 1000.f / sets);
    }
  }
  for (size_t k = 0; k < cands.size(); ++k) {
    auto v = samples[k];
    std::sort(v.begin(), v.end());
    printf("{\"dtype\": \"%s\", \"rows\": %lld, \"hidden\": %d, \"fused\": %s, \"swapped\": %s, \"cand\": \"%s\", \"us\": %.3f}\n",
           dtype, static_cast<long long>(rows), hidden, residual ? "true" : "false", swapped ? "true" : "false",
           cands[k].name.c_str(), v[v.size() / 2]);
    CHECK(cudaGraphExecDestroy(graphs[k]));
  }
  fflush(stdout);
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaStreamDestroy(s));
  for (int i = 0; i < sets; ++i) {
    CHECK(cudaFree(in[i]));
    CHECK(cudaFree(out[i]));
    if (residual) {
      CHECK(cudaFree(res[i]));
      CHECK(cudaFree(sum[i]));
    }
  }
  CHECK(cudaFree(w));
}

int main(int argc, char** argv) {
  quick = argc > 1 && std::string(argv[1]) == "--quick";
  shipped = argc > 1 && std::string(argv[1]) == "--shipped";
  int dev = 0, l2 = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  std::mt19937 rng(1234);
  // The 15 shapes of the benchmark as (rows, hidden), and a few more hidden sizes.
  const std::vector<std::pair<int64_t, int>> shapes = {
      {1024, 2048}, {2048, 2048}, {4096, 2048}, {8192, 2048}, {8192, 3072}, {16384, 3072}, {128, 4096},
      {512, 4096},  {1024, 4096}, {2048, 4096}, {4096, 4096}, {8192, 4096}, {16384, 4096}, {64, 8192},
      {4096, 8192}, {2048, 5120}, {4096, 1024}, {32768, 4096}};
  if (quick) {
    for (int fused = 0; fused < 2; ++fused)
      for (const auto& [rows, hidden] : std::vector<std::pair<int64_t, int>>{{2048, 4096}, {8192, 4096}, {16384, 3072}}) {
        sweep<__nv_bfloat16>("bfloat16", rows, hidden, fused, l2, dev, rng);
        sweep<__half>("float16", rows, hidden, fused, l2, dev, rng);
      }
    return 0;
  }
  for (int fused = 0; fused < 2; ++fused)
    for (const auto& [rows, hidden] : shapes) {
      sweep<__nv_bfloat16>("bfloat16", rows, hidden, fused, l2, dev, rng);
      sweep<__half>("float16", rows, hidden, fused, l2, dev, rng);
      sweep<float>("float32", rows, hidden, fused, l2, dev, rng);
    }
  return 0;
}
