#pragma once
// Tensor lists of the multi-tensor kernels (gradient-norm clipping, GradScaler's inf check): up to kMaxListTensors
// tensors of one dtype passed by value as a kernel argument, a grid of one row of blocks per tensor (sized for the
// longest), and the 16-byte packs each tensor is walked in where it starts aligned, then its tail one element at a
// time. One launch per list instead of one per tensor: a GPT has a hundred parameters.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/context.h"
#include "kernels/dispatch_types.h"
#include "minidl/tensor.h"

namespace minidl {
namespace gpu {

/// Threads per block of the list kernels.
constexpr int kListThreads = 256;
/// Tensors per launch; keeps the kernel arguments well under 4 KiB.
constexpr int kMaxListTensors = 64;

template <class T>
struct TensorList {
  int count = 0;
  std::int64_t numel[kMaxListTensors] = {};
  T* data[kMaxListTensors] = {};
};
static_assert(sizeof(TensorList<double>) <= 4096, "tensor-list kernel arguments exceed 4 KiB");

/// Elements per 16-byte pack.
template <class T>
constexpr int kPack = 16 / static_cast<int>(sizeof(T));

/// How many leading elements of x (n of them) the pack loops cover: whole packs when x is 16-byte aligned.
template <class T>
__device__ std::int64_t packed_prefix(const T* x, std::int64_t n) {
  return reinterpret_cast<std::uintptr_t>(x) % 16 == 0 ? n / kPack<T> * kPack<T> : 0;
}

/// The non-empty tensors of dtype T among `tensors`, cut into lists of at most kMaxListTensors.
template <class T>
std::vector<TensorList<T>> lists_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorList<T>> lists;
  for (const Tensor& t : tensors) {
    if (t.dtype() != dtype_of<T>::value || t.numel() == 0) continue;
    if (lists.empty() || lists.back().count == kMaxListTensors) lists.emplace_back();
    TensorList<T>& l = lists.back();
    l.numel[l.count] = t.numel();
    l.data[l.count] = t.data_ptr<T>();
    ++l.count;
  }
  return lists;
}

/// The grid of a list: blocks along x for the longest tensor's packs (at most max_blocks), one y per tensor.
template <class T>
dim3 grid_of(const TensorList<T>& list, unsigned int max_blocks) {
  std::int64_t longest = 0;
  for (int t = 0; t < list.count; ++t) longest = std::max(longest, list.numel[t]);
  const std::int64_t packs = (longest + kPack<T> - 1) / kPack<T>;
  return dim3(std::min(blocks_for(packs, kListThreads), max_blocks), static_cast<unsigned int>(list.count));
}

}  // namespace gpu
}  // namespace minidl
