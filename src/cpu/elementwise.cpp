// CPU implementations of the primitive kernels (see kernels/backend.h): Eigen expressions evaluated on the
// library's thread pool. Plain loops appear only where Eigen has no operation for the indexing (broadcast
// with arbitrary strides, argmax along a middle dimension).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/generator.h"
#include "cpu/cpu_clones.h"
#include "cpu/gemm.h"
#include "cpu/lane_sum.h"
#include "cpu/parallel.h"
#include "cpu/uniform_stream.h"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"

namespace minidl {
namespace cpu {
namespace {

template <class T>
using Vec = Eigen::TensorMap<Eigen::Tensor<T, 1, Eigen::RowMajor, Eigen::Index>>;  // views start anywhere
template <class T>
using CVec = Eigen::TensorMap<Eigen::Tensor<const T, 1, Eigen::RowMajor, Eigen::Index>>;
template <class T>
using Mat = Eigen::TensorMap<Eigen::Tensor<T, 2, Eigen::RowMajor, Eigen::Index>>;

template <class T>
Vec<T> vec(Tensor& t) { return Vec<T>(t.data_ptr<T>(), t.numel()); }
template <class T>
CVec<T> cvec(const Tensor& t) { return CVec<T>(t.data_ptr<T>(), t.numel()); }


/// out[o, i] = sum over r of x[o, r, i] for o in [begin, end), x viewed as (outer, n, inner). Rows (inner == 1,
/// the sum over an image plane) go through lane_sum; otherwise the rows of x are added up in order,
/// vectorised along inner.
template <class T>
MINIDL_CPU_CLONES void sum_middle(const T* x, std::int64_t n, std::int64_t inner, T* out, std::int64_t begin,
                                  std::int64_t end) {
  for (std::int64_t o = begin; o < end; ++o) {
    const T* xo = x + o * n * inner;
    T* oo = out + o * inner;
    if (inner == 1) {
      oo[0] = lane_sum(xo, n);
      continue;
    }
    std::fill(oo, oo + inner, T(0));
    for (std::int64_t r = 0; r < n; ++r)
      for (std::int64_t i = 0; i < inner; ++i) oo[i] += xo[r * inner + i];
  }
}

/// out[i] = f(x[i]), or f(x[i], y[i]) with a binary f, for i in [begin, end); out may be x or y (in-place ops).
/// Compiled per instruction set: Eigen's expressions are built for the portable baseline, and it has no vector
/// form of the library's functors, so it ran them four floats at a time.
template <class T, class F>
MINIDL_CPU_CLONES void map_unary(F f, const T* x, T* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i]);
}
template <class T, class F>
MINIDL_CPU_CLONES void map_binary(F f, const T* x, const T* y, T* out, std::int64_t begin, std::int64_t end) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = f(x[i], y[i]);
}

/// Eigen's cost estimate for a functor it knows nothing about (cycles per element).
constexpr double kElementwiseCost = 10;
/// Shortest repeated block binary() runs as whole blocks: below it a call per block costs more than indexing.
constexpr std::int64_t kMinRepeatPeriod = 16;

}  // namespace

void fill(Tensor& out, double value) {
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    vec<T>(out).device(device()) = vec<T>(out).constant(static_cast<T>(value));
  });
}

void copy(const Tensor& src, Tensor& dst) {
  kernels::dispatch_all(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    kernels::dispatch_all(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      vec<D>(dst).device(device()) = cvec<S>(src).template cast<D>();
    });
  });
}

void arange(Tensor& out, double start, double step) {
  kernels::dispatch_all(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_ptr<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
  });
}

UniformStream next_uniform_stream() {
  auto& gen = cpu_generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const std::uint64_t key = gen.engine()();
  const std::uint64_t counter_high = gen.engine()();
  return {Philox4x32{static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)}, counter_high};
}

