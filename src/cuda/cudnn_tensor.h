#pragma once
// Small cuDNN helpers shared by the convolution and batch-norm wrappers: the cuDNN data type of a C++ type,
// the checked narrowing of a shape field to cuDNN's int, and an owning 4-d tensor descriptor.
#include <cudnn.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "cuda/context.h"
#include "minidl/errors.h"
#include "minidl/float16.h"

namespace minidl {
namespace gpu {

template <class T> struct cudnn_type;
template <> struct cudnn_type<float> { static constexpr cudnnDataType_t value = CUDNN_DATA_FLOAT; };
template <> struct cudnn_type<double> { static constexpr cudnnDataType_t value = CUDNN_DATA_DOUBLE; };
template <> struct cudnn_type<BFloat16> { static constexpr cudnnDataType_t value = CUDNN_DATA_BFLOAT16; };
template <> struct cudnn_type<Half> { static constexpr cudnnDataType_t value = CUDNN_DATA_HALF; };
/// The type of cuDNN's alpha / beta scaling factors for data of type T: double for double, float otherwise
/// (16-bit data is computed in float32).
template <class T> using cudnn_scale_t = std::conditional_t<std::is_same<T, double>::value, double, float>;

/// cuDNN's legacy API takes int dimensions; a larger shape must fail loudly instead of wrapping around.
inline int cudnn_dim(std::int64_t v, const char* op, const char* field) {
  MINIDL_CHECK(v >= 0 && v <= std::numeric_limits<int>::max(), ValueError, op, ": ", field, " = ", v,
               " exceeds cuDNN's limit of ", std::numeric_limits<int>::max());
  return static_cast<int>(v);
}

/// Owns a cudnnTensorDescriptor_t.
class TensorDescriptor {
 public:
  TensorDescriptor() { MINIDL_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_)); }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;

  /// Describes a packed NCHW tensor. cuDNN indexes with int, so the element count must fit too.
  void set_nchw(cudnnDataType_t type, int n, int c, int h, int w, const char* op) {
    const std::int64_t count = std::int64_t{n} * c * h * w;
    MINIDL_CHECK(count <= std::numeric_limits<int>::max(), ValueError, op, ": a tensor of ", n, "x", c, "x", h, "x", w,
                 " = ", count, " elements exceeds cuDNN's limit of ", std::numeric_limits<int>::max());
    MINIDL_CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, type, n, c, h, w));
  }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

}  // namespace gpu
}  // namespace minidl
