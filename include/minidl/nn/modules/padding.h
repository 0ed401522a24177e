#pragma once
// ZeroPad2d, ConstantPad2d, ReflectionPad2d, ReplicationPad2d (LibTorch's), through functional::pad.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "minidl/arg.h"
#include "minidl/nn/functional/padding.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

/// Four sizes (left, right, top, bottom); a single number means all four (LibTorch's ExpandingArray<4>).
struct ExpandingArray4 {
  std::array<std::int64_t, 4> v;
  ExpandingArray4(std::int64_t s) : v{s, s, s, s} {}  // NOLINT(google-explicit-constructor)
  ExpandingArray4(std::initializer_list<std::int64_t> l);
};

struct ZeroPad2dOptions {
  ZeroPad2dOptions(ExpandingArray4 padding) : padding_(padding) {}
  MINIDL_ARG(ExpandingArray4, padding);
};
struct ReflectionPad2dOptions {
  ReflectionPad2dOptions(ExpandingArray4 padding) : padding_(padding) {}
  MINIDL_ARG(ExpandingArray4, padding);
};
struct ReplicationPad2dOptions {
  ReplicationPad2dOptions(ExpandingArray4 padding) : padding_(padding) {}
  MINIDL_ARG(ExpandingArray4, padding);
};
struct ConstantPad2dOptions {
  ConstantPad2dOptions(ExpandingArray4 padding, double value) : padding_(padding), value_(value) {}
  MINIDL_ARG(ExpandingArray4, padding);
  MINIDL_ARG(double, value);
};

/// The four modules' common part: the last two dims of (C, H, W) or (N, C, H, W) input padded by
/// functional::pad in one mode.
class Pad2dImpl : public Module {
 public:
  Pad2dImpl(std::string name, ExpandingArray4 padding, functional::PadFuncOptions::mode_t mode, double value);
  Tensor forward(const Tensor& input) override;
  void pretty_print(std::ostream& os) const override;
  ExpandingArray4 padding;

 private:
  functional::PadFuncOptions::mode_t mode_;
  double value_;
};

class ZeroPad2dImpl : public Pad2dImpl {
 public:
  explicit ZeroPad2dImpl(ZeroPad2dOptions o) : Pad2dImpl("ZeroPad2d", o.padding(), kConstant, 0.0), options(o) {}
  explicit ZeroPad2dImpl(ExpandingArray4 padding) : ZeroPad2dImpl(ZeroPad2dOptions(padding)) {}
  ZeroPad2dOptions options;
};
MINIDL_MODULE(ZeroPad2d);
class ConstantPad2dImpl : public Pad2dImpl {
 public:
  explicit ConstantPad2dImpl(ConstantPad2dOptions o)
      : Pad2dImpl("ConstantPad2d", o.padding(), kConstant, o.value()), options(o) {}
  ConstantPad2dImpl(ExpandingArray4 padding, double value) : ConstantPad2dImpl(ConstantPad2dOptions(padding, value)) {}
  ConstantPad2dOptions options;
};
MINIDL_MODULE(ConstantPad2d);
class ReflectionPad2dImpl : public Pad2dImpl {
 public:
  explicit ReflectionPad2dImpl(ReflectionPad2dOptions o)
      : Pad2dImpl("ReflectionPad2d", o.padding(), kReflect, 0.0), options(o) {}
  explicit ReflectionPad2dImpl(ExpandingArray4 padding) : ReflectionPad2dImpl(ReflectionPad2dOptions(padding)) {}
  ReflectionPad2dOptions options;
};
MINIDL_MODULE(ReflectionPad2d);
class ReplicationPad2dImpl : public Pad2dImpl {
 public:
  explicit ReplicationPad2dImpl(ReplicationPad2dOptions o)
      : Pad2dImpl("ReplicationPad2d", o.padding(), kReplicate, 0.0), options(o) {}
  explicit ReplicationPad2dImpl(ExpandingArray4 padding) : ReplicationPad2dImpl(ReplicationPad2dOptions(padding)) {}
  ReplicationPad2dOptions options;
};
MINIDL_MODULE(ReplicationPad2d);

}  // namespace nn
}  // namespace minidl