void uniform(Tensor& out, double low, double high) {
  const UniformStream stream = next_uniform_stream();
  kernels::dispatch_floating(out.dtype(), "uniform", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::int64_t n = out.numel();
    T* const p = out.data_ptr<T>();
    // One Philox block gives two elements; parallel_for splits the blocks.
    parallel_for((n + 1) / 2, 40.0, [&](std::int64_t begin, std::int64_t end) {
      uniform_blocks<T>(stream, low, high, n, begin, end, [p](std::int64_t i, T u) { p[i] = u; });
    });
  });
}

void normal(Tensor& out, double mean, double stddev) {
  auto& gen = cpu_generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  kernels::dispatch_floating(out.dtype(), "normal", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data_ptr<T>();
    const std::int64_t n = out.numel();
    // Box-Muller: two uniforms give two independent normals.
    for (std::int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - gen.next_double();  // (0, 1]: log is finite
      const double u2 = gen.next_double();
      const double r = std::sqrt(-2.0 * std::log(u1));
      p[i] = static_cast<T>(mean + stddev * r * std::cos(2.0 * M_PI * u2));
      if (i + 1 < n) p[i + 1] = static_cast<T>(mean + stddev * r * std::sin(2.0 * M_PI * u2));
    }
  });
}

void unary(kernels::UnaryOp op, double alpha, const Tensor& x, Tensor& out) {
  if (x.dtype() == kInt64 && op == kernels::UnaryOp::AddScalar) {  // counters; the only integer op
    vec<std::int64_t>(out).device(device()) = cvec<std::int64_t>(x) + static_cast<std::int64_t>(alpha);
    return;
  }
  kernels::dispatch_floating(x.dtype(), "unary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_unary<T>(op, static_cast<T>(alpha), [&](auto f) {
      const T* px = x.data_ptr<T>();
      T* po = out.data_ptr<T>();
      parallel_for(out.numel(), kElementwiseCost,
                   [&](std::int64_t begin, std::int64_t end) { map_unary(f, px, po, begin, end); });
    });
  });
}

void binary(kernels::BinaryOp op, double alpha, const Tensor& a, const Tensor& b, Tensor& out) {
  kernels::dispatch_floating(out.dtype(), "binary op", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::visit_binary<T>(op, static_cast<T>(alpha), [&](auto f) {
      const T* pa = a.data_ptr<T>();
      const T* pb = b.data_ptr<T>();
      T* po = out.data_ptr<T>();
      if (a.sizes() == out.sizes() && b.sizes() == out.sizes()) {
        parallel_for(out.numel(), kElementwiseCost,
                     [&](std::int64_t begin, std::int64_t end) { map_binary(f, pa, pb, po, begin, end); });
        return;
      }
      // One operand of out's shape, the other a block repeated along the leading dims (a bias row over a
      // batch): the plain loop per block instead of index arithmetic per element (fc1's bias + ReLU, 64 x 128:
      // 42 -> 5 us on 2 threads of the H200 host, 2026-11-30).
      const bool a_full = a.sizes() == out.sizes(), b_full = b.sizes() == out.sizes();
      const std::int64_t period = a_full   ? kernels::repeat_period(b.sizes(), out.sizes())
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
      // Broadcasting with arbitrary rank: Eigen's broadcast needs the rank at compile time, so index by hand.
      const kernels::BroadcastIndex bi = kernels::broadcast_index(a.sizes(), b.sizes(), out.sizes());
      parallel_for(out.numel(), 20, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          std::int64_t oa, ob;
          bi.offsets(i, oa, ob);
          po[i] = f(pa[oa], pb[ob]);
        }
      });
    });
  });
}

