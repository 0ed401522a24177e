// float32, bfloat16 and float16 matrix products through cuBLASLt (float32 accumulation for all three), with the
// algorithm chosen once per shape, and epilogues (bias, bias gradient) fused into the GEMM for linear.
//
// Why: cuBLAS's default choice is not the fastest for the skinny products of a small network. A 64x9216 times
// 9216x128 product ran as a SIMT sgemm plus a split-K reduction, and it and its backward products took several
// times their floor (docs/BENCHMARKS.md). So, as the convolutions do
// (conv2d.cpp), the first call of each shape asks cuBLASLt's heuristic for up to kMaxCandidates algorithms, runs
// each on the real buffers and keeps the fastest; later calls only launch it.
//
// A plan is keyed by the shape (batch, m, n, k, transposes, row and batch strides), the data type, the epilogue,
// the compute type (TF32 or full FP32; always full FP32 for the 16-bit types, whose inputs TF32 could not widen), whether candidates may be timed (timed_algorithm_search(), the rule the convolutions use: each
// setting keeps its own choices), the alignment of the three pointers (the heuristic only offers algorithms the
// buffers' alignment allows, and views such as a data loader's batch rows start anywhere), and the device. With the benchmark
// setting off, in deterministic mode, or during CUDA-graph capture (where nothing runs, so nothing can be timed),
// the heuristic's first algorithm is taken and kept: run one step eagerly before capturing to get the measured
// choice.
//
// The deterministic setting needs no filter here beyond choosing untimed (a timed choice may differ between
// runs): cuBLAS documents every routine as bitwise reproducible from run to run on one stream (its "Results
// reproducibility" section; cublasLtMatmul given its own workspace, as here), and no cuBLASLt split-K reduction
// scheme adds with atomics: INPLACE orders the parts with counters ("to guarantee the sequentiality",
// cublasLt.h), COMPUTE_TYPE and OUTPUT_TYPE reduce in a separate pass. For the 16-bit types OUTPUT_TYPE is
// excluded: it would add the split-K parts in bfloat16 / float16, and these products accumulate in float32
// throughout (PyTorch with allow_bf16/fp16_reduced_precision_reduction off).
//
// Epilogues (matmul_fused): the bias vector's (and the bias gradient's) pointer is an attribute of the plan's
// descriptor, set before each launch under the plan's own lock, so one plan serves any bias. Where cuBLASLt has
// no algorithm for an epilogue (a dtype, layout or alignment it does not fuse), the plan remembers that and
// matmul_fused returns false; the caller composes instead.
#include "cuda/matmul.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/context.h"
#include "cuda/per_device.h"
#include "cuda/timing.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {

cublasLtHandle_t cublaslt() {
  static PerDevice<cublasLtHandle_t> handles;  // never destroyed: plans and tensors may outlive statics
  return handles.get([](int) {
    cublasLtHandle_t h = nullptr;
    MINIDL_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  });
}

namespace {

// A split-K algorithm's scratch is a few partial output tiles; more than this is not worth holding.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{32} << 20;
// The heuristic's ranking rarely puts the fastest beyond its first few (most alternatives differ in tile shape
// and split count); each candidate costs a few runs at the shape's first use.
constexpr int kMaxCandidates = 8;
// Pointer alignment the key distinguishes: 16 bytes allows the vectorised and TMA loads; beyond that nothing
// changes. Elements are 2 (bfloat16, float16) or 4 bytes (float32) wide, so pointers are aligned at least that much.
constexpr std::uintptr_t kMaxAlignment = 16;

struct DescDeleter {
  void operator()(cublasLtMatmulDesc_t d) const { cublasLtMatmulDescDestroy(d); }
};
struct LayoutDeleter {
  void operator()(cublasLtMatrixLayout_t l) const { cublasLtMatrixLayoutDestroy(l); }
};
struct PreferenceDeleter {
  void operator()(cublasLtMatmulPreference_t p) const { cublasLtMatmulPreferenceDestroy(p); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, LayoutDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, PreferenceDeleter>;

/// A column-major rows x cols matrix of `type` with leading dimension ld, repeated `batch` times `stride` apart.
Layout make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld, std::int64_t batch,
                   std::int64_t stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  MINIDL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<std::uint64_t>(rows),
                                                 static_cast<std::uint64_t>(cols), ld));
  Layout layout(raw);
  if (batch > 1) {
    const auto count = static_cast<std::int32_t>(batch);
    MINIDL_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    MINIDL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof(stride)));
  }
  return layout;
}

