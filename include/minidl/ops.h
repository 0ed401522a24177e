#pragma once
// The differentiable primitive ops. Each has one entry point that checks its arguments and routes to the CPU
// (Eigen) or CUDA implementation; binary ops broadcast like NumPy.
#include <cstdint>
#include <vector>

#include "minidl/tensor.h"

namespace minidl {

Tensor add(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, double alpha = 1.0);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor pow(const Tensor& a, double exponent);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor relu(const Tensor& a);
/// ReLU in place (torch::relu_): `a` is overwritten and returned; recorded for autograd like Tensor::mul_.
Tensor& relu_(Tensor& a);
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
Tensor gelu(const Tensor& a);  // exact (erf) form, as PyTorch's default
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);

/// 2-D (n×k)·(k×m), or batched (..., n, k)·(..., k, m) with equal batch dims; cuBLAS on CUDA.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1);
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor flatten(const Tensor& a, std::int64_t start_dim = 0, std::int64_t end_dim = -1);

Tensor sum(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<std::int64_t>& dims, bool keepdim = false);
/// Maximum over one dimension (gradient flows to the first maximal element).
Tensor max(const Tensor& a, std::int64_t dim, bool keepdim = false);
/// Index of the first maximum along dim (int64, not differentiable).
Tensor argmax(const Tensor& a, std::int64_t dim, bool keepdim = false);
/// Sums `a` down to `shape` (the reverse of broadcasting).
Tensor sum_to(const Tensor& a, const Shape& shape);

/// Numerically stable (finite for logits of ±1000).
Tensor softmax(const Tensor& a, std::int64_t dim);
Tensor log_softmax(const Tensor& a, std::int64_t dim);

/// Elementwise comparison a == b (same dtype), as float 0/1 of a's dtype (not differentiable).
Tensor eq(const Tensor& a, const Tensor& b);
/// Shape that `a` and `b` broadcast to; throws ValueError naming `op` if they do not.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add(a, -s); }
inline Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return mul(a, 1.0 / s); }
inline Tensor operator/(double s, const Tensor& a) { return mul(pow(a, -1.0), s); }

}  // namespace minidl
