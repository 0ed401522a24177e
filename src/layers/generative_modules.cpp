// The modules of generative models' layers (include/minidl/nn/modules/generative.h): parameters, PyTorch's
// initialisation, printing, and forward through the functional ops.
#include <ostream>

#include "layers/default_init.h"
#include "minidl/nn/modules.h"

namespace minidl {
namespace nn {
namespace F = functional;

namespace {
std::ostream& operator<<(std::ostream& os, const ExpandingArray2& a) { return os << "(" << a.h << ", " << a.w << ")"; }
/// A 1-d size as PyTorch prints it: a tuple of one, "(3,)".
std::string tuple1(std::int64_t v) { return ::minidl::detail::str("(", v, ",)"); }

void check_channels(const char* module, std::int64_t in, std::int64_t out, std::int64_t groups, std::int64_t kernel_h,
                    std::int64_t kernel_w) {
  MINIDL_CHECK(in > 0 && out > 0 && groups > 0 && in % groups == 0 && out % groups == 0, ValueError, module,
               ": in_channels (", in, ") and out_channels (", out, ") must be positive and divisible by groups (",
               groups, ")");
  MINIDL_CHECK(kernel_h > 0 && kernel_w > 0, ValueError, module, ": kernel_size must be positive, found (", kernel_h,
               ", ", kernel_w, ")");
}

/// PyTorch's extra_repr of a convolution: the sizes that differ from their defaults.
template <class Sz>
void print_conv(std::ostream& os, const char* name, std::int64_t in, std::int64_t out, const Sz& kernel,
                const Sz& stride, const Sz& padding, const Sz& dilation, const Sz* output_padding, std::int64_t groups,
                bool bias, const Sz& zero, const Sz& one) {
  os << name << "(" << in << ", " << out << ", kernel_size=" << kernel << ", stride=" << stride;
  if (!(padding == zero)) os << ", padding=" << padding;
  if (!(dilation == one)) os << ", dilation=" << dilation;
  if (output_padding != nullptr && !(*output_padding == zero)) os << ", output_padding=" << *output_padding;
  if (groups != 1) os << ", groups=" << groups;
  if (!bias) os << ", bias=false";
  os << ")";
}
}  // namespace

// ---- convolutions ---------------------------------------------------------------------------------------------

ConvTranspose2dImpl::ConvTranspose2dImpl(ConvTranspose2dOptions o) : Module("ConvTranspose2d"), options(std::move(o)) {
  check_channels("ConvTranspose2d", options.in_channels(), options.out_channels(), options.groups(),
                 options.kernel_size().h, options.kernel_size().w);
  weight = register_parameter("weight", empty({options.in_channels(), options.out_channels() / options.groups(),
                                               options.kernel_size().h, options.kernel_size().w}));
  if (options.bias()) bias = register_parameter("bias", empty({options.out_channels()}));
  reset_parameters();
}
void ConvTranspose2dImpl::reset_parameters() { layers::default_init(weight, bias); }
Tensor ConvTranspose2dImpl::forward(const Tensor& input) {
  return F::conv_transpose2d(input, weight, bias, options.stride(), options.padding(), options.output_padding(),
                             options.groups(), options.dilation());
}
Tensor ConvTranspose2dImpl::forward(const Tensor& input, IntArrayRef output_size) {
  MINIDL_CHECK(input.defined() && input.dim() == 4, ValueError,
               "ConvTranspose2d: input must be (N, C_in, H, W), found shape ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  MINIDL_CHECK(output_size.size() == 2 || output_size.size() == 4, ValueError,
               "ConvTranspose2d: output_size must be (H, W) or (N, C, H, W), found ", output_size.size(), " sizes");
  const ExpandingArray2 k = options.kernel_size(), s = options.stride(), p = options.padding(), d = options.dilation();
  const std::int64_t want_h = output_size[output_size.size() - 2], want_w = output_size[output_size.size() - 1];
  const std::int64_t min_h = (input.size(2) - 1) * s.h - 2 * p.h + d.h * (k.h - 1) + 1;
  const std::int64_t min_w = (input.size(3) - 1) * s.w - 2 * p.w + d.w * (k.w - 1) + 1;
  MINIDL_CHECK(want_h >= min_h && want_h < min_h + s.h && want_w >= min_w && want_w < min_w + s.w, ValueError,
               "ConvTranspose2d: output_size (", want_h, ", ", want_w, ") must lie between (", min_h, ", ", min_w,
               ") and (", min_h + s.h - 1, ", ", min_w + s.w - 1, ") for input of shape ", shape_str(input.sizes()));
  return F::conv_transpose2d(input, weight, bias, s, p, {want_h - min_h, want_w - min_w}, options.groups(), d);
}
void ConvTranspose2dImpl::pretty_print(std::ostream& os) const {
  const ExpandingArray2 zero = 0, one = 1;
  print_conv(os, "ConvTranspose2d", options.in_channels(), options.out_channels(), options.kernel_size(),
             options.stride(), options.padding(), options.dilation(), &options.output_padding(), options.groups(),
             options.bias(), zero, one);
}

Conv1dImpl::Conv1dImpl(Conv1dOptions o) : Module("Conv1d"), options(std::move(o)) {
  check_channels("Conv1d", options.in_channels(), options.out_channels(), options.groups(), 1, options.kernel_size());
  weight = register_parameter(
      "weight", empty({options.out_channels(), options.in_channels() / options.groups(), options.kernel_size()}));
  if (options.bias()) bias = register_parameter("bias", empty({options.out_channels()}));
  reset_parameters();
}
void Conv1dImpl::reset_parameters() { layers::default_init(weight, bias); }
Tensor Conv1dImpl::forward(const Tensor& input) {
  return F::conv1d(input, weight, bias, options.stride(), options.padding(), options.dilation(), options.groups());
}
void Conv1dImpl::pretty_print(std::ostream& os) const {
  print_conv(os, "Conv1d", options.in_channels(), options.out_channels(), tuple1(options.kernel_size()),
             tuple1(options.stride()), tuple1(options.padding()), tuple1(options.dilation()),
             static_cast<const std::string*>(nullptr), options.groups(), options.bias(), tuple1(0), tuple1(1));
}

ConvTranspose1dImpl::ConvTranspose1dImpl(ConvTranspose1dOptions o) : Module("ConvTranspose1d"), options(std::move(o)) {
  check_channels("ConvTranspose1d", options.in_channels(), options.out_channels(), options.groups(), 1,
                 options.kernel_size());
  weight = register_parameter(
      "weight", empty({options.in_channels(), options.out_channels() / options.groups(), options.kernel_size()}));
  if (options.bias()) bias = register_parameter("bias", empty({options.out_channels()}));
  reset_parameters();
}
void ConvTranspose1dImpl::reset_parameters() { layers::default_init(weight, bias); }
Tensor ConvTranspose1dImpl::forward(const Tensor& input) {
  return F::conv_transpose1d(input, weight, bias, options.stride(), options.padding(), options.output_padding(),
                             options.groups(), options.dilation());
}
void ConvTranspose1dImpl::pretty_print(std::ostream& os) const {
  const std::string output_padding = tuple1(options.output_padding());
  print_conv(os, "ConvTranspose1d", options.in_channels(), options.out_channels(), tuple1(options.kernel_size()),
             tuple1(options.stride()), tuple1(options.padding()), tuple1(options.dilation()), &output_padding,
             options.groups(), options.bias(), tuple1(0), tuple1(1));
}

// ---- padding ----------------------------------------------------------------------------------------------------

ExpandingArray4::ExpandingArray4(std::initializer_list<std::int64_t> l) {
  MINIDL_CHECK(l.size() == 1 || l.size() == 4, ValueError,
               "expected 1 or 4 padding sizes (left, right, top, bottom), found ", l.size());
  for (std::size_t i = 0; i < 4; ++i) v[i] = l.size() == 1 ? *l.begin() : *(l.begin() + i);
}

Pad2dImpl::Pad2dImpl(std::string name, ExpandingArray4 padding_, functional::PadFuncOptions::mode_t mode, double value)
    : Module(std::move(name)), padding(padding_), mode_(mode), value_(value) {}
Tensor Pad2dImpl::forward(const Tensor& input) {
  MINIDL_CHECK(input.defined() && (input.dim() == 3 || input.dim() == 4), ValueError, name(),
               ": input must be (C, H, W) or (N, C, H, W), found shape ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  return F::pad(input,
                F::PadFuncOptions({padding.v[0], padding.v[1], padding.v[2], padding.v[3]}).mode(mode_).value(value_));
}
void Pad2dImpl::pretty_print(std::ostream& os) const {
  os << name() << "(padding=(" << padding.v[0] << ", " << padding.v[1] << ", " << padding.v[2] << ", " << padding.v[3]
     << ")";
  if (name() == "ConstantPad2d") os << ", value=" << value_;
  os << ")";
}

// ---- upsampling, pixel shuffle ------------------------------------------------------------------------------------

Tensor UpsampleImpl::forward(const Tensor& input) {
  F::InterpolateFuncOptions o;
  o.size(options.size()).scale_factor(options.scale_factor()).align_corners(options.align_corners());
  std::visit([&](const auto& m) { o.mode(m); }, options.mode());
  return F::interpolate(input, o);
}
void UpsampleImpl::pretty_print(std::ostream& os) const {
  const auto list = [&os](const auto& values) {
    os << "[";
    for (std::size_t i = 0; i < values.size(); ++i) os << (i > 0 ? ", " : "") << values[i];
    os << "]";
  };
  os << "Upsample(";
  if (options.scale_factor().has_value()) {
    os << "scale_factor=";
    list(*options.scale_factor());
  } else {
    os << "size=";
    if (options.size().has_value()) list(*options.size());
  }
  os << ", mode=" << enumtype::get_enum_name(options.mode()) << ")";
}

Tensor PixelShuffleImpl::forward(const Tensor& input) { return F::pixel_shuffle(input, options); }
void PixelShuffleImpl::pretty_print(std::ostream& os) const {
  os << "PixelShuffle(upscale_factor=" << options.upscale_factor() << ")";
}
Tensor PixelUnshuffleImpl::forward(const Tensor& input) { return F::pixel_unshuffle(input, options); }
void PixelUnshuffleImpl::pretty_print(std::ostream& os) const {
  os << "PixelUnshuffle(downscale_factor=" << options.downscale_factor() << ")";
}

}  // namespace nn
}  // namespace minidl
