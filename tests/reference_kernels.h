#pragma once
// Plain reference implementations of the layer kernels, for tests of both backends: direct nested loops over
// the defining formulas, accumulated in double, with the same signatures as minidl::cpu / minidl::gpu (host
// pointers). Slow on purpose; only obviousness matters here.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/params.h"

namespace minidl {
namespace ref {

/// Calls f(x_index, w_index, y_index) for every (input element, weight, output element) triple that one
/// multiply of the convolution y = conv(x, w) connects. Taps that read padding are skipped.
template <class F>
void for_each_conv_tap(const kernels::Conv2dParams& p, F&& f) {
  const std::int64_t Cg = p.C / p.groups, Kg = p.K / p.groups;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t k = 0; k < p.K; ++k)
      for (std::int64_t oh = 0; oh < p.P; ++oh)
        for (std::int64_t ow = 0; ow < p.Q; ++ow)
          for (std::int64_t c = 0; c < Cg; ++c)
            for (std::int64_t r = 0; r < p.R; ++r)
              for (std::int64_t s = 0; s < p.S; ++s) {
                const std::int64_t ih = oh * p.stride_h - p.pad_h + r * p.dil_h;
                const std::int64_t iw = ow * p.stride_w - p.pad_w + s * p.dil_w;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                const std::int64_t ci = (k / Kg) * Cg + c;  // input channel of this group
                f(((n * p.C + ci) * p.H + ih) * p.W + iw, ((k * Cg + c) * p.R + r) * p.S + s,
                  ((n * p.K + k) * p.P + oh) * p.Q + ow);
              }
}

template <class T>
void store(const std::vector<double>& acc, T* out) {
  for (std::size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<T>(acc[i]);
}

template <class T>
void conv2d_forward(const kernels::Conv2dParams& p, const T* x, const T* w, const T* bias, T* y) {
  std::vector<double> acc(static_cast<std::size_t>(p.N * p.K * p.P * p.Q), 0.0);
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(acc.size()); ++i)
    acc[i] = bias ? static_cast<double>(bias[(i / (p.P * p.Q)) % p.K]) : 0.0;
  for_each_conv_tap(p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
    acc[yi] += static_cast<double>(x[xi]) * static_cast<double>(w[wi]);
  });
  store(acc, y);
}

template <class T>
void conv2d_backward_input(const kernels::Conv2dParams& p, const T* dy, const T* w, T* dx) {
  std::vector<double> acc(static_cast<std::size_t>(p.N * p.C * p.H * p.W), 0.0);
  for_each_conv_tap(p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
    acc[xi] += static_cast<double>(dy[yi]) * static_cast<double>(w[wi]);
  });
  store(acc, dx);
}

template <class T>
void conv2d_backward_weight(const kernels::Conv2dParams& p, const T* x, const T* dy, T* dw, T* dbias) {
  std::vector<double> acc(static_cast<std::size_t>(p.K * (p.C / p.groups) * p.R * p.S), 0.0);
  for_each_conv_tap(p, [&](std::int64_t xi, std::int64_t wi, std::int64_t yi) {
    acc[wi] += static_cast<double>(x[xi]) * static_cast<double>(dy[yi]);
  });
  store(acc, dw);
  if (!dbias) return;
  std::vector<double> bacc(static_cast<std::size_t>(p.K), 0.0);
  for (std::int64_t i = 0; i < p.N * p.K * p.P * p.Q; ++i) bacc[(i / (p.P * p.Q)) % p.K] += static_cast<double>(dy[i]);
  store(bacc, dbias);
}

/// Calls f(output_index, input_index) for every input element inside output element's pooling window
/// (row-major window order; padding positions are skipped).
template <class F>
void for_each_pool_tap(const kernels::Pool2dParams& p, F&& f) {
  for (std::int64_t plane = 0; plane < p.N * p.C; ++plane)
    for (std::int64_t oh = 0; oh < p.P; ++oh)
      for (std::int64_t ow = 0; ow < p.Q; ++ow)
        for (std::int64_t i = 0; i < p.kh; ++i)
          for (std::int64_t j = 0; j < p.kw; ++j) {
            const std::int64_t h = oh * p.sh - p.ph + i, w = ow * p.sw - p.pw + j;
            if (h < 0 || h >= p.H || w < 0 || w >= p.W) continue;
            f((plane * p.P + oh) * p.Q + ow, (plane * p.H + h) * p.W + w);
          }
}

/// indices: flat h * W + w within the plane; the first maximum wins ties, a NaN beats everything (the last NaN).
template <class T>
void max_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y, std::int64_t* indices) {
  const std::int64_t outputs = p.N * p.C * p.P * p.Q, HW = p.H * p.W;
  std::vector<bool> seen(static_cast<std::size_t>(outputs), false);
  for (std::int64_t o = 0; o < outputs; ++o) y[o] = -std::numeric_limits<T>::infinity();
  for_each_pool_tap(p, [&](std::int64_t o, std::int64_t i) {
    if (!seen[o] || x[i] > y[o] || std::isnan(x[i])) {
      y[o] = x[i];
      indices[o] = i % HW;
    }
    seen[o] = true;
  });
}

template <class T>
void max_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, const std::int64_t* indices, T* dx) {
  const std::int64_t HW = p.H * p.W;
  std::vector<double> acc(static_cast<std::size_t>(p.N * p.C * HW), 0.0);
  for (std::int64_t o = 0; o < p.N * p.C * p.P * p.Q; ++o)
    acc[(o / (p.P * p.Q)) * HW + indices[o]] += static_cast<double>(dy[o]);
  store(acc, dx);
}

