// CPU kernels of amp::GradScaler: the reference of the CUDA kernels, with the same formulas
// (kernels/grad_scaler.h).
#include <atomic>

#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/grad_scaler.h"

namespace minidl {
namespace cpu {

void non_finite_check_and_unscale(const std::vector<Tensor>& grads, Tensor& found_inf, const Tensor& scale,
                                  bool unscale) {
  const float inv = kernels::inv_scale_of(scale.data_ptr<float>()[0]);
  std::atomic<bool> found{false};
  for (const Tensor& g : grads) {
    kernels::dispatch(kernels::GradScalerTypes{}, g.dtype(), "GradScaler", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* x = g.data_ptr<T>();
      parallel_for(g.numel(), 2, [&](std::int64_t begin, std::int64_t end) {
        bool bad = false;
        for (std::int64_t i = begin; i < end; ++i) bad |= kernels::check_and_unscale(x[i], inv, unscale);
        if (bad) found.store(true, std::memory_order_relaxed);
      });
    });
  }
  if (found.load()) found_inf.data_ptr<float>()[0] = 1.0f;
}

void update_scale(Tensor& scale, Tensor& growth_tracker, const Tensor& found_inf, double growth_factor,
                  double backoff_factor, std::int64_t growth_interval) {
  kernels::update_scale(scale.data_ptr<float>()[0], growth_tracker.data_ptr<std::int32_t>()[0],
                        found_inf.data_ptr<float>()[0], growth_factor, backoff_factor, growth_interval);
}

}  // namespace cpu
}  // namespace minidl
