#pragma once
// Eigen views of a contiguous tensor's elements as a flat vector, for the CPU kernels that evaluate Eigen
// expressions on the library's thread pool (fill, copy, the integer AddScalar).
#include <unsupported/Eigen/CXX11/Tensor>

#include "minidl/tensor.h"

namespace minidl {
namespace cpu {

template <class T>
using Vec = Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor, Eigen::Index>>;  // views start anywhere
template <class T>
using CVec = Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, Eigen::Index>>;
template <class T>
using Mat = Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor, Eigen::Index>>;

template <class T>
Vec<T> vec(Tensor& t) { return Vec<T>(t.data_ptr<T>(), t.numel()); }
template <class T>
CVec<T> cvec(const Tensor& t) { return CVec<T>(t.data_ptr<T>(), t.numel()); }

}  // namespace cpu
}  // namespace minidl
