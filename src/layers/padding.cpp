// functional::pad, composed from views (narrow, flip, expand) and cat, so every mode's gradient is theirs: a pad
// of one dim is the cat of a left part, the input and a right part, dims from the last backwards.
#include "minidl/joining.h"
#include "minidl/nn/functional.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace functional {
namespace {

/// x's shape with `len` in dim d.
Shape with_size(const Tensor& x, std::int64_t d, std::int64_t len) {
  Shape s = x.sizes();
  s[static_cast<std::size_t>(d)] = len;
  return s;
}

/// The part added on one side of dim d (`left` or right), `n` > 0 elements long, in the mode of `options`.
Tensor side(const Tensor& x, std::int64_t d, std::int64_t n, bool left, const PadFuncOptions& options) {
  const std::int64_t L = x.size(d);
  return std::visit(
      [&](const auto& mode) -> Tensor {
        using M = std::decay_t<decltype(mode)>;
        if constexpr (std::is_same_v<M, enumtype::kConstant>) {
          return full(with_size(x, d, n), options.value(), TensorOptions(x.dtype()).device(x.device()));
        } else if constexpr (std::is_same_v<M, enumtype::kReflect>) {
          return x.narrow(d, left ? 1 : L - 1 - n, n).flip({d});
        } else if constexpr (std::is_same_v<M, enumtype::kReplicate>) {
          return x.narrow(d, left ? 0 : L - 1, 1).expand(with_size(x, d, n));
        } else {
          return x.narrow(d, left ? L - n : 0, n);
        }
      },
      options.mode());
}

}  // namespace

Tensor pad(const Tensor& input, const PadFuncOptions& options) {
  ops::check_defined(input, "pad", "input");
  const std::vector<std::int64_t>& sizes = options.pad();
  const std::string mode = enumtype::get_enum_name(options.mode());
  const bool constant = std::holds_alternative<enumtype::kConstant>(options.mode());
  MINIDL_CHECK(sizes.size() % 2 == 0 && static_cast<std::int64_t>(sizes.size()) / 2 <= input.dim(), ValueError,
               "pad: pad must hold a (left, right) pair per padded dim, at most ", input.dim(),
               " pairs for input of shape ", shape_str(input.sizes()), ", found ", sizes.size(), " sizes");
  Tensor x = input;
  for (std::size_t k = 0; k < sizes.size() / 2; ++k) {
    const std::int64_t d = input.dim() - 1 - static_cast<std::int64_t>(k);
    std::int64_t l = sizes[2 * k], r = sizes[2 * k + 1];
    const std::int64_t L = x.size(d);
    if (constant) {
      // Negative sizes crop.
      const std::int64_t lo = l < 0 ? -l : 0, hi = r < 0 ? -r : 0;
      MINIDL_CHECK(L - lo - hi >= 0, ValueError, "pad: the negative padding (", l, ", ", r, ") of dim ", d,
                   " crops more than its size ", L, " (input shape ", shape_str(input.sizes()), ")");
      if (lo > 0 || hi > 0) x = x.narrow(d, lo, L - lo - hi);
      l = std::max<std::int64_t>(l, 0);
      r = std::max<std::int64_t>(r, 0);
    } else {
      MINIDL_CHECK(l >= 0 && r >= 0, ValueError, "pad: mode ", mode, " takes padding sizes >= 0, found (", l, ", ", r,
                   ") for dim ", d);
      if (l == 0 && r == 0) continue;
      const bool reflect = std::holds_alternative<enumtype::kReflect>(options.mode());
      const bool circular = std::holds_alternative<enumtype::kCircular>(options.mode());
      MINIDL_CHECK(L > 0, ValueError, "pad: mode ", mode, " cannot pad dim ", d, " of size 0 (input shape ",
                   shape_str(input.sizes()), ")");
      MINIDL_CHECK(!reflect || (l < L && r < L), ValueError, "pad: mode kReflect needs padding (", l, ", ", r,
                   ") of dim ", d, " smaller than its size ", L, " (input shape ", shape_str(input.sizes()), ")");
      MINIDL_CHECK(!circular || (l <= L && r <= L), ValueError, "pad: mode kCircular needs padding (", l, ", ", r,
                   ") of dim ", d, " at most its size ", L, " (input shape ", shape_str(input.sizes()), ")");
    }
    if (l == 0 && r == 0) continue;
    std::vector<Tensor> parts;
    if (l > 0) parts.push_back(side(x, d, l, true, options));
    parts.push_back(x);
    if (r > 0) parts.push_back(side(x, d, r, false, options));
    x = cat(parts, d);
  }
  return x;
}

}  // namespace functional
}  // namespace nn
}  // namespace minidl
