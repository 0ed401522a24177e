// The recurrent layers' per-step gate math on the GPU (see kernels/backend.h): one launch per step on
// gpu::stream(), a thread per (batch, hidden) element running the functors of kernels/rnn_cell.h. Nothing is
// allocated or read back, so a sequence's steps queue without a host synchronisation and can be captured.
#include "cuda/launch.cuh"
#include "kernels/backend.h"

namespace minidl {
namespace gpu {
namespace {
template <class F>
__global__ void rnn_cell_kernel(F f, i64 n) {
  GRID_STRIDE(e, n) f(e);
}
template <class F>
void launch_cell(const F& f) {
  const i64 n = f.numel();
  if (n == 0) return;
  rnn_cell_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(f, n);
  MINIDL_CUDA_KERNEL_CHECK();
}
}  // namespace

template <class T>
void rnn_cell_forward(const kernels::RnnCellForward<T>& f) {
  launch_cell(f);
}
template <class T>
void rnn_cell_backward(const kernels::RnnCellBackward<T>& f) {
  launch_cell(f);
}

template void rnn_cell_forward<float>(const kernels::RnnCellForward<float>&);
template void rnn_cell_forward<double>(const kernels::RnnCellForward<double>&);
template void rnn_cell_backward<float>(const kernels::RnnCellBackward<float>&);
template void rnn_cell_backward<double>(const kernels::RnnCellBackward<double>&);

}  // namespace gpu
}  // namespace minidl
