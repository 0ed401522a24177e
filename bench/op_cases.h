#pragma once
// The example CNN's layers (examples/mnist/net.cpp) as op benchmark cases, shared by bench_ops_cpu and
// bench_ops_gpu so both backends are measured on the same problems with the same cost model: the shapes at a
// batch size, the arithmetic and least memory traffic of each pass, random operands on a device, and the
// backend kernel each pass calls (src/cpu and src/cuda declare the same functions).
#include <minidl/minidl.h>

#include <cstdint>

#include "kernels/elementwise.h"
#include "kernels/params.h"

namespace minidl {
namespace bench {

enum class Pass { Forward, BackwardInput, BackwardWeight };

/// What one pass has to do at least: FLOPs (a multiply-add counts 2), and bytes read plus written when every
/// operand crosses memory exactly once.
struct Cost {
  double flops = 0;
  double bytes = 0;
};

/// The float kernels the cases call, as both backends declare them (kernels/backend.h).
struct Backend {
  void (*conv_forward)(const kernels::Conv2dParams&, const float* x, const float* w, const float* bias, float* y,
                       kernels::Activation act);
  void (*conv_backward_input)(const kernels::Conv2dParams&, const float* dy, const float* w, float* dx);
  void (*conv_backward_weight)(const kernels::Conv2dParams&, const float* x, const float* dy, float* dw,
                               float* dbias);
  void (*matmul)(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m, std::int64_t n,
                 std::int64_t k, bool trans_a, bool trans_b);
  void (*max_pool_forward)(const kernels::Pool2dParams&, const float* x, float* y, std::int64_t* indices);
  void (*max_pool_backward)(const kernels::Pool2dParams&, const float* dy, const std::int64_t* indices, float* dx);
};

inline kernels::Conv2dParams conv3x3(std::int64_t batch, std::int64_t in_channels, std::int64_t size,
                                     std::int64_t out_channels) {
  kernels::Conv2dParams p;
  p.N = batch;
  p.C = in_channels;
  p.H = p.W = size;
  p.K = out_channels;
  p.R = p.S = 3;
  p.finalize("bench");
  return p;
}
/// conv1: 1 -> 32 channels on the 28x28 image; conv2: 32 -> 64 on conv1's 26x26 output.
inline kernels::Conv2dParams conv1(std::int64_t batch) { return conv3x3(batch, 1, 28, 32); }
inline kernels::Conv2dParams conv2(std::int64_t batch) { return conv3x3(batch, 32, 26, 64); }

/// The 2x2 max-pool of conv2's output (64 x 24 x 24).
inline kernels::Pool2dParams pool(std::int64_t batch) {
  kernels::Pool2dParams p;
  p.N = batch;
  p.C = 64;
  p.H = p.W = 24;
  p.kh = p.kw = p.sh = p.sw = 2;
  p.finalize("bench");
  return p;
}

struct LinearShape {
  std::int64_t rows, in, out;
};
/// fc1: the flattened pool output (9216) -> 128; fc2: 128 -> the 10 classes.
inline LinearShape fc1(std::int64_t batch) { return {batch, 9216, 128}; }
inline LinearShape fc2(std::int64_t batch) { return {batch, 128, 10}; }

/// One convolution with random operands (inputs and the incoming gradient normal, never zeros).
class ConvCase {
 public:
  ConvCase(const kernels::Conv2dParams& p, Device device)
      : p_(p),
        x_(randn({p.N, p.C, p.H, p.W}, device)),
        w_(randn({p.K, p.C / p.groups, p.R, p.S}, device)),
        b_(randn({p.K}, device)),
        dy_(randn({p.N, p.K, p.P, p.Q}, device)),
        y_(empty_like(dy_)),
        dx_(empty_like(x_)),
        dw_(empty_like(w_)),
        db_(empty_like(b_)) {}