/// count_include_pad = true: every window divides by kh * kw.
template <class T>
void avg_pool2d_forward(const kernels::Pool2dParams& p, const T* x, T* y) {
  std::vector<double> acc(static_cast<std::size_t>(p.N * p.C * p.P * p.Q), 0.0);
  for_each_pool_tap(p, [&](std::int64_t o, std::int64_t i) { acc[o] += static_cast<double>(x[i]) / (p.kh * p.kw); });
  store(acc, y);
}

template <class T>
void avg_pool2d_backward(const kernels::Pool2dParams& p, const T* dy, T* dx) {
  std::vector<double> acc(static_cast<std::size_t>(p.N * p.C * p.H * p.W), 0.0);
  for_each_pool_tap(p, [&](std::int64_t o, std::int64_t i) { acc[i] += static_cast<double>(dy[o]) / (p.kh * p.kw); });
  store(acc, dx);
}

/// Per-channel mean and biased variance over (N, HW) of an (N, C, HW) buffer, two-pass.
template <class T>
void channel_moments(const kernels::BatchNormParams& p, const T* x, std::vector<double>& mean,
                     std::vector<double>& var) {
  const double M = static_cast<double>(p.N * p.HW);
  mean.assign(static_cast<std::size_t>(p.C), 0.0);
  var.assign(static_cast<std::size_t>(p.C), 0.0);
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t c = 0; c < p.C; ++c)
      for (std::int64_t i = 0; i < p.HW; ++i) mean[c] += static_cast<double>(x[(n * p.C + c) * p.HW + i]) / M;
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t c = 0; c < p.C; ++c)
      for (std::int64_t i = 0; i < p.HW; ++i) {
        const double d = static_cast<double>(x[(n * p.C + c) * p.HW + i]) - mean[c];
        var[c] += d * d / M;
      }
}

/// Training forward as PyTorch defines it; gamma/beta/running_* may be null.
template <class T>
void batch_norm_forward_train(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta, T* y,
                              T* save_mean, T* save_invstd, T* running_mean, T* running_var) {
  std::vector<double> mean, var;
  channel_moments(p, x, mean, var);
  const double M = static_cast<double>(p.N * p.HW);
  for (std::int64_t c = 0; c < p.C; ++c) {
    const double invstd = 1.0 / std::sqrt(var[c] + p.eps);
    save_mean[c] = static_cast<T>(mean[c]);
    save_invstd[c] = static_cast<T>(invstd);
    if (running_mean)
      running_mean[c] = static_cast<T>((1 - p.momentum) * running_mean[c] + p.momentum * mean[c]);
    if (running_var)
      running_var[c] = static_cast<T>((1 - p.momentum) * running_var[c] + p.momentum * var[c] * M / (M - 1));
    for (std::int64_t n = 0; n < p.N; ++n)
      for (std::int64_t i = 0; i < p.HW; ++i) {
        const std::int64_t e = (n * p.C + c) * p.HW + i;
        const double xhat = (static_cast<double>(x[e]) - mean[c]) * invstd;
        y[e] = static_cast<T>(xhat * (gamma ? static_cast<double>(gamma[c]) : 1.0) +
                              (beta ? static_cast<double>(beta[c]) : 0.0));
      }
  }
}

template <class T>
void batch_norm_forward_eval(const kernels::BatchNormParams& p, const T* x, const T* gamma, const T* beta,
                             const T* running_mean, const T* running_var, T* y) {
  for (std::int64_t n = 0; n < p.N; ++n)
    for (std::int64_t c = 0; c < p.C; ++c)
      for (std::int64_t i = 0; i < p.HW; ++i) {
        const std::int64_t e = (n * p.C + c) * p.HW + i;
        const double xhat = (static_cast<double>(x[e]) - running_mean[c]) / std::sqrt(running_var[c] + p.eps);
        y[e] = static_cast<T>(xhat * (gamma ? static_cast<double>(gamma[c]) : 1.0) +
                              (beta ? static_cast<double>(beta[c]) : 0.0));
      }
}

/// Training-mode backward, recomputing the batch statistics from x:
/// dx = gamma * invstd / M * (M * dy - sum(dy) - xhat * sum(dy * xhat)), dgamma = sum(dy * xhat), dbeta = sum(dy).
template <class T>
void batch_norm_backward(const kernels::BatchNormParams& p, const T* x, const T* dy, const T* gamma,
                         const T* /*save_mean*/, const T* /*save_invstd*/, T* dx, T* dgamma, T* dbeta) {
  std::vector<double> mean, var;
  channel_moments(p, x, mean, var);
  const double M = static_cast<double>(p.N * p.HW);
  for (std::int64_t c = 0; c < p.C; ++c) {
    const double invstd = 1.0 / std::sqrt(var[c] + p.eps);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (std::int64_t n = 0; n < p.N; ++n)
      for (std::int64_t i = 0; i < p.HW; ++i) {
        const std::int64_t e = (n * p.C + c) * p.HW + i;
        sum_dy += static_cast<double>(dy[e]);
        sum_dy_xhat += static_cast<double>(dy[e]) * (static_cast<double>(x[e]) - mean[c]) * invstd;
      }
    if (dgamma) dgamma[c] = static_cast<T>(sum_dy_xhat);
    if (dbeta) dbeta[c] = static_cast<T>(sum_dy);
    const double g = gamma ? static_cast<double>(gamma[c]) : 1.0;
    for (std::int64_t n = 0; n < p.N; ++n)
      for (std::int64_t i = 0; i < p.HW; ++i) {
        const std::int64_t e = (n * p.C + c) * p.HW + i;
        const double xhat = (static_cast<double>(x[e]) - mean[c]) * invstd;
        dx[e] = static_cast<T>(g * invstd / M * (M * static_cast<double>(dy[e]) - sum_dy - xhat * sum_dy_xhat));
      }
  }
}

}  // namespace ref
}  // namespace minidl
