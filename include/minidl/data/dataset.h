#pragma once
// A dataset of labelled samples, read a batch at a time: a loader asks for one gather per batch rather than
// one call per sample, which keeps per-sample overhead (virtual calls, allocations) out of the input pipeline.
#include <cstdint>
#include <vector>

#include "minidl/tensor.h"

namespace minidl::data {

/// One mini-batch: data float32 (N, sample_shape...), target int64 (N).
struct Batch {
  Tensor data;
  Tensor target;
};

class Dataset {
 public:
  virtual ~Dataset();
  /// Number of samples.
  virtual std::int64_t size() const = 0;
  /// The samples at `indices` (each in [0, size()), repeats allowed), in that order, as CPU tensors.
  /// Must be safe to call from a thread other than the one that created the dataset (a DataLoader calls it
  /// from its prefetch thread) while no one modifies the dataset.
  virtual Batch get_batch(const std::vector<std::int64_t>& indices) const = 0;
  /// Shape of one sample's data, e.g. {1, 28, 28}.
  virtual Shape sample_shape() const = 0;
};

}  // namespace minidl::data
