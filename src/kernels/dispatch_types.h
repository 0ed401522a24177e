#pragma once
// Turns a runtime dtype into a compile-time type: dispatch_floating(dt, "op", [&](auto tag) {
// using T = typename decltype(tag)::type; ... }).
#include <cstdint>

#include "minidl/dtype.h"
#include "minidl/errors.h"

namespace minidl {
namespace kernels {

template <class T> struct TypeTag { using type = T; };

template <class F>
void dispatch_floating(DType dt, const char* op, F&& f) {
  switch (dt) {
    case DType::Float32: f(TypeTag<float>{}); return;
    case DType::Float64: f(TypeTag<double>{}); return;
    default: throw TypeError(detail::str(op, ": expected a floating dtype (float32 or float64), found ", dtype_name(dt)));
  }
}

template <class F>
void dispatch_all(DType dt, F&& f) {
  switch (dt) {
    case DType::Float32: f(TypeTag<float>{}); return;
    case DType::Float64: f(TypeTag<double>{}); return;
    case DType::Int64: f(TypeTag<std::int64_t>{}); return;
  }
}

}  // namespace kernels
}  // namespace minidl
