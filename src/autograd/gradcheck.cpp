// gradcheck as PyTorch defines it: float64, central differences with step eps, every element of the
// Jacobian compared with |analytical - numerical| <= atol + rtol * |numerical|, and backward run twice per
// output element to check that it is deterministic.
#include <cmath>

#include "core/tensor_impl.h"
#include "minidl/ops.h"

namespace minidl {
namespace autograd {

namespace {
std::vector<double> output_values(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                  const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  return fn(inputs).to_vector<double>();
}

bool fail(bool raise, const std::string& msg) {
  if (raise) throw AutogradError("gradcheck: " + msg);
  return false;
}
}  // namespace

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               GradcheckOptions opt) {
  bool any = false;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    any = true;
    MINIDL_CHECK(x.dtype() == kFloat64 && x.device().is_cpu() && x.is_leaf() && x.is_contiguous(), TypeError,
                 "gradcheck: input ", k, " must be a contiguous float64 CPU leaf tensor (it is perturbed element by "
                 "element in place), found ", x.dtype(), " on ", x.device(), x.is_contiguous() ? "" : ", strided");
  }
  MINIDL_CHECK(any, ValueError, "gradcheck: no input requires grad");

  Tensor out = fn(inputs);
  MINIDL_CHECK(out.dtype() == kFloat64, TypeError, "gradcheck: the function must return float64, found ", out.dtype());
  MINIDL_CHECK(out.requires_grad(), AutogradError, "gradcheck: the output does not depend on any input that requires "
               "grad");
  const std::int64_t m = out.numel();

  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.defined() || !x.requires_grad()) continue;
    const std::int64_t nx = x.numel();
    double* px = static_cast<double*>(x.data_ptr());

    // Numerical Jacobian, column by column: numerical[i * m + j] = d out_j / d x_i.
    std::vector<double> numerical(static_cast<std::size_t>(nx * m));
    for (std::int64_t i = 0; i < nx; ++i) {
      const double orig = px[i];
      px[i] = orig + opt.eps;
      const std::vector<double> plus = output_values(fn, inputs);
      px[i] = orig - opt.eps;
      const std::vector<double> minus = output_values(fn, inputs);
      px[i] = orig;
      for (std::int64_t j = 0; j < m; ++j) numerical[i * m + j] = (plus[j] - minus[j]) / (2 * opt.eps);
    }

    // Analytical Jacobian, row by row: backward of one-hot output gradients, twice each.
    for (std::int64_t j = 0; j < m; ++j) {
      std::vector<double> onehot(static_cast<std::size_t>(m), 0.0);
      onehot[j] = 1.0;
      const Tensor g = from_vector(onehot, out.sizes());
      std::vector<double> rows[2];
      for (int rep = 0; rep < 2; ++rep) {
        for (const Tensor& in : inputs) {
          if (in.defined() && in.requires_grad()) in.mutable_grad() = Tensor();
        }
        out.backward(g, /*retain_graph=*/true);
        const Tensor gx = x.grad();
        rows[rep] = gx.defined() ? gx.to_vector<double>() : std::vector<double>(static_cast<std::size_t>(nx), 0.0);
        if (gx.defined() && gx.sizes() != x.sizes()) {
          return fail(opt.raise, detail::str("gradient of input ", k, " has shape ", shape_str(gx.sizes()),
                                             ", expected the input's shape ", shape_str(x.sizes())));
        }
      }
      for (std::int64_t i = 0; i < nx; ++i) {
        const double a = rows[0][i], n = numerical[i * m + j];
        if (rows[1][i] != a) {
          return fail(opt.raise, detail::str("backward is not reentrant: input ", k, " element ", i,
                                             ", output element ", j, ": first ", a, ", second ", rows[1][i]));
        }
        if (!(std::fabs(a - n) <= opt.atol + opt.rtol * std::fabs(n))) {
          return fail(opt.raise, detail::str("Jacobian mismatch for input ", k, " (shape ", shape_str(x.sizes()),
                                             ") element ", i, " and output element ", j, ": analytical ", a,
                                             ", numerical ", n));
        }
      }
    }
  }
  for (const Tensor& in : inputs) {
    if (in.defined() && in.requires_grad()) in.mutable_grad() = Tensor();
  }
  return true;
}

}  // namespace autograd
}  // namespace minidl
