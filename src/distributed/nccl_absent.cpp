// Build without NCCL: the NCCL process group exists in the API but says it is not built in.
#include "minidl/config.h"
#if !MINIDL_NCCL_ENABLED
#include "minidl/distributed/process_group.h"
#include "minidl/errors.h"

namespace minidl {
namespace distributed {

namespace {
[[noreturn]] void throw_nccl_not_built() {
  throw ValueError("minidl was built without NCCL: multi-GPU training needs a CUDA build with NCCL found at "
                   "configure time (see docs/DISTRIBUTED.md)");
}
}  // namespace

struct ProcessGroupNCCL::Impl {};
ProcessGroupNCCL::ProcessGroupNCCL(const DistributedEnv&, ProcessGroupOptions) { throw_nccl_not_built(); }
std::shared_ptr<ProcessGroupNCCL> ProcessGroupNCCL::from_env(ProcessGroupOptions) { throw_nccl_not_built(); }
ProcessGroupNCCL::~ProcessGroupNCCL() = default;
int ProcessGroupNCCL::rank() const { throw_nccl_not_built(); }
int ProcessGroupNCCL::size() const { throw_nccl_not_built(); }
Device ProcessGroupNCCL::device() const { throw_nccl_not_built(); }
void ProcessGroupNCCL::allreduce_async(const std::vector<Tensor>&, ReduceOp) { throw_nccl_not_built(); }
void ProcessGroupNCCL::wait_pending() { throw_nccl_not_built(); }
void ProcessGroupNCCL::broadcast(const std::vector<Tensor>&, int) { throw_nccl_not_built(); }
void ProcessGroupNCCL::barrier() { throw_nccl_not_built(); }

}  // namespace distributed
}  // namespace minidl
#endif
