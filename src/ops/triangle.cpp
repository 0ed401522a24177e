// tril and triu: one kernel (the triangle family of kernels/backend.h) whose gradient is the same triangle of the
// incoming gradient. The in-place forms copy the result back (tril_ and triu_ are rare; the copy keeps autograd's
// in-place rules in copy_).
#include "minidl/joining.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

Tensor triangle(const Tensor& self, std::int64_t diagonal, bool upper) {
  const char* op = upper ? "triu" : "tril";
  ops::check_defined(self, op, "self");
  MINIDL_CHECK(self.dim() >= 2, ValueError, op, ": expected a tensor with at least 2 dimensions, found shape ",
               shape_str(self.sizes()));
  const Tensor x = ops::dense(self);
  Tensor out = ops::empty_as(x.sizes(), x);
  MINIDL_ON_BACKEND(x.device(), triangle(x, diagonal, upper, out));
  return autograd::record(out, upper ? "TriuBackward" : "TrilBackward", {x}, [diagonal, upper](const Tensor& g) {
    return std::vector<Tensor>{triangle(g, diagonal, upper)};
  });
}

}  // namespace

Tensor tril(const Tensor& self, std::int64_t diagonal) { return triangle(self, diagonal, false); }
Tensor triu(const Tensor& self, std::int64_t diagonal) { return triangle(self, diagonal, true); }

Tensor Tensor::tril(std::int64_t diagonal) const { return minidl::tril(*this, diagonal); }
Tensor Tensor::triu(std::int64_t diagonal) const { return minidl::triu(*this, diagonal); }
Tensor& Tensor::tril_(std::int64_t diagonal) { return copy_(minidl::tril(*this, diagonal)); }
Tensor& Tensor::triu_(std::int64_t diagonal) { return copy_(minidl::triu(*this, diagonal)); }

}  // namespace minidl
