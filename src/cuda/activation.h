#pragma once
// An activation applied in place to n device values, on gpu::stream(): the epilogue of a layer kernel whose
// main work ran in a library that cannot apply it (cuDNN's convolution algorithms). Same functor as the ops.
#include <cstdint>

#include "kernels/elementwise.h"

namespace minidl {
namespace gpu {

template <class T>
void activate_in_place(kernels::Activation act, T* y, std::int64_t n);

}  // namespace gpu
}  // namespace minidl
