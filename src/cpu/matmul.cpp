// CPU batched matrix product (see kernels/backend.h): floating types on the library's own GEMM (cpu/gemm.h),
// bfloat16 and float16 through its float32 build (operands widened once, the float32 sums rounded once), integer
// types (as PyTorch's CPU computes them, wrapping on overflow) on a plain row loop.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "minidl/factories.h"

namespace minidl {
namespace cpu {
namespace {

using i64 = std::int64_t;
using MatmulTypes = kernels::DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int64,
                                     DType::Int32, DType::UInt8>;

/// Element (r, c) of op(operand) is at r * rs + c * cs from its matrix's start.
struct Strides {
  i64 rs, cs;
};
Strides op_strides(const kernels::MatmulOperand& o) { return o.trans ? Strides{1, o.ld} : Strides{o.ld, 1}; }

/// out[i] = op(a[i]) * op(b[i]) for integers: each output row accumulates rows of op(b), which walks op(b) along its
/// rows (contiguous unless b is transposed). Sums wrap as two's complement, as PyTorch's integer products do.
template <class T>
void integer_matmul(const T* a, const T* b, T* out, const kernels::MatmulLayout& l) {
  using U = std::make_unsigned_t<T>;  // unsigned arithmetic wraps where signed overflow would be undefined
  const Strides sa = op_strides(l.a), sb = op_strides(l.b);
  const double row_cost = 2.0 * static_cast<double>(l.n) * static_cast<double>(l.k);
  parallel_for(l.batch * l.m, row_cost, [&](i64 begin, i64 end) {
    std::vector<U> acc(static_cast<std::size_t>(l.n));
    for (i64 row = begin; row < end; ++row) {
      const i64 i = row / l.m, r = row % l.m;
      const T* ar = a + i * l.a.batch_stride + r * sa.rs;
      const T* bi = b + i * l.b.batch_stride;
      std::fill(acc.begin(), acc.end(), U(0));
      for (i64 p = 0; p < l.k; ++p) {
        const U x = static_cast<U>(ar[p * sa.cs]);
        const T* bp = bi + p * sb.rs;
        for (i64 c = 0; c < l.n; ++c)
          acc[static_cast<std::size_t>(c)] += static_cast<U>(x * static_cast<U>(bp[c * sb.cs]));
      }
      T* o = out + row * l.n;
      for (i64 c = 0; c < l.n; ++c) o[c] = static_cast<T>(acc[static_cast<std::size_t>(c)]);
    }
  });
}

template <class T>
void floating_matmul(const T* a, const T* b, T* out, const kernels::MatmulLayout& l) {
  const Strides sa = op_strides(l.a), sb = op_strides(l.b);
  const auto item = [&](i64 i) -> GemmArgs<T> {
    return {l.m,
            l.n,
            l.k,
            {a + i * l.a.batch_stride, sa.rs, sa.cs},
            {b + i * l.b.batch_stride, sb.rs, sb.cs},
            {out + i * l.m * l.n, l.n, 1},
            false};
  };
  // Products too small to split (gemm_parallel would run them on this thread) are spread over the pool whole
  // instead.
  const double flops = 2.0 * static_cast<double>(l.m) * static_cast<double>(l.n) * static_cast<double>(l.k);
  if (l.batch > 1 && flops < kGemmSplitFlops) {
    parallel_for(l.batch, flops / 8.0, [&](i64 begin, i64 end) {
      for (i64 i = begin; i < end; ++i) gemm(item(i));
    });
    return;
  }
  for (i64 i = 0; i < l.batch; ++i) gemm_parallel(item(i));
}

/// The stored matrices of one operand (rows x cols each, rows `o.ld` apart, `o.batch_stride` apart; one matrix
/// when that is 0) widened to dense float32 blocks in `dst`; returns the operand's layout there.
template <class S>
kernels::MatmulOperand widen(const S* src, const kernels::MatmulOperand& o, i64 batch, i64 rows, i64 cols,
                             float* dst) {
  const i64 count = o.batch_stride == 0 ? 1 : batch;
  parallel_for(count * rows, static_cast<double>(cols), [&](i64 begin, i64 end) {
    for (i64 r = begin; r < end; ++r) {
      const S* in = src + r / rows * o.batch_stride + r % rows * o.ld;
      float* w = dst + r * cols;
      for (i64 c = 0; c < cols; ++c) w[c] = kernels::convert<float>(in[c]);
    }
  });
  return {o.trans, cols, o.batch_stride == 0 ? 0 : rows * cols};
}

/// bfloat16 / float16: both operands widened to float32 (each element once, where the GEMM would convert it once
/// per use), the float32 GEMM, then each sum rounded once to out's dtype with PyTorch's rounding. Scratch: the
/// operands' and the result's float32 copies, small against the m*n*k work of any product worth timing.
template <class S>
void reduced_matmul(const S* a, const S* b, S* out, const kernels::MatmulLayout& l) {
  const i64 a_rows = l.a.trans ? l.k : l.m, a_cols = l.a.trans ? l.m : l.k;
  const i64 b_rows = l.b.trans ? l.n : l.k, b_cols = l.b.trans ? l.k : l.n;
  const auto numel = [&](const kernels::MatmulOperand& o, i64 rows, i64 cols) {
    return (o.batch_stride == 0 ? 1 : l.batch) * rows * cols;
  };
  const TensorOptions f32(kFloat32);
  Tensor wa = empty({numel(l.a, a_rows, a_cols)}, f32), wb = empty({numel(l.b, b_rows, b_cols)}, f32);
  Tensor wout = empty({l.batch * l.m * l.n}, f32);
  kernels::MatmulLayout wide = l;
  wide.a = widen(a, l.a, l.batch, a_rows, a_cols, wa.data_ptr<float>());
  wide.b = widen(b, l.b, l.batch, b_rows, b_cols, wb.data_ptr<float>());
  const float* sums = wout.data_ptr<float>();
  floating_matmul(wa.data_ptr<float>(), wb.data_ptr<float>(), wout.data_ptr<float>(), wide);
  parallel_for(wout.numel(), 1.0, [&](i64 begin, i64 end) {
    for (i64 i = begin; i < end; ++i) out[i] = kernels::convert<S>(sums[i]);
  });
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& out, const kernels::MatmulLayout& layout) {
  if (out.numel() == 0) return;
  kernels::dispatch(MatmulTypes{}, out.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (kernels::is_reduced_float_v<T>) {
      reduced_matmul(a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>(), layout);
    } else if constexpr (std::is_floating_point_v<T>) {
      floating_matmul(a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>(), layout);
    } else {
      integer_matmul(a.data_ptr<T>(), b.data_ptr<T>(), out.data_ptr<T>(), layout);
    }
  });
}

bool matmul_fused(const Tensor&, const Tensor&, Tensor&, const kernels::MatmulLayout&, const kernels::MatmulEpilogue&) {
  return false;  // the own GEMM has no epilogue: the op layer adds the bias (or sums its gradient) in a pass
}

}  // namespace cpu
}  // namespace minidl
