// CPU elementwise kernels (see kernels/backend.h): unary, binary and ternary ops from the functors of
// kernels/elementwise.h, on the library's thread pool. Broadcasting with arbitrary strides indexes by hand.
#include "cpu/cpu_clones.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/strided_index.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include <unsupported/Eigen/SpecialFunctions>

namespace minidl {
namespace cpu {
namespace {

/// out[i] = f(x[i]), or f(x[i], y[i]) with a binary f, for i in [begin, end); out may be x or y (in-place ops).
/// Elements convert to the functor's type on the way in and to out's on the way out (bfloat16 / float16 compute
/// in float, comparisons store bool). Compiled per instruction set: Eigen's expressions are built for the
/// portable baseline, and it has no vector form of the library's functors, so it ran them four floats at a time.
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_unary(F f, const S* x, O* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i]);
}
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_binary(F f, const S* x, const S* y, O* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i]);
}
template <class S, class O, class F>
MINIDL_CPU_CLONES void map_ternary(F f, const S* x, const S* y, const S* z, O* out, std::int64_t begin,
                                   std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i], z[i]);
}

// The CPU's form of a functor: the functor itself, except GELU and its gradient on float32 (and on the 16-bit types,
// which compute in float). Their erf and exp are libm calls, which no loop vectorises, and they made GELU the
// costliest op after the products of a GPT's CPU step; here erf is Eigen's rational approximation (a few ulp) and
// the gradient's exp the series below, both branch-free and inlined, so the loops vectorise them. Every CPU path
// (dense, broadcast, strided) takes this form, so results do not depend on the layout; float64 keeps libm's.
template <class F>
F cpu_form(F f) {
  return f;
}

inline float fast_erf(float x) { return Eigen::internal::generic_fast_erf_float(x); }

/// e^x for x <= 0 (the normal density's), within 2 ulp: x = k ln 2 + r with |r| <= ln 2 / 2, e^r by its Taylor
/// series to r^7 (the next term is below 6e-9 relatively), 2^k built in the exponent bits; 0 below the smallest
/// normal float's log, NaN for NaN.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693145751953125f, kLn2Lo = 1.42860682030941723e-6f;
  constexpr float kRound = 12582912.f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
  constexpr float kLowest = -87.3365447505531f;  // log(FLT_MIN)
  const float kf = (x * kLog2e + kRound) - kRound;
  const float r = (x - kf * kLn2Hi) - kf * kLn2Lo;
  float p = 1.f / 5040.f;
  p = p * r + 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  // NaN and arguments below kLowest take k = 0: the cast stays defined, the result is the select below.
  const std::int32_t bits = (static_cast<std::int32_t>(x >= kLowest ? kf : 0.f) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < kLowest ? 0.f : p * scale;
}

constexpr float kSqrtHalf = 0.70710678118654752440f, kInvSqrt2Pi = 0.39894228040143267794f;
struct GeluCpu {
  float operator()(float x) const { return 0.5f * x * (1.f + fast_erf(x * kSqrtHalf)); }
};
struct GeluGradCpu {
  float operator()(float g, float x) const {
    return g * (0.5f * (1.f + fast_erf(x * kSqrtHalf)) + x * exp_nonpositive(-0.5f * x * x) * kInvSqrt2Pi);
  }
};
inline GeluCpu cpu_form(kernels::Gelu<float>) { return {}; }
inline GeluGradCpu cpu_form(kernels::GeluGradOp<float>) { return {}; }

/// Cycles per element of a functor (an estimate for parallel_for's split), and of one through index arithmetic.
constexpr double kElementwiseCost = 10;
constexpr double kStridedCost = 20;
/// Shortest repeated block binary() runs as whole blocks: below it a call per block costs more than indexing.
constexpr std::int64_t kMinRepeatPeriod = 16;

/// The length of the rows along the last dim when every operand steps through them one element at a time (the
/// heads of a (B, T, 3C) buffer, a narrowed last dim): the vector loop then runs per row, with index arithmetic per
/// row only. 0 when rows are short or an operand strides or broadcasts along the last dim.
std::int64_t unit_stride_rows(const Shape& shape, std::initializer_list<Shape> strides) {
  if (shape.empty() || shape.back() < kMinRepeatPeriod) return 0;
  for (const Shape& st : strides) {
    if (st.back() != 1) return 0;
  }
  return shape.back();
}

/// Runs body(offsets of the row's first element) for every row of `row` elements of `numel`, on the pool.
template <int N, class Body>
void for_each_row(const kernels::StridedIndex<N>& si, std::int64_t numel, std::int64_t row, Body body) {
  parallel_for(numel / row, static_cast<double>(row) * kElementwiseCost, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      std::int64_t off[N];
      si.offsets(r * row, off);
      body(off);
    }
  });
}

}  // namespace

