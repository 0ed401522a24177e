// Which of cuBLASLt's algorithms compute minidl's 16-bit products correctly: for bfloat16 and float16 products in
// the layout convention of src/cuda/matmul.cu (row-major operands handed to cuBLASLt as their column-major
// transposes, float32 accumulation, split-K parts never added in the 16-bit type), every candidate the heuristic
// offers is run on random operands and checked against a float64 product on the host, with the bias epilogue
// (linear's forward) and the bias-gradient epilogue (its weight gradient) as well. The workspace is filled with
// garbage before each run, as a caching allocator's reused block may be. Prints one line per candidate (its
// configuration: algorithm id, tile, stages, split-K count, reduction scheme) and a summary; a candidate that is
// wrong for some layout is one matmul.cu must not choose.
//
//   bench/cublaslt_candidates            # all layouts
//   bench/cublaslt_candidates --wrong    # only the candidates that were wrong
#include <cublasLt.h>
#include <minidl/float16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace {

using i64 = std::int64_t;

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", what, static_cast<int>(s));
    std::exit(1);
  }
}
void check(cudaError_t s, const char* what) {
  if (s != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(s));
    std::exit(1);
  }
}

/// A 16-bit value of cuBLAS type t from a float (round to nearest even), and back.
std::uint16_t to_bits(float f, cudaDataType_t t) {
  return t == CUDA_R_16BF ? minidl::BFloat16(f).bits : minidl::Half(f).bits;
}
double from_bits(std::uint16_t b, cudaDataType_t t) {
  return t == CUDA_R_16BF ? static_cast<float>(minidl::BFloat16::from_bits(b))
                          : static_cast<float>(minidl::Half::from_bits(b));
}

enum class Epilogue { None, Bias, BiasGradB };

/// One product as matmul.cu sees it: row-major out (m x n) = op(a) (m x k) · op(b) (k x n), dense operands (a
/// stored k x m when ta, b stored n x k when tb), `offset` elements past a 256-byte aligned start.
struct Problem {
  cudaDataType_t type;
  i64 m, n, k;
  bool ta, tb;
  Epilogue epilogue;
  i64 offset;
};

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  check(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written), "AlgoConfigGetAttribute");
  return v;
}

struct Device16 {
  void* p = nullptr;
  explicit Device16(std::size_t elements) { check(cudaMalloc(&p, 2 * elements + 64), "cudaMalloc"); }
  ~Device16() { cudaFree(p); }
  char* at(i64 offset) const { return static_cast<char*>(p) + 2 * offset; }
};

