// Dropout on the CPU: the three primitive passes (uniform draws, the DropoutMask rule, the multiply). On the GPU
// one kernel does all three to save two launches per call; on the CPU the passes cost their memory traffic
// whichever way they are grouped, so they stay the primitives, and the masks come from the same generator calls.
#include "kernels/backend.h"

namespace minidl {
namespace cpu {

void dropout(const Tensor& x, double p, Tensor& out, Tensor& mask) {
  uniform(mask, 0.0, 1.0);
  unary(kernels::UnaryOp::DropoutMask, p, mask, mask);
  binary(kernels::BinaryOp::Mul, 0.0, x, mask, out);
}

}  // namespace cpu
}  // namespace minidl
