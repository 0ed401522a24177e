// 2-d convolution on the GPU (declared with the CPU version in kernels/backend.h): cuDNN's legacy API,
// with TF32 allowed and float data minidl's own implicit-GEMM kernels (conv2d_igemm.h) and staged kernels
// (conv2d_staged.h, each of their band choices), or for short reductions (at most 32 taps) minidl's direct
// kernels (conv2d_direct.h), whichever is fastest. bfloat16 / float16 data runs on cuDNN alone, on tensor cores
// with float32 accumulation (the convolution descriptor's compute type); the own kernels are float / double.
//
// Algorithm choice: the first call of each pass for a shape (all Conv2dParams fields, dtype, the TF32 and
// deterministic settings, the device) times the candidates with cudnnFind*AlgorithmEx, which runs kernels and
// synchronises the stream, times the own kernel the same way, and caches the winner; later calls only launch.
// During CUDA-graph capture that search is impossible, so a shape first seen while capturing takes the own
// kernel where it applies (the direct one first, then the staged one with its cost model's band choice, then the
// implicit GEMM) and cuDNN's heuristic choice otherwise (and keeps it): run one step eagerly before capturing to
// get the measured choice. cuda::conv2d_algorithm_choices() reports what was chosen.
#include "kernels/backend.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/activation.h"
#include "cuda/context.h"
#include "cuda/conv2d_direct.h"
#include "cuda/conv2d_igemm.h"
#include "cuda/conv2d_staged.h"
#include "cuda/cudnn_tensor.h"
#include "cuda/reduce.h"
#include "cuda/timing.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::Conv2dParams;

// Algorithms that need more scratch than this are not considered: a faster convolution is not worth holding
// gigabytes of workspace that the caching allocator then keeps.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{256} << 20;

enum Pass { kForward, kBackwardData, kBackwardFilter, kNumPasses };
const char* const kPassNames[kNumPasses] = {"conv2d forward", "conv2d backward (input)",
                                            "conv2d backward (weight)"};

class FilterDescriptor {
 public:
  FilterDescriptor() { MINIDL_CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_)); }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor() { MINIDL_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_)); }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

/// What besides the shape decides the algorithm: data type, math type (TF32 allowed or FMA only), whether
/// nondeterministic algorithms are excluded, and whether candidates are timed (timed_algorithm_search()).
struct Settings {
  cudnnDataType_t type;
  cudnnMathType_t math;
  cudnnDataType_t compute;  // the accumulation type: type itself, float32 for 16-bit data
  bool deterministic;
  bool benchmark;
};

template <class T>
Settings current_settings() {
  // FMA math keeps float convolutions in full precision (results match the CPU); tensor-op math offers cuDNN
  // the TF32 tensor-core kernels (with the default math type its search kept to SIMT kernels). Double has no
  // TF32 path, so its math type stays the default.
  // 16-bit data takes the tensor cores (exact products, float32 sums) whatever the TF32 setting says.
  const bool is_float = std::is_same<T, float>::value;
  constexpr bool lowp = kernels::is_reduced_float_v<T>;
  const cudnnMathType_t math = lowp        ? CUDNN_TENSOR_OP_MATH
                               : !is_float ? CUDNN_DEFAULT_MATH
                               : cuda::allow_tf32_conv() ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
  const cudnnDataType_t compute = lowp ? CUDNN_DATA_FLOAT : cudnn_type<T>::value;
  return {cudnn_type<T>::value, math, compute, deterministic(), timed_algorithm_search()};
}

std::string describe(const Conv2dParams& p) {
  return detail::str("input ", p.N, "x", p.C, "x", p.H, "x", p.W, ", weight ", p.K, "x", p.C / p.groups, "x", p.R,
                     "x", p.S, ", stride ", p.stride_h, "x", p.stride_w, ", padding ", p.pad_h, "x", p.pad_w,
                     ", dilation ", p.dil_h, "x", p.dil_w, ", groups ", p.groups);
}

/// Who runs a pass: cuDNN (its algorithm `algo`) or one of minidl's own kernels.
enum class Impl { kCudnn, kImplicitGemm, kStaged, kDirect };

