// The recurrent layers' per-step gate math on the CPU (see kernels/backend.h): the functors of kernels/rnn_cell.h
// over the (batch, hidden) elements, split over the thread pool.
#include "cpu/parallel.h"
#include "kernels/backend.h"

namespace minidl {
namespace cpu {
namespace {
/// About the cycles of one element: a few exp / tanh and a dozen multiply-adds.
constexpr double kCellCost = 60.0;

template <class F>
void for_each_element(const F& f) {
  parallel_for(f.numel(), kCellCost, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t e = begin; e < end; ++e) f(e);
  });
}
}  // namespace

template <class T>
void rnn_cell_forward(const kernels::RnnCellForward<T>& f) {
  for_each_element(f);
}
template <class T>
void rnn_cell_backward(const kernels::RnnCellBackward<T>& f) {
  for_each_element(f);
}

template void rnn_cell_forward<float>(const kernels::RnnCellForward<float>&);
template void rnn_cell_forward<double>(const kernels::RnnCellForward<double>&);
template void rnn_cell_backward<float>(const kernels::RnnCellBackward<float>&);
template void rnn_cell_backward<double>(const kernels::RnnCellBackward<double>&);

}  // namespace cpu
}  // namespace minidl