/// One product's shape as the caller sees it (row-major), and what else decides the algorithm.
struct Problem {
  std::int64_t batch, m, n, k;
  bool ta, tb;
  std::int64_t lda, ldb, stride_a, stride_b;  // as kernels::MatmulOperand's
  cudaDataType_t type;                        // of a, b, out and the epilogue's vector
  cublasLtEpilogue_t epilogue;
  cublasComputeType_t compute;
  bool benchmark;
  std::uint32_t align_a, align_b, align_out;  // bytes
};

const char* type_name(cudaDataType_t t) {
  return t == CUDA_R_16BF ? "bfloat16" : t == CUDA_R_16F ? "float16" : "float32";
}

const char* epilogue_name(cublasLtEpilogue_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_BIAS: return ", bias epilogue";
    case CUBLASLT_EPILOGUE_BGRADA: return ", bias gradient epilogue (BGRADA)";
    case CUBLASLT_EPILOGUE_BGRADB: return ", bias gradient epilogue (BGRADB)";
    default: return "";
  }
}

std::uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t a = kMaxAlignment;
  while (v % a != 0) a /= 2;
  return static_cast<std::uint32_t>(a);
}

kernels::MatmulLayout layout_of(const Problem& p) {
  return {p.batch, p.m, p.n, p.k, {p.ta, p.lda, p.stride_a}, {p.tb, p.ldb, p.stride_b}};
}

std::string describe(const Problem& p) {
  const std::string strides =
      layout_of(p).is_dense() ? ""
                              : detail::str(", rows ", p.lda, "/", p.ldb, " and matrices ", p.stride_a, "/",
                                            p.stride_b, " elements apart");
  return detail::str("matmul batch ", p.batch, ", ", p.m, "x", p.k, (p.ta ? " (a transposed)" : ""), " times ", p.k,
                     "x", p.n, (p.tb ? " (b transposed)" : ""), ", ", type_name(p.type), epilogue_name(p.epilogue),
                     strides,
                     p.compute == CUBLAS_COMPUTE_32F_FAST_TF32 ? ", TF32 allowed" : "", ", alignment ", p.align_a,
                     "/", p.align_b, "/", p.align_out, " bytes",
                     p.benchmark ? "" : ", untimed (benchmark off or deterministic)");
}

/// Descriptors of one problem, created once, and its chosen algorithm.
struct Plan {
  // Row-major out = op(a)·op(b) is column-major out^T = op(b)^T·op(a)^T: cuBLASLt's A is minidl's b and its B
  // is minidl's a, each with its own transpose flag; out^T is n x m with leading dimension n.
  MatmulDesc desc;
  Layout lt_a, lt_b, lt_c;
  bool chosen = false;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace_bytes = 0;
  float time_ms = 0;       // 0 when chosen untimed
  float heuristic_ms = 0;  // the heuristic's first's time, for the report
  int candidates = 0;      // 0 once chosen: cuBLASLt has no algorithm (for an epilogue; without one, an error)
  mutable std::mutex vector_lock;  // held from setting the epilogue vector's pointer to the launch

  explicit Plan(const Problem& p) {
    cublasLtMatmulDesc_t raw = nullptr;
    MINIDL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw, p.compute, CUDA_R_32F));
    desc.reset(raw);
    const std::int32_t op_b = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    MINIDL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    MINIDL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
    if (p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      MINIDL_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_EPILOGUE, &p.epilogue, sizeof(p.epilogue)));
      const std::int32_t vector_type = p.type;
      MINIDL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(raw, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vector_type,
                                                         sizeof(vector_type)));
    }
    lt_a = p.tb ? make_layout(p.type, p.k, p.n, p.ldb, p.batch, p.stride_b)
                : make_layout(p.type, p.n, p.k, p.ldb, p.batch, p.stride_b);
    lt_b = p.ta ? make_layout(p.type, p.m, p.k, p.lda, p.batch, p.stride_a)
                : make_layout(p.type, p.k, p.m, p.lda, p.batch, p.stride_a);
    lt_c = make_layout(p.type, p.n, p.m, p.n, p.batch, p.m * p.n);
  }
};

/// The buffers of one product: a, b and out, and the epilogue's vector (bias or bias gradient; null: none).
struct Operands {
  const void* a;
  const void* b;
  void* out;
  void* vector;
};