struct Algorithm {
  int algo = 0;
  std::size_t workspace_bytes = 0;
  float time_ms = 0;  // as measured by the search; 0 when chosen without timing
  Impl impl = Impl::kCudnn;
  float cudnn_ms = 0;  // cuDNN's pick's time, also when an own kernel won (for conv2d_algorithm_choices)
  int bands = 0;       // the staged kernels' launch choice (see staged_band_choices)
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // a cuDNN algorithm's math type, set on the pass's descriptor
};

/// Descriptors of one shape and settings, and the algorithm of each pass once chosen.
struct Plan {
  TensorDescriptor x, y, bias;
  FilterDescriptor w;
  // One convolution descriptor per pass, because each carries the math type its pass's algorithm was timed with.
  ConvolutionDescriptor conv[kNumPasses];
  bool chosen[kNumPasses] = {false, false, false};
  Algorithm algo[kNumPasses];

  Plan(const Conv2dParams& p, const Settings& s, const char* op) {
    MINIDL_CHECK(p.C % p.groups == 0, ValueError, op, ": input channels (", p.C, ") must be divisible by groups (",
                 p.groups, ")");
    const int n = cudnn_dim(p.N, op, "batch size"), c = cudnn_dim(p.C, op, "input channels");
    const int k = cudnn_dim(p.K, op, "out_channels");
    x.set_nchw(s.type, n, c, cudnn_dim(p.H, op, "input height"), cudnn_dim(p.W, op, "input width"), op);
    bias.set_nchw(s.type, 1, k, 1, 1, op);
    MINIDL_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w.get(), s.type, CUDNN_TENSOR_NCHW, k, c / static_cast<int>(p.groups),
                                                  cudnn_dim(p.R, op, "kernel height"),
                                                  cudnn_dim(p.S, op, "kernel width")));
    for (ConvolutionDescriptor& d : conv) {
      MINIDL_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          d.get(), cudnn_dim(p.pad_h, op, "padding"), cudnn_dim(p.pad_w, op, "padding"),
          cudnn_dim(p.stride_h, op, "stride"), cudnn_dim(p.stride_w, op, "stride"),
          cudnn_dim(p.dil_h, op, "dilation"), cudnn_dim(p.dil_w, op, "dilation"), CUDNN_CROSS_CORRELATION, s.compute));
      MINIDL_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d.get(), cudnn_dim(p.groups, op, "groups")));
      MINIDL_CUDNN_CHECK(cudnnSetConvolutionMathType(d.get(), s.math));
    }
    // The output size comes from Conv2dParams::finalize(); cuDNN's own computation must agree, which also
    // catches parameters that were never finalized.
    int on = 0, ok = 0, op_h = 0, oq = 0;
    MINIDL_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv[0].get(), x.get(), w.get(), &on, &ok, &op_h, &oq));
    MINIDL_CHECK(op_h == p.P && oq == p.Q, ValueError, op, ": output size ", p.P, "x", p.Q,
                 " in the parameters disagrees with cuDNN's ", op_h, "x", oq, " for ", describe(p),
                 " (were the parameters finalized?)");
    y.set_nchw(s.type, n, k, op_h, oq, op);
  }
};

using Key = std::array<std::int64_t, 19>;

Key make_key(const Conv2dParams& p, const Settings& s) {
  return {p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w, p.groups,
          static_cast<std::int64_t>(s.type), static_cast<std::int64_t>(s.math), s.deterministic ? 1 : 0,
          s.benchmark ? 1 : 0, current_device()};
}

/// Whether the search may run candidates to time them: not with the benchmark setting off or in deterministic
/// mode (timed_algorithm_search()), and not during graph capture, where nothing runs.
bool may_time(const Settings& s) { return s.benchmark && !stream_is_capturing(); }

