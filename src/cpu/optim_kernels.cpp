// CPU optimizer steps. Each parameter is updated in one pass over its elements, split over the library's
// thread pool, by the same per-element functor the CUDA kernels use: an update reads and writes up to five
// arrays per element, which Eigen's single-output expressions could only express as several passes with the
// formula written a second time.
#include <algorithm>

#include "kernels/backend.h"
#include "kernels/grad_scaler.h"

#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"

namespace minidl {
namespace cpu {
namespace {

/// update(i, p, g, state) for i in [begin, end), compiled per instruction set. The arrays are declared apart
/// (restrict) and the functor is taken by value, so the compiler can take the functor's branches on its
/// settings out of the loop and vectorise what is left. Through the pointer table alone it keeps a scalar loop;
/// through a reference to the functor, whose settings any store to p might change as far as it knows, it
/// reloaded and tested them for every element (a scalar loop as well).
/// The gradient is read times inv (1 outside amp::GradScaler's steps: exact).
template <class T, class F>
MINIDL_CPU_CLONES void update_range(const F update, T* __restrict p, const T* __restrict g, const T inv,
                                    T* __restrict s0, T* __restrict s1, T* __restrict s2, std::int64_t begin,
                                    std::int64_t end) {
  static_assert(kernels::kMaxOptimStates == 3, "one restrict pointer per state buffer");
  T* const state[kernels::kMaxOptimStates] = {s0, s1, s2};
  for (std::int64_t i = begin; i < end; ++i) update(i, p, g[i] * inv, state);
}

}  // namespace

void optim_step(const kernels::OptimHyper& hyper, const std::vector<kernels::OptimSlot>& slots, Tensor& steps,
                const Tensor& values, std::int64_t group, const kernels::OptimAmp& amp) {
  if (amp.found_inf != nullptr && *amp.found_inf != 0.0f) return;
  const float inv = amp.grad_scale != nullptr ? kernels::inv_scale_of(*amp.grad_scale) : 1.0f;
  double* s = steps.data_ptr<double>();
  const double* v = values.data_ptr<double>() + group * kernels::kOptimValues;
  for (const kernels::OptimSlot& slot : slots) {
    double& step = s[slot.index];
    step += 1.0;
    kernels::dispatch_floating(slot.param.dtype(), "optimizer step", [&](auto tag) {
      using T = typename decltype(tag)::type;
      kernels::visit_optimizer<T>(hyper.kind, [&](auto ftag) {
        using F = typename decltype(ftag)::type;
        const F update(hyper, v, step);
        T* p = slot.param.data_ptr<T>();
        const T* g = slot.grad.data_ptr<T>();
        T* state[kernels::kMaxOptimStates];
        for (int k = 0; k < kernels::kMaxOptimStates; ++k) {
          state[k] = slot.state[k].defined() ? slot.state[k].data_ptr<T>() : nullptr;
        }
        parallel_for(slot.param.numel(), F::kCost, [&](std::int64_t begin, std::int64_t end) {
          update_range(update, p, g, static_cast<T>(inv), state[0], state[1], state[2], begin, end);
        });
      });
    });
  }
}

void optim_upload(Tensor& dst, std::int64_t offset, const double* src, std::int64_t count) {
  std::copy(src, src + count, dst.data_ptr<double>() + offset);
}

}  // namespace cpu
}  // namespace minidl
