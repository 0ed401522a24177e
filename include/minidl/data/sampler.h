#pragma once
// Samplers: which dataset indices a DataLoader visits in an epoch, and in what order
// (DataLoaderOptions::sampler). DistributedSampler gives each rank of a data-parallel job its own shard.
#include <cstdint>
#include <vector>

namespace minidl::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Indices per epoch (the same for every epoch).
  virtual std::int64_t size() const = 0;
  /// The indices of `epoch` (>= 0), each in [0, dataset size); size() of them.
  virtual std::vector<std::int64_t> indices(std::int64_t epoch) const = 0;
};

/// LibTorch's / PyTorch's DistributedSampler: every rank computes the same seeded permutation of the epoch
/// (data::epoch_order), pads it by repeating its start to a multiple of num_replicas (or, with drop_last,
/// cuts the tail), and takes every num_replicas-th index starting at its rank. The shards are disjoint apart
/// from the padding, have equal length (so every rank runs the same number of steps), and together cover the
/// whole dataset.
class DistributedSampler : public Sampler {
 public:
  /// Throws ValueError for dataset_size < 1, num_replicas < 1, rank outside [0, num_replicas), or drop_last
  /// leaving no sample per rank.
  DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     std::uint64_t seed = 0, bool drop_last = false);
  std::int64_t size() const override { return num_samples_; }
  std::vector<std::int64_t> indices(std::int64_t epoch) const override;

 private:
  std::int64_t dataset_size_;
  int num_replicas_, rank_;
  bool shuffle_;
  std::uint64_t seed_;
  std::int64_t num_samples_;
};

}  // namespace minidl::data
