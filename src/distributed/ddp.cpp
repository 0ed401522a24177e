#include "minidl/distributed/ddp.h"

#include <string>

#include "core/tensor_impl.h"
#include "minidl/autograd.h"
#include "minidl/errors.h"

namespace minidl {
namespace nn {
namespace parallel {

struct DistributedDataParallel::Impl {
  struct Bucket {
    std::vector<std::size_t> params;  // indices into Impl::params
    Tensor flat;                      // the gradients of `params`, back to back
    std::size_t ready = 0;            // gradients accumulated in the current backward pass
  };

  std::shared_ptr<Module> module;
  std::shared_ptr<distributed::ProcessGroup> group;
  std::vector<Tensor> params;             // trainable parameters, in module order
  std::vector<std::size_t> module_index;  // params[i] is module->parameters()[module_index[i]]
  std::vector<std::string> names;
  std::vector<std::size_t> bucket_of;
  std::vector<Tensor> grad_views;  // params[i]'s gradient inside its bucket's buffer
  std::vector<bool> marked;        // params[i]'s gradient is complete in the current pass
  std::vector<Bucket> buckets;
  std::size_t next_launch = 0;
  std::vector<std::uint64_t> hooks;

  void build_buckets(std::size_t cap_bytes) {
    Bucket current;
    std::size_t bytes = 0;
    for (std::size_t k = params.size(); k-- > 0;) {  // reverse: the order backward completes them
      current.params.push_back(k);
      bytes += params[k].nbytes();
      if (bytes >= cap_bytes) {
        buckets.push_back(std::move(current));
        current = Bucket();
        bytes = 0;
      }
    }
    if (!current.params.empty()) buckets.push_back(std::move(current));
    bucket_of.assign(params.size(), 0);
    grad_views.resize(params.size());
    // Each gradient starts at a multiple of kAlign floats: the kernels (Eigen's aligned maps, vectorised CUDA
    // loads) assume storage-aligned data. The few padding floats stay zero and are reduced along.
    constexpr std::int64_t kAlign = 64;  // 256 bytes, the device allocator's alignment
    const auto padded = [](std::int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      Bucket& bucket = buckets[b];
      std::int64_t numel = 0;
      for (std::size_t k : bucket.params) numel += padded(params[k].numel());
      bucket.flat = zeros({numel}, TensorOptions(kFloat32).device(group->device()));
      std::size_t offset = bucket.flat.unsafe_impl()->byte_offset;
      for (std::size_t k : bucket.params) {
        bucket_of[k] = b;
        grad_views[k] = Tensor(std::make_shared<TensorImpl>(bucket.flat.unsafe_impl()->storage, offset,
                                                            params[k].sizes(), kFloat32));
        offset += static_cast<std::size_t>(padded(params[k].numel())) * sizeof(float);
      }
    }
    marked.assign(params.size(), false);
  }

  std::string missing_gradients() const {
    std::string out;
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (!marked[k]) out += (out.empty() ? "" : ", ") + names[k];
    }
    return out;
  }

  // The hook of params[k]: its gradient for this pass is complete.
  void on_gradient(std::size_t k, const Tensor& leaf) {
    MINIDL_CHECK(!marked[k], AutogradError, "DistributedDataParallel: parameter ", names[k], " received a gradient "
                 "again before the previous backward pass had reduced all buckets; these parameters got no gradient "
                 "in that pass: ", missing_gradients(), " (every trainable parameter must take part in the loss)");
    Tensor& grad = leaf.mutable_grad();
    Tensor view = grad_views[k];
    if (grad.data_ptr() != view.data_ptr()) {
      // A fresh gradient (the first pass, or after zero_grad(set_to_none)): move it into the bucket, where it
      // then stays, so later passes accumulate there directly.
      NoGradGuard no_grad;
      view.copy_(grad);
      grad = view;
    }
    marked[k] = true;
    Bucket& bucket = buckets[bucket_of[k]];
    ++bucket.ready;
    // Launch in bucket order only, so every rank issues the same collectives in the same order.
    while (next_launch < buckets.size() && buckets[next_launch].ready == buckets[next_launch].params.size()) {
      group->allreduce_async({buckets[next_launch].flat}, distributed::ReduceOp::Avg);
      ++next_launch;
    }
    if (next_launch == buckets.size()) {  // the last bucket is out: the optimizer must wait for all of them
      group->wait_pending();
      next_launch = 0;
      for (Bucket& b : buckets) b.ready = 0;
      marked.assign(params.size(), false);
    }
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 std::shared_ptr<distributed::ProcessGroup> group,
                                                 DistributedDataParallelOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  MINIDL_CHECK(module != nullptr, ValueError, "DistributedDataParallel: module is null");
  MINIDL_CHECK(group != nullptr, ValueError, "DistributedDataParallel: process group is null");
  MINIDL_CHECK(options.bucket_cap_bytes > 0, ValueError, "DistributedDataParallel: bucket_cap_bytes must be > 0");
  s.module = std::move(module);
  s.group = std::move(group);
  const Device dev = s.group->device();
  std::vector<Tensor> all;
  std::size_t index = 0;
  for (const auto& [name, p] : s.module->named_parameters()) {
    MINIDL_CHECK(p.device() == dev, ValueError, "DistributedDataParallel: parameter ", name, " is on ", p.device(),
                 ", expected the process group's device ", dev, " (move the module there first)");
    all.push_back(p);
    if (p.requires_grad()) {
      MINIDL_CHECK(p.dtype() == kFloat32, TypeError, "DistributedDataParallel: parameter ", name, " is ", p.dtype(),
                   ", only float32 parameters are supported");
      s.params.push_back(p);
      s.module_index.push_back(index);
      s.names.push_back(name);
    }
    ++index;
  }
  MINIDL_CHECK(!s.params.empty(), ValueError, "DistributedDataParallel: the module has no trainable parameter");
  {
    NoGradGuard no_grad;
    if (options.broadcast_buffers) {
      for (const auto& [name, b] : s.module->named_buffers()) {
        MINIDL_CHECK(b.device() == dev, ValueError, "DistributedDataParallel: buffer ", name, " is on ", b.device(),
                     ", expected ", dev);
        all.push_back(b);
      }
    }
    s.group->broadcast(all, 0);
  }
  s.build_buckets(options.bucket_cap_bytes);
  for (std::size_t k = 0; k < s.params.size(); ++k) {
    Impl* self = impl_.get();
    s.hooks.push_back(s.params[k].register_post_accumulate_grad_hook(
        [self, k](const Tensor& leaf) { self->on_gradient(k, leaf); }));
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  for (std::size_t k = 0; k < impl_->params.size(); ++k) {
    impl_->params[k].remove_post_accumulate_grad_hook(impl_->hooks[k]);
  }
}

Module& DistributedDataParallel::module() const { return *impl_->module; }
distributed::ProcessGroup& DistributedDataParallel::process_group() const { return *impl_->group; }

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_assignment() const {
  std::vector<std::vector<std::size_t>> out;
  for (const auto& b : impl_->buckets) {
    std::vector<std::size_t> ids;
    for (std::size_t k : b.params) ids.push_back(impl_->module_index[k]);
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace parallel
}  // namespace nn
}  // namespace minidl
