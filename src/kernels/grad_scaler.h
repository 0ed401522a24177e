#pragma once
// The formulas of amp::GradScaler, compiled for host and device so the CPU and CUDA backends (and the optimizers'
// fused updates, which unscale as they read a gradient) compute the same values: PyTorch's
// _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ (aten/src/ATen/native/cuda/AmpKernels.cu),
// operation for operation.
#include <cstdint>
#include <type_traits>

#include "kernels/dispatch_types.h"
#include "kernels/elementwise.h"
#include "minidl/float16.h"

namespace minidl {
namespace kernels {

/// The gradient dtypes the check takes.
using GradScalerTypes = DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16>;

/// The factor that unscales a gradient: PyTorch's scale.double().reciprocal().float().
MINIDL_HD float inv_scale_of(float scale) { return static_cast<float>(1.0 / static_cast<double>(scale)); }

/// The type a gradient element is checked and unscaled in: double for double, float for the others.
template <class T>
using ScalerMath = std::conditional_t<std::is_same<T, double>::value, double, float>;

/// Whether the gradient element x is inf or NaN; when `unscale`, x becomes x * inv (computed in ScalerMath<T>).
template <class T>
MINIDL_HD bool check_and_unscale(T& x, float inv, bool unscale) {
  using A = ScalerMath<T>;
  const A v = static_cast<A>(x);
  if (unscale) x = static_cast<T>(v * static_cast<A>(inv));
  return m_isnan(v) || m_isinf(v);
}

/// One update of the scale after an iteration: found_inf != 0 multiplies the scale by backoff_factor and resets
/// the count of clean steps; otherwise the count grows, and at growth_interval the scale is multiplied by
/// growth_factor (unless that overflows float32) and the count restarts. The products are taken in double and
/// rounded to float, as PyTorch's.
MINIDL_HD void update_scale(float& scale, std::int32_t& growth_tracker, float found_inf, double growth_factor,
                            double backoff_factor, std::int64_t growth_interval) {
  if (found_inf != 0.0f) {
    scale = static_cast<float>(scale * backoff_factor);
    growth_tracker = 0;
    return;
  }
  const std::int64_t successful = static_cast<std::int64_t>(growth_tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(scale * growth_factor);
    if (!m_isinf(grown) && !m_isnan(grown)) scale = grown;
    growth_tracker = 0;
  } else {
    growth_tracker = static_cast<std::int32_t>(successful);
  }
}

}  // namespace kernels
}  // namespace minidl