  /// As the example's layer runs it: forward with the bias and the fused ReLU, backward-weight with the bias
  /// gradient.
  void run(const Backend& k, Pass pass) {
    switch (pass) {
      case Pass::Forward:
        k.conv_forward(p_, x_.data_ptr<float>(), w_.data_ptr<float>(), b_.data_ptr<float>(), y_.data_ptr<float>(),
                       kernels::Activation::Relu);
        break;
      case Pass::BackwardInput:
        k.conv_backward_input(p_, dy_.data_ptr<float>(), w_.data_ptr<float>(), dx_.data_ptr<float>());
        break;
      case Pass::BackwardWeight:
        k.conv_backward_weight(p_, x_.data_ptr<float>(), dy_.data_ptr<float>(), dw_.data_ptr<float>(),
                               db_.data_ptr<float>());
        break;
    }
  }

  /// The same for every pass: each reads two of x, w, y and writes the third.
  Cost cost() const {
    const double macs = static_cast<double>(y_.numel()) * static_cast<double>(w_.numel() / p_.K);
    return {2 * macs, 4.0 * static_cast<double>(x_.numel() + w_.numel() + y_.numel())};
  }

 private:
  kernels::Conv2dParams p_;
  Tensor x_, w_, b_, dy_, y_, dx_, dw_, db_;
};

/// One linear layer's GEMMs with random operands, with nn::functional::linear's transpose flags (the weight
/// used transposed in place). The bias add and bias-gradient sum are not part of it.
class LinearCase {
 public:
  LinearCase(const LinearShape& s, Device device)
      : s_(s),
        x_(randn({s.rows, s.in}, device)),
        w_(randn({s.out, s.in}, device)),
        dy_(randn({s.rows, s.out}, device)),
        y_(empty_like(dy_)),
        dx_(empty_like(x_)),
        dw_(empty_like(w_)) {}

  void run(const Backend& k, Pass pass) {
    switch (pass) {
      case Pass::Forward: k.matmul(x_, w_, y_, 1, s_.rows, s_.out, s_.in, false, true); break;
      case Pass::BackwardInput: k.matmul(dy_, w_, dx_, 1, s_.rows, s_.in, s_.out, false, false); break;
      case Pass::BackwardWeight: k.matmul(dy_, x_, dw_, 1, s_.out, s_.in, s_.rows, true, false); break;
    }
  }

  Cost cost() const {
    return {2.0 * static_cast<double>(s_.rows * s_.in * s_.out),
            4.0 * static_cast<double>(x_.numel() + w_.numel() + y_.numel())};
  }

 private:
  LinearShape s_;
  Tensor x_, w_, dy_, y_, dx_, dw_;
};

/// Max pooling with a random input; the constructor runs the forward once so the backward has real argmax
/// indices to scatter through.
class MaxPoolCase {
 public:
  MaxPoolCase(const kernels::Pool2dParams& p, Device device, const Backend& k)
      : p_(p),
        x_(randn({p.N, p.C, p.H, p.W}, device)),
        dy_(randn({p.N, p.C, p.P, p.Q}, device)),
        y_(empty_like(dy_)),
        dx_(empty_like(x_)),
        indices_(empty({p.N, p.C, p.P, p.Q}, TensorOptions(kInt64).device(device))) {
    run(k, Pass::Forward);
  }

  /// Pass::Forward or Pass::BackwardInput (pooling has no weight).
  void run(const Backend& k, Pass pass) {
    if (pass == Pass::Forward) {
      k.max_pool_forward(p_, x_.data_ptr<float>(), y_.data_ptr<float>(), indices_.data_ptr<std::int64_t>());
    } else {
      k.max_pool_backward(p_, dy_.data_ptr<float>(), indices_.data_ptr<std::int64_t>(), dx_.data_ptr<float>());
    }
  }

  /// No arithmetic worth counting; both passes move x, y and the int64 indices once.
  Cost cost() const { return {0, 4.0 * static_cast<double>(x_.numel()) + 12.0 * static_cast<double>(y_.numel())}; }
  std::int64_t input_elements() const { return x_.numel(); }

 private:
  kernels::Pool2dParams p_;
  Tensor x_, dy_, y_, dx_, indices_;
};

}  // namespace bench
}  // namespace minidl