/// Launches the plan's product (the scale type is float for every data type: alpha 1, beta 0).
cublasStatus_t run(const Plan& pl, const cublasLtMatmulAlgo_t& algo, void* workspace, std::size_t workspace_bytes,
                   const Operands& o) {
  const void *a = o.a, *b = o.b;
  void* out = o.out;
  if (o.vector) {
    MINIDL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(pl.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.vector,
                                                       sizeof(o.vector)));
  }
  const float one = 1.f, zero = 0.f;
  return cublasLtMatmul(cublaslt(), pl.desc.get(), &one, b, pl.lt_a.get(), a, pl.lt_b.get(), &zero, out,
                        pl.lt_c.get(), out, pl.lt_c.get(), &algo, workspace, workspace_bytes, stream());
}

/// cuBLASLt's candidates for the problem, best first by its own estimate, each within the workspace cap; none (an
/// empty list) only for an epilogue it does not fuse here.
std::vector<cublasLtMatmulHeuristicResult_t> candidates(const Plan& pl, const Problem& p) {
  cublasLtMatmulPreference_t raw = nullptr;
  MINIDL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw));
  const Preference pref(raw);
  const std::uint64_t max_workspace = kMaxWorkspaceBytes;
  MINIDL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                           &max_workspace, sizeof(max_workspace)));
  // The heuristic assumes 256-byte aligned buffers unless told otherwise. (cuBLASLt's A is minidl's b.)
  const std::pair<cublasLtMatmulPreferenceAttributes_t, std::uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, p.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, p.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, p.align_out},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, p.align_out}};
  for (const auto& [attr, bytes] : aligns) {
    MINIDL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw, attr, &bytes, sizeof(bytes)));
  }
  if (p.type != CUDA_R_32F) {  // split-K parts added in float32, never in the 16-bit output type
    const std::uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    MINIDL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(raw, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                             &schemes, sizeof(schemes)));
  }
  std::vector<cublasLtMatmulHeuristicResult_t> results(kMaxCandidates);
  int returned = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(cublaslt(), pl.desc.get(), pl.lt_a.get(), pl.lt_b.get(),
                                                           pl.lt_c.get(), pl.lt_c.get(), raw, kMaxCandidates,
                                                           results.data(), &returned);
  // NOT_SUPPORTED: no candidate, reported below; for an epilogue, any refusal means it is composed instead.
  if (st != CUBLAS_STATUS_SUCCESS && (st == CUBLAS_STATUS_NOT_SUPPORTED || p.epilogue != CUBLASLT_EPILOGUE_DEFAULT)) {
    returned = 0;
  } else {
    MINIDL_CUBLAS_CHECK(st);
  }
  std::vector<cublasLtMatmulHeuristicResult_t> usable;
  for (int i = 0; i < returned; ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[static_cast<std::size_t>(i)];
    if (r.state == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= kMaxWorkspaceBytes) usable.push_back(r);
  }
  if (!usable.empty() || p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) return usable;
  throw CudaError(detail::str(describe(p), ": cuBLASLt offers no algorithm within a workspace of ",
                              kMaxWorkspaceBytes, " bytes (", returned, " candidates)"));
}

/// Milliseconds per run of the algorithm: the mean of five runs after a warm-up run; negative when the warm-up run
/// fails (the candidate is then skipped).
template <class Run>
float time_algorithm(Run run) {
  if (run() != CUBLAS_STATUS_SUCCESS) return -1.f;
  return time_on_stream([&] { MINIDL_CUBLAS_CHECK(run()); }, 5);
}

/// Chooses pl's algorithm: the heuristic's first when nothing may be timed, else the fastest candidate on the
/// real buffers (ties go to the heuristic's order).
void choose(Plan& pl, const Problem& p, const Operands& o) {
  const std::vector<cublasLtMatmulHeuristicResult_t> usable = candidates(pl, p);
  pl.candidates = static_cast<int>(usable.size());
  if (usable.empty()) return;
  std::size_t pick = 0;
  if (p.benchmark && !stream_is_capturing()) {
    std::size_t bytes = 0;
    for (const auto& r : usable) bytes = std::max(bytes, r.workspaceSize);
    const Workspace ws(bytes, "the cuBLASLt algorithm search's workspace");
    float best = std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < usable.size(); ++i) {
      const float ms = time_algorithm([&] { return run(pl, usable[i].algo, ws.get(), bytes, o); });
      if (i == 0) pl.heuristic_ms = ms;
      if (ms >= 0 && ms < best) {
        best = ms;
        pick = i;
      }
    }
    if (best == std::numeric_limits<float>::infinity() && p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
      pl.candidates = 0;  // offered but none runs: composed instead
      return;
    }
    MINIDL_CHECK(best < std::numeric_limits<float>::infinity(), CudaError, describe(p), ": none of cuBLASLt's ",
                 usable.size(), " candidate algorithms ran");
    pl.time_ms = best;
  }
  pl.algo = usable[pick].algo;
  pl.workspace_bytes = usable[pick].workspaceSize;
}