// cuDNN's list of nondeterministic algorithms (they accumulate with atomics).
bool never_excluded(int) { return false; }
bool nondeterministic_backward_data(int algo) { return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0; }
bool nondeterministic_backward_filter(int algo) {
  return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

/// cuDNN's candidates for one pass that satisfy the settings, best first (retime settles the choice).
/// `probe(algo, &bytes)` asks one algorithm's workspace size; `find(count, &returned, results, workspace, bytes)`
/// times the candidates on the real buffers; `heuristic(count, &returned, results)` ranks them without running
/// anything (used when may_time(s) is false, and then the candidates carry no times).
template <class Perf, class Probe, class Find, class Heuristic>
std::vector<Algorithm> choose_algorithm(Pass pass, int algo_count, const Settings& s, bool (*excluded)(int),
                           const Conv2dParams& p, Probe probe, Find find,
                           Heuristic heuristic) {
  std::vector<Perf> results(static_cast<std::size_t>(algo_count));
  int returned = 0;
  std::size_t limit = kMaxWorkspaceBytes;
  if (!may_time(s)) {
    heuristic(algo_count, &returned, results.data());
  } else {
    // Give the search as much workspace as the hungriest algorithm under the cap needs, so none is skipped
    // for lack of scratch.
    std::size_t bytes = 0;
    for (int a = 0; a < algo_count; ++a) {
      std::size_t need = 0;
      if (probe(a, &need) == CUDNN_STATUS_SUCCESS && need <= kMaxWorkspaceBytes) bytes = std::max(bytes, need);
    }
    // cuDNN times each candidate once, one after another. Right after an idle period the GPU's clock is still
    // ramping up, so the first candidates are timed slow and the ranking is skewed (a search picked a SIMT
    // kernel that a later search timed slower than a tensor-op one). The first search only
    // warms the GPU up; the second one ranks.
    const Workspace ws(bytes, "the cuDNN algorithm search's workspace");
    find(algo_count, &returned, results.data(), ws.get(), bytes);
    find(algo_count, &returned, results.data(), ws.get(), bytes);
    limit = bytes;
  }
  std::vector<Algorithm> usable;
  for (int i = 0; i < returned; ++i) {
    const Perf& r = results[static_cast<std::size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
    if (s.math == CUDNN_FMA_MATH && r.mathType != CUDNN_FMA_MATH) continue;
    if (s.deterministic && (r.determinism != CUDNN_DETERMINISTIC || excluded(static_cast<int>(r.algo)))) continue;
    Algorithm a;
    a.algo = static_cast<int>(r.algo);
    a.workspace_bytes = r.memory;
    a.time_ms = a.cudnn_ms = may_time(s) ? r.time : 0.0f;
    a.math = r.mathType;
    usable.push_back(a);
  }
  if (!usable.empty()) return usable;
  throw CudaError(detail::str(kPassNames[pass], ": cuDNN offers no algorithm for ", describe(p),
                              s.deterministic ? " that is deterministic" : "",
                              s.math == CUDNN_FMA_MATH ? " in full FP32 precision (TF32 off)" : "",
                              " within a workspace of ", limit, " bytes (", returned, " candidates)"));
}

/// Milliseconds per run of `launch`: one warm-up run, then the mean of three (time_on_stream).
template <class Launch>
float warm_and_time(Launch launch) {
  launch();
  return time_on_stream(launch, 3);
}

/// `best`, or the own kernel `impl` (`launch` runs it) when it `applies` and is faster. The own kernels are
/// deterministic, so the deterministic setting keeps them. Where nothing may be timed (may_time) they are taken
/// untimed: on the small convolutions they were written for they beat every cuDNN algorithm.
template <class Launch>
Algorithm consider_own(const Algorithm& best, const Settings& s, Impl impl, bool applies, Launch launch,
                       int bands = 0) {
  if (!applies) return best;
  Algorithm own;
  own.impl = impl;
  own.bands = bands;
  own.algo = best.algo;  // cuDNN's pick, for the report
  own.cudnn_ms = best.cudnn_ms;
  if (!may_time(s)) return own;
  own.time_ms = warm_and_time(launch);
  return own.time_ms < best.time_ms ? own : best;
}

/// The implicit-GEMM kernels take float data with TF32 allowed (they multiply on TF32 tensor cores).
bool igemm_applies(const Conv2dParams& p, ConvPass pass, const Settings& s) {
  return s.math == CUDNN_TENSOR_OP_MATH && igemm_supports(p, pass);
}

/// `best`, or the staged kernels with the fastest of their band choices (TF32 allowed). Where nothing may be
/// timed, the first choice (the kernels' cost model's) is taken.
template <class Launch>
Algorithm consider_staged(const Algorithm& best, const Conv2dParams& p, ConvPass pass, const Settings& s,
                          Launch launch) {
  if (s.math != CUDNN_TENSOR_OP_MATH) return best;
  Algorithm pick = best;
  for (int bands : staged_band_choices(p, pass)) {
    pick = consider_own(pick, s, Impl::kStaged, true, [&] { launch(bands); }, bands);
    if (!may_time(s)) break;
  }
  return pick;
}

/// Every plan of the process, shared by all passes and data types. Plans live until the process ends.
struct PlanCache {
  std::mutex mutex;
  std::map<Key, std::unique_ptr<Plan>> plans;
};
PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

/// The plan for p under the current settings with `pass`'s algorithm chosen; `search(plan, settings)` picks it
/// on the first use. A plan's descriptors are not changed after the choice, so callers use them outside the lock.
template <class T, class Search>
const Plan& prepare(const Conv2dParams& p, Pass pass, Search search) {
  const Settings s = current_settings<T>();
  const Key key = make_key(p, s);
  PlanCache& cache = plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::unique_ptr<Plan>& plan = cache.plans[key];
  if (!plan) plan = std::make_unique<Plan>(p, s, kPassNames[pass]);
  if (!plan->chosen[pass]) {
    plan->algo[pass] = search(*plan, s);
    plan->chosen[pass] = true;
  }
  return *plan;
}

std::string describe_choice(const Algorithm& a) {
  std::string s = a.impl == Impl::kCudnn
                      ? detail::str("cuDNN algorithm ", a.algo, " (workspace ", a.workspace_bytes, " bytes)")
                  : a.impl == Impl::kImplicitGemm ? std::string("minidl implicit-GEMM kernel (TF32)")
                  : a.impl == Impl::kStaged       ? detail::str("minidl staged kernel (TF32, ", a.bands, " bands)")
                                                  : std::string("minidl direct kernel");
  if (a.time_ms <= 0) {
    return s + ", chosen untimed (cuDNN benchmark off, deterministic, or first seen during graph capture)";
  }
  s += detail::str(", ", a.time_ms, " ms");
  if (a.impl != Impl::kCudnn) s += detail::str(" (cuDNN's best: algorithm ", a.algo, ", ", a.cudnn_ms, " ms)");
  return s;
}


void require_pointers(bool all_set, Pass pass) {
  MINIDL_CHECK(all_set, ValueError, kPassNames[pass], ": a required device pointer is null");
}

// cuDNN's run of each pass with algorithm `a` (the math type is already set on the plan's descriptor).
template <class T>
void cudnn_forward(const Plan& pl, const Algorithm& a, const T* x, const T* w, const T* bias, T* y,
                   kernels::Activation act, std::int64_t y_size) {
  const cudnn_scale_t<T> one = 1, zero = 0;
  const Workspace ws(a.workspace_bytes, "the cuDNN workspace");
  MINIDL_CUDNN_CHECK(cudnnConvolutionForward(cudnn(), &one, pl.x.get(), x, pl.w.get(), w, pl.conv[kForward].get(),
                                             static_cast<cudnnConvolutionFwdAlgo_t>(a.algo), ws.get(),
                                             a.workspace_bytes, &zero, pl.y.get(), y));
  if (bias) MINIDL_CUDNN_CHECK(cudnnAddTensor(cudnn(), &one, pl.bias.get(), bias, &one, pl.y.get(), y));
  activate_in_place(act, y, y_size);
}
template <class T>
void cudnn_backward_input(const Plan& pl, const Algorithm& a, const T* dy, const T* w, T* dx) {
  const cudnn_scale_t<T> one = 1, zero = 0;
  const Workspace ws(a.workspace_bytes, "the cuDNN workspace");
  MINIDL_CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn(), &one, pl.w.get(), w, pl.y.get(), dy,
                                                  pl.conv[kBackwardData].get(),
                                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo), ws.get(),
                                                  a.workspace_bytes, &zero, pl.x.get(), dx));
}
template <class T>
void cudnn_backward_weight(const Plan& pl, const Algorithm& a, const T* x, const T* dy, T* dw) {
  const cudnn_scale_t<T> one = 1, zero = 0;
  const Workspace ws(a.workspace_bytes, "the cuDNN workspace");
  MINIDL_CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn(), &one, pl.x.get(), x, pl.y.get(), dy,
                                                    pl.conv[kBackwardFilter].get(),
                                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo),
                                                    ws.get(), a.workspace_bytes, &zero, pl.w.get(), dw));
}