void reduce(kernels::ReduceOp op, const Tensor& x, std::int64_t outer, std::int64_t n, std::int64_t inner,
            Tensor& out, Tensor* indices) {
  kernels::dispatch_floating(x.dtype(), "reduce", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
    if (op == kernels::ReduceOp::Sum) {
      parallel_for(outer, static_cast<double>(n * inner), [&](std::int64_t begin, std::int64_t end) {
        sum_middle(px, n, inner, po, begin, end);
      });
      return;
    }
    std::int64_t* pi = indices ? indices->data_ptr<std::int64_t>() : nullptr;
    // Max with the index of the first maximum (NaN wins, as in PyTorch); Eigen has no argmax along one axis of a 3-D view.
    parallel_for(outer * inner, static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t o = j / inner, i = j % inner;
        const T* base = px + o * n * inner + i;
        T best = base[0];
        std::int64_t arg = 0;
        for (std::int64_t r = 1; r < n && !std::isnan(best); ++r) {
          const T v = base[r * inner];
          if (v > best || std::isnan(v)) {
            best = v;
            arg = r;
          }
        }
        po[j] = best;
        if (pi) pi[j] = arg;
      }
    });
  });
}

void scatter_reduced(const Tensor& grad, const Tensor& indices, std::int64_t outer, std::int64_t n,
                     std::int64_t inner, Tensor& dx) {
  fill(dx, 0.0);
  kernels::dispatch_floating(grad.dtype(), "scatter_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = grad.data_ptr<T>();
    const std::int64_t* pi = indices.data_ptr<std::int64_t>();
    T* pd = dx.data_ptr<T>();
    for (std::int64_t j = 0; j < outer * inner; ++j) {
      const std::int64_t o = j / inner, i = j % inner;
      pd[(o * n + pi[j]) * inner + i] = pg[j];
    }
  });
}

void matmul(const Tensor& a, const Tensor& b, Tensor& out, std::int64_t batch, std::int64_t m, std::int64_t n,
            std::int64_t k, bool trans_a, bool trans_b) {
  kernels::dispatch_floating(out.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // Transposed operands are strided views: no copies.
    const auto item = [&](std::int64_t i) -> GemmArgs<T> {
      return {m, n, k,
              {a.data_ptr<T>() + i * m * k, trans_a ? 1 : k, trans_a ? m : 1},
              {b.data_ptr<T>() + i * k * n, trans_b ? 1 : n, trans_b ? k : 1},
              {out.data_ptr<T>() + i * m * n, n, 1},
              false};
    };
    // Products too small to split (gemm_parallel would run them on this thread) are spread over the pool
    // whole instead.
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    if (batch > 1 && flops < kGemmSplitFlops) {
      parallel_for(batch, flops / 8.0, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) gemm(item(i));
      });
      return;
    }
    for (std::int64_t i = 0; i < batch; ++i) gemm_parallel(item(i));
  });
}

void transpose(const Tensor& x, Tensor& out, std::int64_t A, std::int64_t d0, std::int64_t B, std::int64_t d1,
               std::int64_t C) {
  kernels::dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    Eigen::TensorMap<Eigen::Tensor<const T, 5, Eigen::RowMajor, Eigen::Index>> in(x.data_ptr<T>(), A, d0, B, d1, C);
    Eigen::TensorMap<Eigen::Tensor<T, 5, Eigen::RowMajor, Eigen::Index>> res(out.data_ptr<T>(), A, d1, B, d0, C);
    res.device(device()) = in.shuffle(Eigen::array<int, 5>{0, 3, 2, 1, 4});
  });
}

void softmax_forward(const Tensor& x, Tensor& y, std::int64_t outer, std::int64_t n, std::int64_t inner, bool log) {
  kernels::dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    parallel_for(outer * inner, 10.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t o = j / inner, i = j % inner;
        const T* xs = px + o * n * inner + i;
        T* ys = py + o * n * inner + i;
        // Subtract the maximum first: exp never overflows, so logits of +-1000 stay finite.
        T mx = xs[0];
        for (std::int64_t r = 1; r < n; ++r) mx = xs[r * inner] > mx ? xs[r * inner] : mx;
        T sum = 0;
        for (std::int64_t r = 0; r < n; ++r) sum += kernels::m_exp(xs[r * inner] - mx);
        const T lse = kernels::m_log(sum);
        for (std::int64_t r = 0; r < n; ++r) {
          const T z = xs[r * inner] - mx;
          ys[r * inner] = log ? z - lse : kernels::m_exp(z) / sum;
        }
      }
    });
  });
}

