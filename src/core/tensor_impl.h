#pragma once
// What a Tensor handle points to: a shared Storage (the bytes), this tensor's geometry in it (sizes, strides
// in elements, the byte offset of element [0, ..., 0]) and dtype, and its autograd metadata. Views share the
// storage and differ in geometry; a contiguous tensor has row-major strides.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "minidl/autograd.h"
#include "minidl/tensor.h"

namespace minidl {

/// A block of device or host memory. Freed through the allocator of its device when the last owner goes.
class Storage {
 public:
  Storage(std::size_t nbytes, Device device);
  /// Memory the caller owns (from_blob): never freed here; `deleter`, when set, runs on it instead.
  Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> deleter);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  /// Bumped by every in-place write through any tensor that views this storage.
  std::atomic<std::uint64_t> version{0};

 private:
  void* data_ = nullptr;
  std::size_t nbytes_;
  Device device_;
  bool external_ = false;
  std::function<void(void*)> deleter_;
};

/// Row-major strides of a contiguous tensor of `shape` (size-1 dims get the stride they would have anyway).
Shape contiguous_strides(const Shape& shape);
/// True when a tensor of `shape` and `strides` visits its elements in row-major order without gaps (dims of
/// size 1 may have any stride; a tensor without elements is contiguous), as PyTorch's is_contiguous().
bool strides_are_contiguous(const Shape& shape, const Shape& strides);

class TensorImpl {
 public:
  /// A contiguous tensor of `shape` starting at `byte_offset`.
  TensorImpl(std::shared_ptr<Storage> storage, std::size_t byte_offset, Shape shape, DType dtype);
  /// A tensor with any strides (a view).
  TensorImpl(std::shared_ptr<Storage> storage, std::size_t byte_offset, Shape shape, Shape strides, DType dtype);

  std::shared_ptr<Storage> storage;
  std::size_t byte_offset;
  Shape shape;
  Shape strides;  // in elements, one per dim
  DType dtype;
  std::int64_t numel;
  bool contiguous;  // strides_are_contiguous(shape, strides), kept in step by the constructors
  std::shared_ptr<TensorImpl> view_base;  // for a view: the tensor whose storage it views (null otherwise)

  // autograd
  bool requires_grad = false;                        // set on leaves by requires_grad_()
  Tensor grad;                                       // accumulated gradient
  std::shared_ptr<autograd::Node> grad_fn;           // node that produced this tensor (non-leaves)
  std::weak_ptr<autograd::Node> grad_accumulator;    // AccumulateGrad node of a leaf, created on demand
  // Leaf hooks run by AccumulateGrad after each accumulation, with their handles (in registration order).
  std::vector<std::pair<std::uint64_t, std::function<void(const Tensor&)>>> post_accumulate_grad_hooks;

  void* data() const { return static_cast<char*>(storage->data()) + byte_offset; }
  /// Whether no other tensor reaches this one's storage: it is the storage's only tensor, or a view whose base
  /// nothing but this view still holds (a reshape of a temporary, as a gradient often is).
  bool storage_exclusive() const {
    if (!view_base) return storage.use_count() == 1;
    return view_base.use_count() == 1 && storage.use_count() == 2;
  }
};

}  // namespace minidl