/// Settles cuDNN's choice among `usable` (choose_algorithm's, fastest first). The candidates within kWindow of
/// cudnnFind's fastest (at most kMaxRetimed) are timed the way the own kernels are (warm_and_time: a warm-up,
/// then the mean of three runs), because cudnnFind times each once and those single runs of one algorithm varied
/// by a third between calls. Then the one with the least workspace within kTimeSlack of the fastest wins: the
/// fastest is often an FFT or Winograd variant holding 100+ MB of scratch for a few percent of speed, and that
/// scratch sets the step's peak memory (re-timed, such a variant's lead can vanish where cudnnFind's single runs
/// had put it more than 10% ahead). Untimed (may_time false), the heuristic's first wins.
/// `run(a)` launches candidate a; the winner's math type is left set on `conv`.
template <class Run>
Algorithm retime(std::vector<Algorithm> usable, const ConvolutionDescriptor& conv, const Settings& s, Run run) {
  constexpr float kWindow = 1.5f, kTimeSlack = 1.10f;
  constexpr std::size_t kMaxRetimed = 4;
  std::size_t pick = 0;
  if (may_time(s)) {
    std::size_t n = 1;
    while (n < std::min(usable.size(), kMaxRetimed) && usable[n].time_ms <= kWindow * usable.front().time_ms) ++n;
    usable.resize(n);
    for (Algorithm& a : usable) {
      MINIDL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), a.math));
      a.time_ms = a.cudnn_ms = warm_and_time([&] { run(a); });
    }
    for (std::size_t i = 1; i < n; ++i) {
      if (usable[i].time_ms < usable[pick].time_ms) pick = i;
    }
    const float fastest = usable[pick].time_ms;
    for (std::size_t i = 0; i < n; ++i) {
      if (usable[i].time_ms <= kTimeSlack * fastest && usable[i].workspace_bytes < usable[pick].workspace_bytes) pick = i;
    }
  }
  MINIDL_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), usable[pick].math));
  return usable[pick];
}

}  // namespace

