// functional::interpolate: nearest and (bi)linear on (N, C, L) and (N, C, H, W) input, with the kernels of
// kernels/upsample.h (a 1-d input is a plane of height 1).
#include <cmath>

#include "autocast/policy.h"
#include "layers/layer_utils.h"
#include "layers/lowp.h"
#include "minidl/autograd.h"
#include "minidl/nn/functional.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

/// One value per spatial dim from a list of one (for all) or `spatial` values.
template <class V>
std::vector<V> per_dim(const std::vector<V>& given, std::int64_t spatial, const char* what, const Tensor& input) {
  MINIDL_CHECK(given.size() == 1 || static_cast<std::int64_t>(given.size()) == spatial, ValueError,
               "interpolate: ", what, " must hold 1 or ", spatial, " values for input of shape ",
               shape_str(input.sizes()), ", found ", given.size());
  return given.size() == 1 ? std::vector<V>(static_cast<std::size_t>(spatial), given[0]) : given;
}

}  // namespace

Tensor interpolate(const Tensor& input_in, const InterpolateFuncOptions& options) {
  MINIDL_AUTOCAST(interpolate, input_in, options);
  if (layers::needs_float_path(input_in, false)) {  // the upsampling kernels are float32/float64: layers/lowp.h
    return interpolate(layers::widen(input_in), options).to(input_in.dtype());
  }
  const char* op = "interpolate";
  ops::check_defined(input_in, op, "input");
  ops::check_floating(input_in, op);
  const std::string mode = enumtype::get_enum_name(options.mode());
  const bool linear = !std::holds_alternative<enumtype::kNearest>(options.mode());
  const std::int64_t want_dim = std::holds_alternative<enumtype::kLinear>(options.mode())     ? 3
                                : std::holds_alternative<enumtype::kBilinear>(options.mode()) ? 4
                                                                                              : 0;
  MINIDL_CHECK(want_dim == 0 ? (input_in.dim() == 3 || input_in.dim() == 4) : input_in.dim() == want_dim, ValueError,
               "interpolate: mode ", mode, " takes ",
               want_dim == 3 ? "(N, C, L)" : (want_dim == 4 ? "(N, C, H, W)" : "(N, C, L) or (N, C, H, W)"),
               " input, found shape ", shape_str(input_in.sizes()));
  MINIDL_CHECK(linear || !options.align_corners().has_value(), ValueError,
               "interpolate: align_corners can only be set with the interpolating modes kLinear and kBilinear, "
               "found mode ",
               mode);
  MINIDL_CHECK(options.size().has_value() != options.scale_factor().has_value(), ValueError, "interpolate: ",
               options.size().has_value() ? "only one of size and scale_factor may be given, found both"
                                          : "size or scale_factor must be given, found neither");
  const std::int64_t spatial = input_in.dim() - 2;
  for (std::int64_t d = 2; d < input_in.dim(); ++d) {
    MINIDL_CHECK(input_in.size(d) > 0, ValueError, "interpolate: the spatial sizes must be positive, found shape ",
                 shape_str(input_in.sizes()));
  }
  // Per spatial dim: the output size, and the scale factor the coordinates use (0: the sizes' ratio).
  std::vector<kernels::UpsampleAxis> axes(static_cast<std::size_t>(spatial));
  if (options.size().has_value()) {
    const std::vector<std::int64_t> sizes = per_dim(*options.size(), spatial, "size", input_in);
    for (std::int64_t d = 0; d < spatial; ++d) {
      MINIDL_CHECK(sizes[d] > 0, ValueError, "interpolate: size must be positive, found ", sizes[d]);
      axes[d] = {input_in.size(d + 2), sizes[d], 0.0};
    }
  } else {
    const std::vector<double> factors = per_dim(*options.scale_factor(), spatial, "scale_factor", input_in);
    const bool recompute = options.recompute_scale_factor().value_or(false);
    for (std::int64_t d = 0; d < spatial; ++d) {
      const std::int64_t in = input_in.size(d + 2);
      const double out = std::floor(static_cast<double>(in) * factors[d]);
      MINIDL_CHECK(factors[d] > 0 && out >= 1, ValueError, "interpolate: scale_factor ", factors[d],
                   " must be positive and give an output size of at least 1, found input size ", in);
      axes[d] = {in, static_cast<std::int64_t>(out), recompute ? 0.0 : factors[d]};
    }
  }
  kernels::UpsampleParams p;
  p.planes = input_in.size(0) * input_in.size(1);
  p.w = axes.back();
  if (spatial == 2) p.h = axes[0];
  p.linear = linear;
  p.align_corners = options.align_corners().value_or(false);

  const Tensor input = ops::dense(input_in);
  Shape out_shape{input.size(0), input.size(1)};
  for (const auto& a : axes) out_shape.push_back(a.out);
  Tensor out = ops::empty_as(out_shape, input);
  MINIDL_LAYER_KERNEL(input, upsample_forward, p, layers::ptr<T>(input), layers::ptr<T>(out));
  const Shape in_shape = input.sizes();
  const char* node = linear ? (spatial == 2 ? "UpsampleBilinear2DBackward" : "UpsampleLinear1DBackward")
                            : (spatial == 2 ? "UpsampleNearest2DBackward" : "UpsampleNearest1DBackward");
  return autograd::record(out, node, {input}, [=](const Tensor& g) {
    Tensor dx = ops::empty_as(in_shape, g);
    MINIDL_LAYER_KERNEL(g, upsample_backward, p, layers::ptr<T>(g), layers::ptr<T>(dx));
    return std::vector<Tensor>{dx};
  });
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