void unary(kernels::UnaryOp op, const kernels::OpScalars& s, const Tensor& x, Tensor& out) {
  kernels::dispatch_in_out(x.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_unary<S, O>(op, s, [&](auto op_functor) {
      const auto f = cpu_form(op_functor);
      const S* px = x.data_ptr<S>();
      O* po = out.data_ptr<O>();
      if (x.is_contiguous() && out.is_contiguous()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_unary(f, px, po, begin, end); });
        return;
      }
      const auto si = kernels::strided_index<2>(out.sizes(), {out.strides(), x.strides()}, kernels::op_name(op));
      const std::int64_t row = unit_stride_rows(out.sizes(), {out.strides(), x.strides()});
      if (row > 0) {
        for_each_row(si, out.numel(), row, [&](const std::int64_t(&off)[2]) {
          map_unary(f, px + off[1], po + off[0], 0, row);
        });
        return;
      }
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[2];
          si.offsets(i, off);
          po[off[0]] = f(px[off[1]]);
        }
      });
    });
  });
}

void binary(kernels::BinaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, Tensor& out) {
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_binary<S, O>(op, s, [&](auto op_functor) {
      const auto f = cpu_form(op_functor);
      const S* pa = a.data_ptr<S>();
      const S* pb = b.data_ptr<S>();
      O* po = out.data_ptr<O>();
      const bool dense = a.is_contiguous() && b.is_contiguous() && out.is_contiguous();
      if (dense && a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_binary(f, pa, pb, po, begin, end); });
        return;
      }
      // One operand of out's shape, the other a block repeated along the leading dims (a bias row over a
      // batch): the plain loop per block instead of index arithmetic per element.
      const bool a_full = a.sizes() == out.sizes(), b_full = b.sizes() == out.sizes();
      const std::int64_t period = !dense  ? 0
                                  : a_full ? kernels::repeat_period(b.sizes(), out.sizes())
                                  : b_full ? kernels::repeat_period(a.sizes(), out.sizes())
                                           : 0;
      if (period >= kMinRepeatPeriod) {
        parallel_for(out.numel() / period, static_cast<double>(period) * kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) {
                       for (std::int64_t r = begin; r < end; ++r) {
                         const std::int64_t o = r * period;
                         map_binary(f, a_full ? pa + o : pa, a_full ? pb : pb + o, po + o, 0, period);
                       }
                     });
        return;
      }
      const Shape sa = kernels::broadcast_strides(a.sizes(), a.strides(), out.sizes()),
                  sb = kernels::broadcast_strides(b.sizes(), b.strides(), out.sizes());
      const auto si = kernels::strided_index<3>(out.sizes(), {out.strides(), sa, sb}, kernels::op_name(op));
      const std::int64_t row = unit_stride_rows(out.sizes(), {out.strides(), sa, sb});
      if (row > 0) {
        for_each_row(si, out.numel(), row, [&](const std::int64_t(&off)[3]) {
          map_binary(f, pa + off[1], pb + off[2], po + off[0], 0, row);
        });
        return;
      }
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[3];
          si.offsets(i, off);
          po[off[0]] = f(pa[off[1]], pb[off[2]]);
        }
      });
    });
  });
}

void ternary(kernels::TernaryOp op, const kernels::OpScalars& s, const Tensor& a, const Tensor& b, const Tensor& c,
             Tensor& out) {
  kernels::dispatch_in_out(a.dtype(), out.dtype(), kernels::op_name(op), [&](auto stag, auto otag) {
    using S = typename decltype(stag)::type;
    using O = typename decltype(otag)::type;
    kernels::visit_ternary<S, O>(op, s, [&](auto f) {
      const S* pa = a.data_ptr<S>();
      const S* pb = b.data_ptr<S>();
      const S* pc = c.data_ptr<S>();
      O* po = out.data_ptr<O>();
      const Shape& shape = out.sizes();
      if (a.is_contiguous() && b.is_contiguous() && c.is_contiguous() && out.is_contiguous() && a.sizes() == shape &&
          b.sizes() == shape && c.sizes() == shape) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_ternary(f, pa, pb, pc, po, begin, end); });
        return;
      }
      const auto si = kernels::strided_index<4>(
          shape,
          {out.strides(), kernels::broadcast_strides(a.sizes(), a.strides(), shape),
           kernels::broadcast_strides(b.sizes(), b.strides(), shape),
           kernels::broadcast_strides(c.sizes(), c.strides(), shape)},
          kernels::op_name(op));
      parallel_for(out.numel(), kStridedCost, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t off[4];
          si.offsets(i, off);
          po[off[0]] = f(pa[off[1]], pb[off[2]], pc[off[3]]);
        }
      });
    });
  });
}

}  // namespace cpu
}  // namespace minidl
