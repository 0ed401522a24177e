// CPU gradient-norm clipping: the reference of the CUDA kernels, with the same formulas (kernels/clip_grad.h).
#include "cpu/parallel.h"  // first: it defines EIGEN_USE_THREADS, which must precede every Eigen header

#include <Eigen/Core>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "kernels/backend.h"

namespace minidl {
namespace cpu {
namespace {

/// Elements per partial result: fixed, so the result does not depend on how the pool splits the work.
constexpr std::int64_t kBlock = 4096;

/// The combined terms of the block x[0, len): for the 1-, 2- and inf-norms of float32 and float64 Eigen's vector
/// reductions (a loop adding one term at a time waits on each addition, and the norm of a GPT's gradients took
/// longer than its optimizer step), otherwise the terms one by one.
template <class T>
T block_terms(const T* x, std::int64_t len, const kernels::GradNorm& norm) {
  using Kind = kernels::GradNorm::Kind;
  if constexpr (std::is_floating_point<T>::value) {
    const Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> v(x, len);
    switch (norm.kind) {
      case Kind::Two: return v.square().sum();
      case Kind::One: return v.abs().sum();
      case Kind::Inf: return v.abs().template maxCoeff<Eigen::PropagateNaN>();
      case Kind::P: break;
    }
  }
  T part = 0;
  for (std::int64_t i = 0; i < len; ++i) part = norm.combine(part, norm.term<T>(x[i]));
  return part;
}

/// The combined terms of g's elements. Float32 gradients accumulate in float32 within a block, as PyTorch's
/// norm; the blocks' partial results are combined in double, in order.
template <class T>
double norm_terms(const Tensor& g, const kernels::GradNorm& norm) {
  const T* x = g.data_ptr<T>();
  const std::int64_t n = g.numel();
  std::vector<double> partial(static_cast<std::size_t>((n + kBlock - 1) / kBlock));
  parallel_for(static_cast<std::int64_t>(partial.size()), 2.0 * kBlock, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) {
      const T part = block_terms(x + b * kBlock, std::min(n, (b + 1) * kBlock) - b * kBlock, norm);
      partial[static_cast<std::size_t>(b)] = static_cast<double>(part);
    }
  });
  double total = 0.0;
  for (const double part : partial) total = norm.combine(total, part);
  return total;
}

}  // namespace

void grad_norm(const std::vector<Tensor>& grads, const kernels::GradNorm& norm, Tensor& total) {
  double s = 0.0;
  for (const Tensor& g : grads) {
    kernels::dispatch_floating(g.dtype(), "clip_grad_norm_", [&](auto tag) {
      using T = typename decltype(tag)::type;
      s = norm.combine(s, norm_terms<T>(g, norm));
    });
  }
  fill(total, norm.finish(s));
}

void clip_grads_by_norm(const std::vector<Tensor>& grads, const Tensor& total, double max_norm) {
  kernels::dispatch_floating(total.dtype(), "clip_grad_norm_", [&](auto rtag) {
    using R = typename decltype(rtag)::type;
    const R coef = kernels::clip_coef<R>(static_cast<R>(max_norm), total.data_ptr<R>()[0]);
    for (const Tensor& g : grads) {
      kernels::dispatch_floating(g.dtype(), "clip_grad_norm_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* x = g.data_ptr<T>();
        const T c = static_cast<T>(coef);
        parallel_for(g.numel(), 1, [&](std::int64_t begin, std::int64_t end) {
          for (std::int64_t i = begin; i < end; ++i) x[i] = x[i] * c;
        });
      });
    }
  });
}

}  // namespace cpu
}  // namespace minidl