template <class T>
void conv2d_forward(const Conv2dParams& p, const T* x, const T* w, const T* bias, T* y, kernels::Activation act) {
  require_pointers(x && w && y, kForward);
  const std::int64_t y_size = p.N * p.K * p.P * p.Q;
  cudnnHandle_t h = cudnn();
  const Plan& plan = prepare<T>(p, kForward, [&](Plan& pl, const Settings& s) {
    const ConvolutionDescriptor& conv = pl.conv[kForward];
    Algorithm best = retime(choose_algorithm<cudnnConvolutionFwdAlgoPerf_t>(
        kForward, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, s, never_excluded, p,
        [&](int a, std::size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, pl.x.get(), pl.w.get(), conv.get(), pl.y.get(),
                                                         static_cast<cudnnConvolutionFwdAlgo_t>(a), bytes);
        },
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* r, void* ws, std::size_t bytes) {
          MINIDL_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, pl.x.get(), x, pl.w.get(), w, conv.get(),
                                                                    pl.y.get(), y, n, got, r, ws, bytes));
        },
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
          MINIDL_CUDNN_CHECK(
              cudnnGetConvolutionForwardAlgorithm_v7(h, pl.x.get(), pl.w.get(), conv.get(), pl.y.get(), n, got, r));
        }),
        conv, s, [&](const Algorithm& a) { cudnn_forward(pl, a, x, w, bias, y, act, y_size); });
    if constexpr (std::is_same<T, float>::value) {
      best = consider_own(best, s, Impl::kImplicitGemm, igemm_applies(p, ConvPass::kForward, s),
                          [&] { igemm_conv2d_forward(p, x, w, bias, y, act); });
      best = consider_staged(best, p, ConvPass::kForward, s,
                             [&](int bands) { staged_conv2d_forward(p, x, w, bias, y, act, bands); });
    }
    if constexpr (kernels::is_reduced_float_v<T>) {
      return best;
    } else {
      return consider_own(best, s, Impl::kDirect, direct_conv_supports(p),
                          [&] { direct_conv2d_forward(p, x, w, bias, y, act); });
    }
  });
  const Algorithm& a = plan.algo[kForward];
  if constexpr (!kernels::is_reduced_float_v<T>) {
    if (a.impl == Impl::kDirect) return direct_conv2d_forward(p, x, w, bias, y, act);
  }
  if constexpr (std::is_same<T, float>::value) {
    if (a.impl == Impl::kImplicitGemm) return igemm_conv2d_forward(p, x, w, bias, y, act);
    if (a.impl == Impl::kStaged) return staged_conv2d_forward(p, x, w, bias, y, act, a.bands);
  }
  cudnn_forward(plan, a, x, w, bias, y, act, y_size);
}

