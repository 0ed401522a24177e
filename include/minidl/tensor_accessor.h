#pragma once
// TensorAccessor<T, N>: LibTorch's typed view of a CPU tensor's elements for loops written by hand,
// `auto a = t.accessor<float, 2>(); a[i][j] += 1.f;`, reading and writing through the tensor's strides (views
// included). Tensor::accessor checks the dtype, the number of dims and the device once; indexing then checks
// nothing, as LibTorch's does, so an index must lie in [0, size(d)). The accessor points into the tensor's sizes and
// storage: it is valid while the tensor is (hence no accessor of a temporary tensor).
#include <cstddef>
#include <cstdint>

#include "minidl/shape.h"

namespace minidl {

template <class T, std::size_t N>
class TensorAccessorBase {
 public:
  TensorAccessorBase(T* data, const std::int64_t* sizes, const std::int64_t* strides)
      : data_(data), sizes_(sizes), strides_(strides) {}
  Shape sizes() const { return Shape(sizes_, sizes_ + N); }
  Shape strides() const { return Shape(strides_, strides_ + N); }
  std::int64_t size(std::size_t dim) const { return sizes_[dim]; }
  std::int64_t stride(std::size_t dim) const { return strides_[dim]; }
  T* data() { return data_; }
  const T* data() const { return data_; }

 protected:
  T* data_;
  const std::int64_t* sizes_;
  const std::int64_t* strides_;
};

/// a[i] is the (N-1)-dim accessor of index i along the first dim.
template <class T, std::size_t N>
class TensorAccessor : public TensorAccessorBase<T, N> {
 public:
  using TensorAccessorBase<T, N>::TensorAccessorBase;
  TensorAccessor<T, N - 1> operator[](std::int64_t i) {
    return TensorAccessor<T, N - 1>(this->data_ + this->strides_[0] * i, this->sizes_ + 1, this->strides_ + 1);
  }
  const TensorAccessor<T, N - 1> operator[](std::int64_t i) const {
    return TensorAccessor<T, N - 1>(this->data_ + this->strides_[0] * i, this->sizes_ + 1, this->strides_ + 1);
  }
};

/// The last dim: a[i] is the element itself.
template <class T>
class TensorAccessor<T, 1> : public TensorAccessorBase<T, 1> {
 public:
  using TensorAccessorBase<T, 1>::TensorAccessorBase;
  T& operator[](std::int64_t i) { return this->data_[this->strides_[0] * i]; }
  const T& operator[](std::int64_t i) const { return this->data_[this->strides_[0] * i]; }
};

}  // namespace minidl