/// Runs every candidate of `pr`; returns {candidates run, wrong}.
std::pair<int, int> sweep(cublasLtHandle_t handle, const Problem& pr, bool only_wrong) {
  const cudaDataType_t t = pr.type;
  std::mt19937 rng(static_cast<unsigned>(pr.m * 131 + pr.n * 17 + pr.k + pr.ta * 7 + pr.tb * 3));
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> a(static_cast<std::size_t>(pr.m * pr.k)), b(static_cast<std::size_t>(pr.k * pr.n)),
      bias(static_cast<std::size_t>(pr.n));
  for (auto* v : {&a, &b, &bias})
    for (auto& x : *v) x = to_bits(normal(rng), t);
  const auto a_at = [&](i64 i, i64 p) { return from_bits(a[pr.ta ? p * pr.m + i : i * pr.k + p], t); };
  const auto b_at = [&](i64 p, i64 j) { return from_bits(b[pr.tb ? j * pr.k + p : p * pr.n + j], t); };
  std::vector<double> ref(static_cast<std::size_t>(pr.m * pr.n)), ref_grad(static_cast<std::size_t>(pr.m), 0.0);
  double largest = 0;
  for (i64 i = 0; i < pr.m; ++i) {
    for (i64 j = 0; j < pr.n; ++j) {
      double s = pr.epilogue == Epilogue::Bias ? from_bits(bias[j], t) : 0.0;
      for (i64 p = 0; p < pr.k; ++p) s += a_at(i, p) * b_at(p, j);
      ref[i * pr.n + j] = s;
      largest = std::max(largest, std::fabs(s));
    }
    for (i64 p = 0; p < pr.k && pr.epilogue == Epilogue::BiasGradB; ++p) ref_grad[i] += a_at(i, p);
  }

  const Device16 da(a.size()), db(b.size()), dout(ref.size()), dvec(std::max(pr.m, pr.n));
  check(cudaMemcpy(da.at(pr.offset), a.data(), 2 * a.size(), cudaMemcpyHostToDevice), "upload a");
  check(cudaMemcpy(db.at(pr.offset), b.data(), 2 * b.size(), cudaMemcpyHostToDevice), "upload b");
  constexpr std::size_t kWorkspace = std::size_t{32} << 20;  // matmul.cu's cap
  void* workspace = nullptr;
  check(cudaMalloc(&workspace, kWorkspace), "cudaMalloc workspace");

  cublasLtMatmulDesc_t desc = nullptr;
  check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
  const std::int32_t op_b = pr.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = pr.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)), "TRANSA");
  check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)), "TRANSB");
  void* vec = dvec.at(0);
  if (pr.epilogue != Epilogue::None) {
    const cublasLtEpilogue_t e = pr.epilogue == Epilogue::Bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_BGRADB;
    const std::int32_t vector_type = t;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof(e)), "EPILOGUE");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vector_type, sizeof(vector_type)),
          "BIAS_DATA_TYPE");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)), "BIAS_POINTER");
  }
  // cuBLASLt's A is minidl's b, its B minidl's a; its D is out transposed (n x m, leading dimension n).
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  check(pr.tb ? cublasLtMatrixLayoutCreate(&la, t, pr.k, pr.n, pr.k)
              : cublasLtMatrixLayoutCreate(&la, t, pr.n, pr.k, pr.n),
        "layout A");
  check(pr.ta ? cublasLtMatrixLayoutCreate(&lb, t, pr.m, pr.k, pr.m)
              : cublasLtMatrixLayoutCreate(&lb, t, pr.k, pr.m, pr.k),
        "layout B");
  check(cublasLtMatrixLayoutCreate(&lc, t, pr.n, pr.m, pr.n), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "PreferenceCreate");
  const std::uint64_t max_workspace = kWorkspace;
  check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                             sizeof(max_workspace)),
        "MAX_WORKSPACE_BYTES");
  const std::uint32_t align = pr.offset % 8 == 0 ? 16 : pr.offset % 2 == 0 ? 4 : 2;
  for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    check(cublasLtMatmulPreferenceSetAttribute(pref, attr, &align, sizeof(align)), "MIN_ALIGNMENT");
  }
  const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  check(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)),
      "REDUCTION_SCHEME_MASK");
  constexpr int kMaxCandidates = 32;
  std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
  int returned = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(handle, desc, la, lb, lc, lc, pref, kMaxCandidates, results.data(), &returned);
  const char* epilogue_name = pr.epilogue == Epilogue::Bias        ? " bias"
                              : pr.epilogue == Epilogue::BiasGradB ? " bgradb"
                                                                   : "";
  std::printf("%s m %lld n %lld k %lld%s%s%s offset %lld: %d candidates (heuristic status %d)\n",
              t == CUDA_R_16BF ? "bfloat16" : "float16", static_cast<long long>(pr.m), static_cast<long long>(pr.n),
              static_cast<long long>(pr.k), pr.ta ? " a^T" : "", pr.tb ? " b^T" : "", epilogue_name,
              static_cast<long long>(pr.offset), returned, static_cast<int>(hs));
  int ran = 0, wrong = 0;
  for (int r = 0; r < returned; ++r) {
    const cublasLtMatmulHeuristicResult_t& res = results[static_cast<std::size_t>(r)];
    if (res.state != CUBLAS_STATUS_SUCCESS || res.workspaceSize > kWorkspace) continue;
    check(cudaMemset(dout.p, 0xff, 2 * ref.size() + 64), "memset out");  // NaN: an unwritten element shows
    check(cudaMemset(workspace, 0x5a, kWorkspace), "memset workspace");
    check(cudaMemset(dvec.p, 0xff, 2 * static_cast<std::size_t>(std::max(pr.m, pr.n)) + 64), "memset vector");
    if (pr.epilogue == Epilogue::Bias) {
      check(cudaMemcpy(vec, bias.data(), 2 * bias.size(), cudaMemcpyHostToDevice), "upload bias");
    }
    const float one = 1.f, zero = 0.f;
    const cublasStatus_t st =
        cublasLtMatmul(handle, desc, &one, db.at(pr.offset), la, da.at(pr.offset), lb, &zero, dout.at(pr.offset), lc,
                       dout.at(pr.offset), lc, &res.algo, workspace, res.workspaceSize, nullptr);
    const cudaError_t ce = cudaDeviceSynchronize();
    std::vector<std::uint16_t> out(ref.size()), grad(static_cast<std::size_t>(pr.m));
    check(cudaMemcpy(out.data(), dout.at(pr.offset), 2 * out.size(), cudaMemcpyDeviceToHost), "download out");
    check(cudaMemcpy(grad.data(), vec, 2 * grad.size(), cudaMemcpyDeviceToHost), "download vector");
    // A 16-bit result rounds once (2^-8 relative for bfloat16) after a float32 sum: 2% of the element plus 1% of
    // the largest element is far above rounding and far below a missing or doubled term.
    i64 bad = 0, first_bad = -1;
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double e = std::fabs(from_bits(out[i], t) - ref[i]);
      if (!(e <= 2e-2 * std::fabs(ref[i]) + 1e-2 * largest + 1e-3)) {
        if (first_bad < 0) first_bad = static_cast<i64>(i);
        ++bad;
      }
    }
    i64 bad_grad = 0;
    for (i64 i = 0; i < pr.m && pr.epilogue == Epilogue::BiasGradB; ++i) {
      const double e =
          std::fabs(from_bits(grad[static_cast<std::size_t>(i)], t) - ref_grad[static_cast<std::size_t>(i)]);
      if (!(e <= 2e-2 * std::fabs(ref_grad[static_cast<std::size_t>(i)]) + 1e-2 * std::sqrt(static_cast<double>(pr.k)) +
                     1e-3)) {
        ++bad_grad;
      }
    }
    const bool is_wrong = bad > 0 || bad_grad > 0 || st != CUBLAS_STATUS_SUCCESS || ce != cudaSuccess;
    ++ran;
    wrong += is_wrong;
    if (only_wrong && !is_wrong) continue;
    std::printf("  candidate %2d: algorithm %d tile %u stages %u split-K %d reduction %u swizzle %u, workspace %zu: %s",
                r, algo_config<std::int32_t>(res.algo, CUBLASLT_ALGO_CONFIG_ID),
                algo_config<std::uint32_t>(res.algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                algo_config<std::uint32_t>(res.algo, CUBLASLT_ALGO_CONFIG_STAGES_ID),
                algo_config<std::int32_t>(res.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM),
                algo_config<std::uint32_t>(res.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME),
                algo_config<std::uint32_t>(res.algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING), res.workspaceSize,
                is_wrong ? "WRONG" : "ok");
    if (is_wrong) {
      std::printf(" (status %d, %s; %lld of %zu elements off, the first %lld; %lld bias-gradient elements off)",
                  static_cast<int>(st), cudaGetErrorString(ce), static_cast<long long>(bad), out.size(),
                  static_cast<long long>(first_bad), static_cast<long long>(bad_grad));
    }
    std::printf("\n");
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(desc);
  cudaFree(workspace);
  return {ran, wrong};
}

}  // namespace