template <class T>
void conv2d_backward_input(const Conv2dParams& p, const T* dy, const T* w, T* dx) {
  require_pointers(dy && w && dx, kBackwardData);
  cudnnHandle_t h = cudnn();
  const Plan& plan = prepare<T>(p, kBackwardData, [&](Plan& pl, const Settings& s) {
    const ConvolutionDescriptor& conv = pl.conv[kBackwardData];
    Algorithm best = retime(choose_algorithm<cudnnConvolutionBwdDataAlgoPerf_t>(
        kBackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, s, nondeterministic_backward_data, p,
        [&](int a, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, pl.w.get(), pl.y.get(), conv.get(), pl.x.get(),
                                                              static_cast<cudnnConvolutionBwdDataAlgo_t>(a), bytes);
        },
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r, void* ws, std::size_t bytes) {
          MINIDL_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
              h, pl.w.get(), w, pl.y.get(), dy, conv.get(), pl.x.get(), dx, n, got, r, ws, bytes));
        },
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
          MINIDL_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, pl.w.get(), pl.y.get(), conv.get(),
                                                                         pl.x.get(), n, got, r));
        }),
        conv, s, [&](const Algorithm& a) { cudnn_backward_input(pl, a, dy, w, dx); });
    if constexpr (std::is_same<T, float>::value) {
      best = consider_own(best, s, Impl::kImplicitGemm, igemm_applies(p, ConvPass::kBackwardInput, s),
                          [&] { igemm_conv2d_backward_input(p, dy, w, dx); });
      best = consider_staged(best, p, ConvPass::kBackwardInput, s,
                             [&](int bands) { staged_conv2d_backward_input(p, dy, w, dx, bands); });
    }
    return best;
  });
  const Algorithm& a = plan.algo[kBackwardData];
  if constexpr (std::is_same<T, float>::value) {
    if (a.impl == Impl::kImplicitGemm) return igemm_conv2d_backward_input(p, dy, w, dx);
    if (a.impl == Impl::kStaged) return staged_conv2d_backward_input(p, dy, w, dx, a.bands);
  }
  cudnn_backward_input(plan, a, dy, w, dx);
}

