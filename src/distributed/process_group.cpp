#include "minidl/distributed/process_group.h"

#include "minidl/config.h"

namespace minidl {
namespace distributed {

bool nccl_available() { return MINIDL_NCCL_ENABLED != 0; }

void ProcessGroup::allreduce(const std::vector<Tensor>& tensors, ReduceOp op) {
  allreduce_async(tensors, op);
  wait_pending();
}

std::vector<double> all_reduce_sums(ProcessGroup& group, const std::vector<Tensor>& values) {
  group.allreduce(values, ReduceOp::Sum);
  std::vector<double> out;
  out.reserve(values.size());
  for (const Tensor& v : values) out.push_back(v.to(kFloat64).sum().item<double>());
  return out;
}

}  // namespace distributed
}  // namespace minidl
