#pragma once
// The selection of where and masked_fill, shared by both backends: out = cond ? a : b, on the stored element type
// (no arithmetic, so bfloat16 / float16 need no conversion). An operand of one element (a Scalar or a 0-d value
// tensor broadcast everywhere, as masked_fill's value always is) is read through a pointer by the functor instead
// of being indexed, and a block repeated along the leading dims (a mask broadcast over a batch) is read row by row,
// so that these keep the contiguous (on CUDA: 16-byte) accesses; only other broadcasts and strided operands take
// kernels::StridedIndex, whose index arithmetic per element costs more than the memory traffic on the GPU.
#include <array>
#include <cstdint>
#include <type_traits>

#include "kernels/strided_index.h"
#include "minidl/tensor.h"

#ifdef __CUDACC__
#define MINIDL_WHERE_HD __host__ __device__ __forceinline__
#else
#define MINIDL_WHERE_HD inline
#endif

namespace minidl {
namespace kernels {

template <class T> struct Where {
  MINIDL_WHERE_HD T operator()(bool c, T a, T b) const { return c ? a : b; }
};
/// a is one element (at *a).
template <class T> struct WhereOneA {
  const T* a;
  MINIDL_WHERE_HD T operator()(bool c, T b) const { return c ? *a : b; }
};
/// b is one element (at *b).
template <class T> struct WhereOneB {
  const T* b;
  MINIDL_WHERE_HD T operator()(bool c, T a) const { return c ? a : *b; }
};
template <class T> struct WhereOneAB {
  const T* a;
  const T* b;
  MINIDL_WHERE_HD T operator()(bool c) const { return c ? *a : *b; }
};

/// An operand of the rows form: element j of row r is at p[r * row_stride + j] (row_stride 0: one block repeated).
template <class T> struct RowOperand {
  const T* p;
  std::int64_t row_stride;
};

/// The shortest repeated block the rows form takes (shorter rows would leave most of a CUDA block idle); below it,
/// and for other broadcasts, the StridedIndex form runs.
constexpr std::int64_t kMinWhereRow = 1024;

/// Runs where in the form its operands allow, out contiguous in the first two:
///  - flat(out, f, in...): out[i] = f(in[i]...), every operand of out's shape and contiguous;
///  - rows(out, rows, cols, f, RowOperand...): the same over out as rows x cols, where some operands are one
///    contiguous block of cols elements repeated over the rows (an attention mask broadcast over the batch);
///  - strided(out, index, f, in...): through a StridedIndex<4> (out's strides first), anything else.
/// A one-element a or b (a Scalar, masked_fill's value) is read by the functor in the first two forms. The callbacks
/// are the backend's; the choice lives here once.
template <class T, class Flat, class Rows, class Strided>
void run_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out, Flat&& flat, Rows&& rows,
               Strided&& strided) {
  const std::int64_t n = out.numel();
  // Each operand's period: n for all of out's elements, p for a block of p repeated, 1 for one element (a and b
  // only), 0 when it fits neither form.
  const auto period = [&](const Tensor& t, bool may_be_one) -> std::int64_t {
    if (t.is_contiguous() && t.sizes() == out.sizes()) return n;
    if (may_be_one && t.numel() == 1) return 1;
    const std::int64_t p = t.is_contiguous() ? repeat_period(t.sizes(), out.sizes()) : 0;
    return p >= kMinWhereRow ? p : 0;
  };
  const std::int64_t pc = period(cond, false), pa = period(a, true), pb = period(b, true);
  std::int64_t cols = n;  // the common period of the repeated blocks
  bool fits = out.is_contiguous() && pc > 0 && pa > 0 && pb > 0;
  for (const std::int64_t p : {pc, pa, pb}) {
    if (p <= 1 || p == n) continue;
    fits = fits && (cols == n || cols == p);
    cols = p;
  }
  T* po = out.data_ptr<T>();
  const T* da = a.data_ptr<T>();
  const T* db = b.data_ptr<T>();
  if (fits) {
    const auto operand = [&](const auto* p, std::int64_t period) {
      return RowOperand<std::remove_cv_t<std::remove_pointer_t<decltype(p)>>>{p, period == n ? cols : 0};
    };
    const auto run = [&](auto f, auto... in) {
      if (cols == n) return flat(po, f, in.p...);
      rows(po, n / cols, cols, f, in...);
    };
    const auto c = operand(cond.data_ptr<bool>(), pc);
    if (pa == 1 && pb == 1 && n != 1) return run(WhereOneAB<T>{da, db}, c);
    if (pa == 1 && n != 1) return run(WhereOneA<T>{da}, c, operand(db, pb));
    if (pb == 1 && n != 1) return run(WhereOneB<T>{db}, c, operand(da, pa));
    return run(Where<T>{}, c, operand(da, pa), operand(db, pb));
  }
  const auto si = strided_index<4>(out.sizes(),
                                   {out.strides(), broadcast_strides(cond.sizes(), cond.strides(), out.sizes()),
                                    broadcast_strides(a.sizes(), a.strides(), out.sizes()),
                                    broadcast_strides(b.sizes(), b.strides(), out.sizes())},
                                   "where");
  strided(po, si, Where<T>{}, cond.data_ptr<bool>(), da, db);
}

}  // namespace kernels
}  // namespace minidl