template <class T>
void conv2d_backward_weight(const Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias) {
  require_pointers(x && dy && dw, kBackwardFilter);
  cudnnHandle_t h = cudnn();
  const Plan& plan = prepare<T>(p, kBackwardFilter, [&](Plan& pl, const Settings& s) {
    const ConvolutionDescriptor& conv = pl.conv[kBackwardFilter];
    Algorithm best = retime(choose_algorithm<cudnnConvolutionBwdFilterAlgoPerf_t>(
        kBackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, s, nondeterministic_backward_filter, p,
        [&](int a, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              h, pl.x.get(), pl.y.get(), conv.get(), pl.w.get(), static_cast<cudnnConvolutionBwdFilterAlgo_t>(a),
              bytes);
        },
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r, void* ws, std::size_t bytes) {
          MINIDL_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
              h, pl.x.get(), x, pl.y.get(), dy, conv.get(), pl.w.get(), dw, n, got, r, ws, bytes));
        },
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
          MINIDL_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, pl.x.get(), pl.y.get(), conv.get(),
                                                                           pl.w.get(), n, got, r));
        }),
        conv, s, [&](const Algorithm& a) { cudnn_backward_weight(pl, a, x, dy, dw); });
    if constexpr (std::is_same<T, float>::value) {
      best = consider_own(best, s, Impl::kImplicitGemm, igemm_applies(p, ConvPass::kBackwardWeight, s),
                          [&] { igemm_conv2d_backward_weight(p, x, dy, dw); });
      // Timed without the bias gradient, which the layer computes apart (src/layers/conv2d.cpp).
      best = consider_staged(best, p, ConvPass::kBackwardWeight, s,
                             [&](int bands) { staged_conv2d_backward_weight(p, x, dy, dw, nullptr, bands); });
    }
    if constexpr (kernels::is_reduced_float_v<T>) {
      return best;
    } else {
      return consider_own(best, s, Impl::kDirect, direct_conv_supports(p),
                          [&] { direct_conv2d_backward_weight(p, x, dy, dw); });
    }
  });
  const Algorithm& a = plan.algo[kBackwardFilter];
  if constexpr (std::is_same<T, float>::value) {  // the staged kernel sums dy for the bias gradient itself
    if (a.impl == Impl::kStaged) return staged_conv2d_backward_weight(p, x, dy, dw, dbias, a.bands);
  }
  if constexpr (kernels::is_reduced_float_v<T>) {
    // The layer computes a 16-bit bias gradient with the sum op (float32 accumulation); none is asked for here.
    MINIDL_CHECK(dbias == nullptr, ValueError, kPassNames[kBackwardFilter],
                 ": internal error, a 16-bit bias gradient is the layer's (the sum op)");
    cudnn_backward_weight(plan, a, x, dy, dw);
  } else {
    if (a.impl == Impl::kDirect) {
      direct_conv2d_backward_weight(p, x, dy, dw);
    } else if (a.impl == Impl::kImplicitGemm) {
      if constexpr (std::is_same<T, float>::value) igemm_conv2d_backward_weight(p, x, dy, dw);  // float only
    } else {
      cudnn_backward_weight(plan, a, x, dy, dw);
    }
    // The other kernels leave the bias gradient to the sum op's reduction, faster than cuDNN's backward-bias
    // kernel.
    if (dbias) channel_sum(dy, p.N, p.K, p.P * p.Q, dbias);
  }
}

#define MINIDL_INSTANTIATE_CONV2D(T)                                                                     \
  template void conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*, kernels::Activation);               \
  template void conv2d_backward_input<T>(const Conv2dParams&, const T*, const T*, T*);                  \
  template void conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*, T*);
MINIDL_INSTANTIATE_CONV2D(float)
MINIDL_INSTANTIATE_CONV2D(double)
MINIDL_INSTANTIATE_CONV2D(BFloat16)
MINIDL_INSTANTIATE_CONV2D(Half)
#undef MINIDL_INSTANTIATE_CONV2D

}  // namespace gpu

namespace cuda {
std::vector<std::string> conv2d_algorithm_choices() {
  gpu::PlanCache& cache = gpu::plan_cache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  std::vector<std::string> lines;
  for (const auto& [key, plan] : cache.plans) {
    // key: N C H W K R S stride(2) pad(2) dilation(2) groups type math deterministic benchmark device
    const std::string shape =
        detail::str("cuda:", key[18], " input ", key[0], "x", key[1], "x", key[2], "x", key[3], ", weight ", key[4],
                    "x", key[1] / key[13], "x", key[5], "x", key[6], ", stride ", key[7], "x", key[8], ", padding ",
                    key[9], "x", key[10], ", dilation ", key[11], "x", key[12], ", groups ", key[13],
                    key[14] == CUDNN_DATA_DOUBLE     ? ", double"
                    : key[14] == CUDNN_DATA_BFLOAT16 ? ", bfloat16"
                    : key[14] == CUDNN_DATA_HALF     ? ", float16"
                                                     : ", float",
                    key[15] == CUDNN_TENSOR_OP_MATH ? ", TF32 allowed" : "", key[16] ? ", deterministic" : "",
                    key[17] ? "" : ", untimed (benchmark off or deterministic)");
    for (int pass = 0; pass < gpu::kNumPasses; ++pass) {
      if (plan->chosen[pass]) lines.push_back(detail::str(gpu::kPassNames[pass], ", ", shape, ": ",
                                                          gpu::describe_choice(plan->algo[pass])));
    }
  }
  return lines;
}
}  // namespace cuda
}  // namespace minidl
