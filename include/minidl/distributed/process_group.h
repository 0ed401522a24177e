#pragma once
// Collectives across the ranks of a data-parallel job, as LibTorch's c10d::ProcessGroup. ProcessGroupNCCL runs
// them with NCCL, one process per GPU. Collectives are stream-ordered: they start after the work already
// queued on the library's stream (gpu::stream()) and work queued later sees their result, with no host wait,
// so a training step that uses them can still be captured into a CUDA graph.
#include <chrono>
#include <memory>
#include <vector>

#include "minidl/device.h"
#include "minidl/distributed/env.h"
#include "minidl/tensor.h"

namespace minidl {
namespace distributed {

enum class ReduceOp { Sum, Avg };

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Where this rank's tensors must live.
  virtual Device device() const = 0;

  /// Starts reducing `tensors` in place across ranks (one group of collectives). It runs after the work queued
  /// so far on the library's stream, but that stream does not wait for it until wait_pending() (so backward
  /// can go on meanwhile). Every rank must issue the same collectives in the same order.
  virtual void allreduce_async(const std::vector<Tensor>& tensors, ReduceOp op) = 0;
  /// Work queued on the library's stream after this call waits for every allreduce_async issued so far.
  virtual void wait_pending() = 0;
  /// allreduce_async + wait_pending.
  void allreduce(const std::vector<Tensor>& tensors, ReduceOp op = ReduceOp::Sum);
  /// Overwrites `tensors` on every rank with rank `root`'s (stream-ordered).
  virtual void broadcast(const std::vector<Tensor>& tensors, int root = 0) = 0;
  /// Blocks the calling thread until every rank has called barrier() (through the rendezvous store).
  virtual void barrier() = 0;
};

struct ProcessGroupOptions {
  /// Rendezvous (connecting, sharing the NCCL id, barriers) gives up after this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  /// How often the watchdog checks for a dead rank and for NCCL's asynchronous errors.
  std::chrono::milliseconds watchdog_interval{std::chrono::milliseconds(100)};
};

/// True when this build of minidl has NCCL (MINIDL_NCCL_ENABLED).
bool nccl_available();

/// NCCL collectives on GPU LOCAL_RANK. Rank 0 creates the NCCL unique id and shares it through a TCPStore
/// at MASTER_ADDR:MASTER_PORT. A watchdog thread checks the store and NCCL's asynchronous error state: when a
/// rank dies (its store connection closes without a goodbye, or rank 0's store disappears) or NCCL reports an
/// error, it prints which rank failed, aborts the communicator and ends this process with exit status 1, so
/// no rank hangs in a collective whose peer is gone.
class ProcessGroupNCCL : public ProcessGroup {
 public:
  /// Joins the job described by `env`: selects the device cuda:LOCAL_RANK for this thread, rendezvous,
  /// creates the communicator. Throws ValueError when built without NCCL ("minidl was built without NCCL"),
  /// when LOCAL_RANK names no visible GPU; IOError when the rendezvous fails; CudaError for NCCL errors.
  ProcessGroupNCCL(const DistributedEnv& env, ProcessGroupOptions options = {});
  /// The same from the environment (env_from_environment()).
  static std::shared_ptr<ProcessGroupNCCL> from_env(ProcessGroupOptions options = {});
  /// Waits for this rank's outstanding collectives, then leaves the job cleanly; destroyed while an exception
  /// unwinds, aborts the communicator instead and leaves as a failed rank (the others then stop).
  ~ProcessGroupNCCL() override;
  ProcessGroupNCCL(const ProcessGroupNCCL&) = delete;
  ProcessGroupNCCL& operator=(const ProcessGroupNCCL&) = delete;

  int rank() const override;
  int size() const override;
  Device device() const override;
  void allreduce_async(const std::vector<Tensor>& tensors, ReduceOp op) override;
  void wait_pending() override;
  void broadcast(const std::vector<Tensor>& tensors, int root = 0) override;
  void barrier() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Metric reduction: sums each (small, e.g. 0-d) tensor across ranks in place and returns the sums on the
/// host, in order (one device synchronisation).
std::vector<double> all_reduce_sums(ProcessGroup& group, const std::vector<Tensor>& values);

}  // namespace distributed
}  // namespace minidl
