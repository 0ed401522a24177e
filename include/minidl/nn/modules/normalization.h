#pragma once
// Normalisation modules with LibTorch's names and options: LayerNorm, RMSNorm, GroupNorm, InstanceNorm1d/2d.
// Parameters start as PyTorch's (weight ones, bias zeros); printing is LibTorch's pretty_print.
#include <cstdint>
#include <string>
#include <vector>

#include "minidl/nn/functional/normalization.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

class LayerNormImpl : public Module {
 public:
  LayerNormImpl(std::vector<std::int64_t> normalized_shape)
      : LayerNormImpl(LayerNormOptions(std::move(normalized_shape))) {}
  explicit LayerNormImpl(LayerNormOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  LayerNormOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(LayerNorm);

class RMSNormImpl : public Module {
 public:
  RMSNormImpl(std::vector<std::int64_t> normalized_shape) : RMSNormImpl(RMSNormOptions(std::move(normalized_shape))) {}
  explicit RMSNormImpl(RMSNormOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  RMSNormOptions options;
  Tensor weight;
};
MINIDL_MODULE(RMSNorm);

class GroupNormImpl : public Module {
 public:
  GroupNormImpl(std::int64_t num_groups, std::int64_t num_channels)
      : GroupNormImpl(GroupNormOptions(num_groups, num_channels)) {}
  explicit GroupNormImpl(GroupNormOptions options);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  GroupNormOptions options;
  Tensor weight, bias;
};
MINIDL_MODULE(GroupNorm);

/// Shared by InstanceNorm1d ((N, C, L) or unbatched (C, L)) and InstanceNorm2d ((N, C, H, W) or (C, H, W)).
/// Uses the input's statistics in training mode or without track_running_stats, else the running ones.
class InstanceNormImplBase : public Module {
 public:
  InstanceNormImplBase(InstanceNormOptions options, std::string name, std::int64_t spatial_dims);
  Tensor forward(const Tensor& input) override;
  void reset_parameters();
  void reset_running_stats();
  void pretty_print(std::ostream& os) const override;
  InstanceNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  std::int64_t spatial_dims_;
};

class InstanceNorm1dImpl : public InstanceNormImplBase {
 public:
  explicit InstanceNorm1dImpl(InstanceNormOptions options)
      : InstanceNormImplBase(std::move(options), "InstanceNorm1d", 1) {}
  explicit InstanceNorm1dImpl(std::int64_t num_features) : InstanceNorm1dImpl(InstanceNormOptions(num_features)) {}
};
MINIDL_MODULE(InstanceNorm1d);
class InstanceNorm2dImpl : public InstanceNormImplBase {
 public:
  explicit InstanceNorm2dImpl(InstanceNormOptions options)
      : InstanceNormImplBase(std::move(options), "InstanceNorm2d", 2) {}
  explicit InstanceNorm2dImpl(std::int64_t num_features) : InstanceNorm2dImpl(InstanceNormOptions(num_features)) {}
};
MINIDL_MODULE(InstanceNorm2d);

}  // namespace nn
}  // namespace minidl
