#pragma once
// ConvTranspose2d, Conv1d, ConvTranspose1d with LibTorch's options and PyTorch's initialisation.
#include <cstdint>
#include <vector>

#include "minidl/arg.h"
#include "minidl/int_array_ref.h"
#include "minidl/nn/functional/conv.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

struct ConvTranspose2dOptions {
  ConvTranspose2dOptions(std::int64_t in, std::int64_t out, ExpandingArray2 kernel)
      : in_channels_(in), out_channels_(out), kernel_size_(kernel) {}
  MINIDL_ARG(std::int64_t, in_channels);
  MINIDL_ARG(std::int64_t, out_channels);
  MINIDL_ARG(ExpandingArray2, kernel_size);
  MINIDL_ARG(ExpandingArray2, stride) = 1;
  MINIDL_ARG(ExpandingArray2, padding) = 0;
  MINIDL_ARG(ExpandingArray2, output_padding) = 0;
  MINIDL_ARG(std::int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(ExpandingArray2, dilation) = 1;
};

/// weight (in_channels, out_channels/groups, kH, kW), bias (out_channels); initialised as PyTorch's
/// (kaiming_uniform_(a=sqrt(5)), the bias uniform in +-1/sqrt(fan_in), fan_in = out_channels/groups * kH * kW).
class ConvTranspose2dImpl : public Module {
 public:
  ConvTranspose2dImpl(std::int64_t in, std::int64_t out, ExpandingArray2 kernel)
      : ConvTranspose2dImpl(ConvTranspose2dOptions(in, out, kernel)) {}
  explicit ConvTranspose2dImpl(ConvTranspose2dOptions options);
  Tensor forward(const Tensor& input) override;
  /// output_size ((H, W), or (N, C, H, W)) picks the output_padding that gives it, as PyTorch; it must lie
  /// between the smallest output and that plus stride - 1.
  Tensor forward(const Tensor& input, IntArrayRef output_size);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  ConvTranspose2dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(ConvTranspose2d);

struct Conv1dOptions {
  Conv1dOptions(std::int64_t in, std::int64_t out, std::int64_t kernel)
      : in_channels_(in), out_channels_(out), kernel_size_(kernel) {}
  MINIDL_ARG(std::int64_t, in_channels);
  MINIDL_ARG(std::int64_t, out_channels);
  MINIDL_ARG(std::int64_t, kernel_size);
  MINIDL_ARG(std::int64_t, stride) = 1;
  MINIDL_ARG(std::int64_t, padding) = 0;
  MINIDL_ARG(std::int64_t, dilation) = 1;
  MINIDL_ARG(std::int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
};

/// weight (out_channels, in_channels/groups, k), bias (out_channels); PyTorch's initialisation.
class Conv1dImpl : public Module {
 public:
  Conv1dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel) : Conv1dImpl(Conv1dOptions(in, out, kernel)) {}
  explicit Conv1dImpl(Conv1dOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  Conv1dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(Conv1d);

struct ConvTranspose1dOptions {
  ConvTranspose1dOptions(std::int64_t in, std::int64_t out, std::int64_t kernel)
      : in_channels_(in), out_channels_(out), kernel_size_(kernel) {}
  MINIDL_ARG(std::int64_t, in_channels);
  MINIDL_ARG(std::int64_t, out_channels);
  MINIDL_ARG(std::int64_t, kernel_size);
  MINIDL_ARG(std::int64_t, stride) = 1;
  MINIDL_ARG(std::int64_t, padding) = 0;
  MINIDL_ARG(std::int64_t, output_padding) = 0;
  MINIDL_ARG(std::int64_t, groups) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(std::int64_t, dilation) = 1;
};

/// weight (in_channels, out_channels/groups, k), bias (out_channels); PyTorch's initialisation.
class ConvTranspose1dImpl : public Module {
 public:
  ConvTranspose1dImpl(std::int64_t in, std::int64_t out, std::int64_t kernel)
      : ConvTranspose1dImpl(ConvTranspose1dOptions(in, out, kernel)) {}
  explicit ConvTranspose1dImpl(ConvTranspose1dOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  ConvTranspose1dOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(ConvTranspose1d);

}  // namespace nn
}  // namespace minidl