int main(int argc, char** argv) {
  const bool only_wrong = argc > 1 && std::strcmp(argv[1], "--wrong") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "cublaslt_candidates: no usable CUDA device (see `minidl info`)\n");
    return 1;
  }
  cublasLtHandle_t handle = nullptr;
  check(cublasLtCreate(&handle), "cublasLtCreate");
  std::printf("cuBLASLt %zu\n", cublasLtGetVersion());
  // test_matmul_lowp's shapes (odd sizes, rows of 12 or 14 bytes) with their backward products, and a GPT's.
  const i64 shapes[][3] = {{5, 6, 7},    {7, 6, 5},      {6, 17, 33},       {6, 33, 17},       {33, 17, 6},
                           {37, 21, 50}, {37, 50, 21},   {21, 50, 37},      {12, 6, 10},       {12, 10, 6},
                           {6, 10, 12},  {32, 32, 4096}, {1024, 384, 1152}, {1024, 1152, 384}, {384, 1152, 1024}};
  int ran = 0, wrong = 0;
  const auto add = [&](std::pair<int, int> r) {
    ran += r.first;
    wrong += r.second;
  };
  for (const cudaDataType_t t : {CUDA_R_16BF, CUDA_R_16F}) {
    for (const auto& s : shapes) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true})
          add(sweep(handle, {t, s[0], s[1], s[2], ta, tb, Epilogue::None, 0}, only_wrong));
      }
      add(sweep(handle, {t, s[0], s[1], s[2], false, true, Epilogue::Bias, 0}, only_wrong));  // linear's forward
      add(sweep(handle, {t, s[0], s[1], s[2], true, false, Epilogue::BiasGradB, 0},
                only_wrong));                                                                  // its weight gradient
      add(sweep(handle, {t, s[0], s[1], s[2], false, false, Epilogue::None, 1}, only_wrong));  // a view's start
    }
  }
  std::printf("%d of %d candidate runs wrong\n", wrong, ran);
  cublasLtDestroy(handle);
  return wrong == 0 ? 0 : 1;
}
