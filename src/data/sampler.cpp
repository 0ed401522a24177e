#include "minidl/data/sampler.h"

#include "minidl/data/data_loader.h"
#include "minidl/errors.h"

namespace minidl::data {

DistributedSampler::DistributedSampler(std::int64_t dataset_size, int num_replicas, int rank, bool shuffle,
                                       std::uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  MINIDL_CHECK(dataset_size >= 1, ValueError, "DistributedSampler: dataset_size must be >= 1, found ", dataset_size);
  MINIDL_CHECK(num_replicas >= 1, ValueError, "DistributedSampler: num_replicas must be >= 1, found ", num_replicas);
  MINIDL_CHECK(rank >= 0 && rank < num_replicas, ValueError, "DistributedSampler: rank must be in [0, ", num_replicas,
               "), found ", rank);
  num_samples_ = drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  MINIDL_CHECK(num_samples_ >= 1, ValueError, "DistributedSampler: drop_last with ", dataset_size, " samples over ",
               num_replicas, " ranks leaves none per rank");
}

std::vector<std::int64_t> DistributedSampler::indices(std::int64_t epoch) const {
  std::vector<std::int64_t> order = epoch_order(dataset_size_, shuffle_, seed_, epoch);
  const std::int64_t total = num_samples_ * num_replicas_;
  // Pad by repeating the order from its start (more than once when the set is smaller than the padding).
  for (std::int64_t i = dataset_size_; i < total; ++i)
    order.push_back(order[static_cast<std::size_t>(i - dataset_size_)]);
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  for (std::int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[static_cast<std::size_t>(i)]);
  return mine;
}

}  // namespace minidl::data
