// CPU gradient-norm clipping: the reference of the CUDA kernels, with the same formulas (kernels/clip_grad.h).
#include <algorithm>
#include <vector>

#include "cpu/parallel.h"
#include "kernels/backend.h"

namespace minidl {
namespace cpu {
namespace {

/// Elements per partial result: fixed, so the result does not depend on how the pool splits the work.
constexpr std::int64_t kBlock = 4096;

/// The combined terms of g's elements. Float32 gradients accumulate in float32 within a block, as PyTorch's
/// norm; the blocks' partial results are combined in double, in order.
template <class T>
double norm_terms(const Tensor& g, const kernels::GradNorm& norm) {
  const T* x = g.data_ptr<T>();
  const std::int64_t n = g.numel();
  std::vector<double> partial(static_cast<std::size_t>((n + kBlock - 1) / kBlock));
  parallel_for(static_cast<std::int64_t>(partial.size()), 2.0 * kBlock, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t b = first; b < last; ++b) {
      T part = 0;
      for (std::int64_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        part = norm.combine(part, norm.term<T>(x[i]));
      }
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