using Key = std::array<std::int64_t, 18>;

Key make_key(const Problem& p) {
  return {p.batch, p.m, p.n, p.k, p.ta, p.tb, p.lda, p.ldb, p.stride_a, p.stride_b, static_cast<std::int64_t>(p.type),
          static_cast<std::int64_t>(p.epilogue), static_cast<std::int64_t>(p.compute), p.benchmark, p.align_a,
          p.align_b, p.align_out, current_device()};
}

/// Every plan of the process; plans live until the process ends and are not changed once chosen, so callers
/// use them outside the lock.
struct PlanCache {
  std::mutex mutex;
  std::map<Key, std::pair<Problem, std::unique_ptr<Plan>>> plans;
};
PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

template <class T>
T algo_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  std::size_t written = 0;
  MINIDL_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

std::string describe_choice(const Plan& pl) {
  if (pl.candidates == 0) return "no cuBLASLt algorithm fuses this epilogue: composed instead";
  std::string s = detail::str(
      "cuBLASLt algorithm ", algo_config<std::int32_t>(pl.algo, CUBLASLT_ALGO_CONFIG_ID), " (tile ",
      algo_config<std::uint32_t>(pl.algo, CUBLASLT_ALGO_CONFIG_TILE_ID), ", split-K ",
      algo_config<std::int32_t>(pl.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), ", reduction scheme ",
      algo_config<std::uint32_t>(pl.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME), "), workspace ", pl.workspace_bytes,
      " bytes");
  if (pl.time_ms <= 0) {
    return s + ", chosen untimed (benchmark off, deterministic, or first seen during graph capture) from " +
           std::to_string(pl.candidates) + " candidates";
  }
  const std::string first = pl.heuristic_ms < 0 ? "failed to run" : detail::str(pl.heuristic_ms, " ms");
  return s + detail::str(", ", pl.time_ms, " ms (heuristic's first: ", first, "; ", pl.candidates, " candidates)");
}

}  // namespace

bool lt_matmul(const void* a, const void* b, void* out, cudaDataType_t type, const kernels::MatmulLayout& l,
               cublasLtEpilogue_t epilogue, void* vector) {
  if (l.k == 0) {  // an empty sum; cuBLASLt rejects zero-sized layouts
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT) return false;
    const std::size_t element = type == CUDA_R_32F ? 4 : 2;
    MINIDL_CUDA_CHECK(cudaMemsetAsync(out, 0, static_cast<std::size_t>(l.batch * l.m * l.n) * element, stream()));
    return true;
  }
  const cublasComputeType_t compute = type == CUDA_R_32F && cuda::allow_tf32_matmul() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                       : CUBLAS_COMPUTE_32F;
  const Problem p{l.batch, l.m, l.n, l.k, l.a.trans, l.b.trans, l.a.ld, l.b.ld, l.a.batch_stride, l.b.batch_stride,
                  type, epilogue, compute, timed_algorithm_search(), alignment(a), alignment(b), alignment(out)};
  const Operands operands{a, b, out, vector};
  const Plan* plan = nullptr;
  {
    PlanCache& cache = plan_cache();
    std::lock_guard<std::mutex> lock(cache.mutex);
    auto& entry = cache.plans[make_key(p)];
    if (!entry.second) entry = {p, std::make_unique<Plan>(p)};
    if (!entry.second->chosen) {
      choose(*entry.second, p, operands);
      entry.second->chosen = true;
    }
    plan = entry.second.get();
  }
  if (plan->candidates == 0) return false;
  const Workspace ws(plan->workspace_bytes, "the cuBLASLt workspace");
  std::unique_lock<std::mutex> vector_lock(plan->vector_lock, std::defer_lock);
  if (vector) vector_lock.lock();
  MINIDL_CUBLAS_CHECK(run(*plan, plan->algo, ws.get(), plan->workspace_bytes, operands));
  return true;
}