void softmax_backward(const Tensor& y, const Tensor& dy, Tensor& dx, std::int64_t outer, std::int64_t n,
                      std::int64_t inner, bool log) {
  kernels::dispatch_floating(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* py = y.data_ptr<T>();
    const T* pdy = dy.data_ptr<T>();
    T* pdx = dx.data_ptr<T>();
    parallel_for(outer * inner, 6.0 * static_cast<double>(n), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t j = begin; j < end; ++j) {
        const std::int64_t base = (j / inner) * n * inner + j % inner;
        T s = 0;
        // softmax: dx = y * (dy - sum(dy * y)); log_softmax: dx = dy - exp(y) * sum(dy)
        for (std::int64_t r = 0; r < n; ++r) s += log ? pdy[base + r * inner] : pdy[base + r * inner] * py[base + r * inner];
        for (std::int64_t r = 0; r < n; ++r) {
          const std::int64_t q = base + r * inner;
          pdx[q] = log ? pdy[q] - kernels::m_exp(py[q]) * s : py[q] * (pdy[q] - s);
        }
      }
    });
  });
}

}  // namespace cpu
}  // namespace minidl

namespace minidl {
namespace cpu {

void cross_entropy_loss_sum(const Tensor& log_probs, const Tensor& target, double smoothing, double scale,
                            Tensor& out) {
  Tensor losses = empty({log_probs.size(0)}, TensorOptions(log_probs.dtype()));
  cross_entropy_loss(log_probs, target, smoothing, losses);
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> l(losses.data_ptr<T>(), losses.numel());
    out.data_ptr<T>()[0] = static_cast<T>(scale) * l.sum();
  });
}

void cross_entropy_loss(const Tensor& log_probs, const Tensor& target, double smoothing, Tensor& losses) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  const std::int64_t* t = target.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    MINIDL_CHECK(t[i] >= 0 && t[i] < c, IndexError, "cross_entropy: target[", i, "] = ", t[i],
                 " is out of range for ", c, " classes");
  }
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> lp(log_probs.data_ptr<T>(), n, c);
    T* out = losses.data_ptr<T>();
    const T eps = static_cast<T>(smoothing);
    for (std::int64_t i = 0; i < n; ++i) {
      out[i] = -((T(1) - eps) * lp(i, t[i]) + (eps / static_cast<T>(c)) * lp.row(i).sum());
    }
  });
}

void cross_entropy_backward(const Tensor& log_probs, const Tensor& target, const Tensor& grad, double smoothing,
                            bool from_logits, double scale, Tensor& dx) {
  const std::int64_t n = log_probs.size(0), c = log_probs.size(1);
  const std::int64_t* t = target.data_ptr<std::int64_t>();
  kernels::dispatch_floating(log_probs.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const Mat> lp(log_probs.data_ptr<T>(), n, c);
    Eigen::Map<Mat> d(dx.data_ptr<T>(), n, c);
    const T eps = static_cast<T>(smoothing);
    if (from_logits) {
      d = lp.array().exp().matrix();
    } else {
      d.setZero();
    }
    d.array() -= eps / static_cast<T>(c);
    for (std::int64_t i = 0; i < n; ++i) d(i, t[i]) -= T(1) - eps;
    if (grad.numel() == 1) {
      d *= static_cast<T>(scale) * grad.data_ptr<T>()[0];
    } else {
      const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> g(grad.data_ptr<T>(), n);
      d = (static_cast<T>(scale) * g).asDiagonal() * d;
    }
  });
}

}  // namespace cpu
}  // namespace minidl
