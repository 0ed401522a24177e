#pragma once
// The selection of where and masked_fill, shared by both backends: out = cond ? a : b, on the stored element type
// (no arithmetic, so bfloat16 / float16 need no conversion). An operand of one element (a Scalar or a 0-d value
// tensor broadcast everywhere, as masked_fill's value always is) is read through a pointer by the functor instead
// of being indexed, so that the other operands keep the flat (on CUDA: 16-byte) path; only real broadcasts and
// strided operands take kernels::StridedIndex.
#include <array>
#include <cstdint>

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

/// Runs where with the layout its operands allow: flat(out, f, in...) maps out[i] = f(in[i]...) over contiguous
/// elements, strided(out, index, f, in...) the same through a StridedIndex<4> (out's strides first). Both are the
/// backend's; the choice of path lives here once.
template <class T, class Flat, class Strided>
void run_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& out, Flat&& flat, Strided&& strided) {
  const auto full = [&](const Tensor& t) { return t.is_contiguous() && t.sizes() == out.sizes(); };
  const bool one_a = a.numel() == 1, one_b = b.numel() == 1;
  const bool* pc = cond.data_ptr<bool>();
  const T* pa = a.data_ptr<T>();
  const T* pb = b.data_ptr<T>();
  T* po = out.data_ptr<T>();
  if (out.is_contiguous() && full(cond) && (full(a) || one_a) && (full(b) || one_b)) {
    // A one-element operand of out's shape (out has one element) is also full: take the plain form for it.
    if (full(a) && full(b)) return flat(po, Where<T>{}, pc, pa, pb);
    if (full(b)) return flat(po, WhereOneA<T>{pa}, pc, pb);
    if (full(a)) return flat(po, WhereOneB<T>{pb}, pc, pa);
    return flat(po, WhereOneAB<T>{pa, pb}, pc);
  }
  const auto si = strided_index<4>(out.sizes(),
                                   {out.strides(), broadcast_strides(cond.sizes(), cond.strides(), out.sizes()),
                                    broadcast_strides(a.sizes(), a.strides(), out.sizes()),
                                    broadcast_strides(b.sizes(), b.strides(), out.sizes())},
                                   "where");
  strided(po, si, Where<T>{}, pc, pa, pb);
}

}  // namespace kernels
}  // namespace minidl
