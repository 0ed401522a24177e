#pragma once
// DistributedDataParallel (LibTorch's torch::nn::parallel / PyTorch's DistributedDataParallel): data-parallel
// training of one module replica per rank.
//
//   auto group = distributed::ProcessGroupNCCL::from_env();
//   Net net; net->to(group->device());
//   nn::parallel::DistributedDataParallel ddp(net.ptr(), group);   // rank 0's weights go to every rank
//   ... net(x) → loss.backward() (gradients are averaged across ranks on the way) → optimizer.step()
//
// At construction rank 0's parameters and buffers are broadcast to all ranks. The trainable parameters are
// grouped into buckets of about bucket_cap_bytes, in reverse order (the order backward produces their
// gradients). Each bucket owns one flat buffer, allocated once, and each parameter's grad becomes a view into
// it; a post-accumulate-grad hook counts the gradients of the bucket, and once all are in, the bucket's
// average across ranks starts on the communication stream while backward continues. Buckets are reduced in a
// fixed order (the same on every rank), and after the last one the library's stream waits for the reductions,
// so optimizer.step() sees averaged gradients. Nothing synchronises the host and nothing allocates in steady
// state: the whole step, reductions included, can be captured into a CUDA graph.
//
// Every trainable parameter must receive a gradient in every backward pass (no unused parameters); a
// parameter that did not is reported by name at the next backward pass.
#include <cstddef>
#include <memory>
#include <vector>

#include "minidl/distributed/process_group.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {
namespace parallel {

struct DistributedDataParallelOptions {
  /// Target bucket size; a parameter larger than this gets a bucket of its own.
  std::size_t bucket_cap_bytes = std::size_t{4} << 20;
  /// Also broadcast rank 0's buffers (e.g. batch-norm statistics) at construction.
  bool broadcast_buffers = true;
  DistributedDataParallelOptions& set_bucket_cap_bytes(std::size_t v) { bucket_cap_bytes = v; return *this; }
  DistributedDataParallelOptions& set_broadcast_buffers(bool v) { broadcast_buffers = v; return *this; }
};

class DistributedDataParallel {
 public:
  /// Throws ValueError when the module has no trainable parameter, a parameter is not on group->device(),
  /// bucket_cap_bytes is 0; TypeError when a trainable parameter is not float32.
  DistributedDataParallel(std::shared_ptr<Module> module, std::shared_ptr<distributed::ProcessGroup> group,
                          DistributedDataParallelOptions options = {});
  /// Removes the gradient hooks (the module goes back to plain single-rank training).
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Module& module() const;
  distributed::ProcessGroup& process_group() const;
  /// The buckets in reduction order, each as indices into module().parameters() (trainable ones only).
  std::vector<std::vector<std::size_t>> bucket_assignment() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parallel
}  // namespace nn
}  // namespace minidl
