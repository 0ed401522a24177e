// pixel_shuffle and pixel_unshuffle: a reshape that splits the channels (or the rows and columns), a permute and a
// reshape that merges them again; their gradients are those of the views.
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

/// The leading dims before (C, H, W), with `tail` appended.
Shape batch_with(const Tensor& x, std::initializer_list<std::int64_t> tail) {
  Shape s(x.sizes().begin(), x.sizes().end() - 3);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

/// Permutation of a tensor of b leading dims followed by `order` (indices relative to b).
std::vector<std::int64_t> permutation(std::int64_t b, std::initializer_list<std::int64_t> order) {
  std::vector<std::int64_t> dims;
  for (std::int64_t i = 0; i < b; ++i) dims.push_back(i);
  for (std::int64_t o : order) dims.push_back(b + o);
  return dims;
}

void check_input(const Tensor& input, const char* op, const char* factor_name, std::int64_t r) {
  ops::check_defined(input, op, "input");
  MINIDL_CHECK(r > 0, ValueError, op, ": ", factor_name, " must be positive, found ", r);
  MINIDL_CHECK(input.dim() >= 3, ValueError, op, ": input must be (*, C, H, W), found shape ",
               shape_str(input.sizes()));
}

}  // namespace

Tensor pixel_shuffle(const Tensor& input, const PixelShuffleFuncOptions& options) {
  const std::int64_t r = options.upscale_factor();
  check_input(input, "pixel_shuffle", "upscale_factor", r);
  const std::int64_t d = input.dim(), C = input.size(d - 3), H = input.size(d - 2), W = input.size(d - 1);
  MINIDL_CHECK(C % (r * r) == 0, ValueError, "pixel_shuffle: input channels (", C,
               ") must be divisible by upscale_factor squared (", r * r, "), input shape ", shape_str(input.sizes()));
  const std::int64_t oc = C / (r * r);
  return input.reshape(batch_with(input, {oc, r, r, H, W}))
      .permute(permutation(d - 3, {0, 3, 1, 4, 2}))
      .reshape(batch_with(input, {oc, H * r, W * r}));
}

Tensor pixel_unshuffle(const Tensor& input, const PixelUnshuffleFuncOptions& options) {
  const std::int64_t r = options.downscale_factor();
  check_input(input, "pixel_unshuffle", "downscale_factor", r);
  const std::int64_t d = input.dim(), C = input.size(d - 3), H = input.size(d - 2), W = input.size(d - 1);
  MINIDL_CHECK(H % r == 0 && W % r == 0, ValueError, "pixel_unshuffle: height and width (", H, ", ", W,
               ") must be divisible by downscale_factor (", r, "), input shape ", shape_str(input.sizes()));
  return input.reshape(batch_with(input, {C, H / r, r, W / r, r}))
      .permute(permutation(d - 3, {0, 2, 4, 1, 3}))
      .reshape(batch_with(input, {C * r * r, H / r, W / r}));
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