// The backend's matmul entries (see kernels/backend.h): float32, bfloat16 and float16 through lt_matmul, float64
// through cuBLAS.
namespace {
using i64 = std::int64_t;

cudaDataType_t lt_type(DType dt) {
  return dt == kBFloat16 ? CUDA_R_16BF : dt == kFloat16 ? CUDA_R_16F : CUDA_R_32F;
}

/// cuBLAS takes sizes and leading dimensions as int (the batch strides are 64-bit).
void check_int_sizes(const Tensor& a, const Tensor& b, const kernels::MatmulLayout& l) {
  for (const auto& [name, v] : {std::pair<const char*, i64>{"batch", l.batch}, {"m", l.m}, {"n", l.n}, {"k", l.k},
                                {"lda", l.a.ld}, {"ldb", l.b.ld}}) {
    MINIDL_CHECK(v <= std::numeric_limits<int>::max(), ValueError, "matmul: ", name, " = ", v,
                 " exceeds cuBLAS's limit of ", std::numeric_limits<int>::max(), " (shapes ", shape_str(a.sizes()),
                 " and ", shape_str(b.sizes()), ")");
  }
}
}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& l) {
  if (out.numel() == 0) return;
  const DType dt = out.dtype();
  MINIDL_CHECK(dt == kFloat32 || dt == kFloat64 || is_reduced_floating_point(dt), TypeError,
               "matmul: CUDA takes float32, float64, bfloat16 and float16 operands; found ", dt);
  check_int_sizes(a, b, l);
  // float32, bfloat16 and float16 go through cuBLASLt with an algorithm timed per shape (above).
  if (dt != kFloat64) {
    lt_matmul(a.data_ptr(), b.data_ptr(), out.data_ptr(), lt_type(dt), l);
    return;
  }
  // Row-major C = op(A)·op(B) is column-major C^T = op(B)^T·op(A)^T: swap the operands, keep the flags.
  const cublasOperation_t opb = l.b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, opa = l.a.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = static_cast<int>(l.b.ld), lda = static_cast<int>(l.a.ld), ldc = static_cast<int>(l.n);
  const double alpha = 1.0, beta = 0.0;
  MINIDL_CUBLAS_CHECK(cublasDgemmStridedBatched(
      cublas(), opb, opa, static_cast<int>(l.n), static_cast<int>(l.m), static_cast<int>(l.k), &alpha,
      b.data_ptr<double>(), ldb, l.b.batch_stride, a.data_ptr<double>(), lda, l.a.batch_stride, &beta,
      out.data_ptr<double>(), ldc, l.m * l.n, static_cast<int>(l.batch)));
}

bool matmul_fused(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& l,
                  const kernels::MatmulEpilogue& e) {
  const DType dt = out.dtype();
  if (dt == kFloat64 || !is_floating_point(dt) || out.numel() == 0 || l.k == 0 || l.batch != 1) return false;
  check_int_sizes(a, b, l);
  // cuBLASLt's column-major D = out^T is n x m, its A is minidl's b and its B minidl's a: the bias (n values) runs
  // along D's rows, and op(a)'s row sums over k are BGRADB's, op(b)'s column sums BGRADA's.
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* vector = nullptr;
  if (e.bias_grad_a) {
    epilogue = CUBLASLT_EPILOGUE_BGRADB;
    vector = e.bias_grad_a->data_ptr();
  } else if (e.bias_grad_b) {
    epilogue = CUBLASLT_EPILOGUE_BGRADA;
    vector = e.bias_grad_b->data_ptr();
  } else if (e.bias) {
    epilogue = CUBLASLT_EPILOGUE_BIAS;
    vector = e.bias->data_ptr();
  } else {
    return false;
  }
  // The vector's alignment is not part of the heuristic's question: only vectors as aligned as any allocation's
  // start (a parameter, a fresh gradient) are handed to it.
  if (vector && alignment(vector) < kMaxAlignment) return false;
  return lt_matmul(a.data_ptr(), b.data_ptr(), out.data_ptr(), lt_type(dt), l, epilogue, vector);
}

std::vector<std::string> matmul_algorithm_choices() {
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::vector<std::string> lines;
  for (const auto& [key, entry] : cache.plans) {
    if (entry.second && entry.second->chosen) {
      lines.push_back(detail::str(describe(entry.first), ", cuda:", key.back(), ": ", describe_choice(*entry.second)));
    }
  }
  return lines;
}

}  // namespace gpu
}  // namespace minidl
