// CPU random kernels (see kernels/backend.h): uniform draws from the generator's Philox stream
// (cpu/uniform_stream.h, shared with dropout.cpp), normal draws by Box-Muller, and the integer, Bernoulli,
// permutation and multinomial draws from a fresh Philox stream per call (kernels/random.h), split over the thread
// pool except the permutation's shuffle.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/generator.h"
#include "cpu/parallel.h"
#include "cpu/uniform_stream.h"
#include "kernels/backend.h"
#include "kernels/convert.h"
#include "kernels/dispatch_types.h"
#include "kernels/random.h"

namespace minidl {
namespace cpu {

UniformStream next_uniform_stream() {
  auto& gen = cpu_generator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const std::uint64_t key = gen.engine()();
  const std::uint64_t counter_high = gen.engine()();
  return {kernels::Philox4x32{static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32)}, counter_high};
}

namespace {

kernels::PhiloxStream next_stream() {
  const UniformStream s = next_uniform_stream();
  return {s.philox, s.counter_high};
}

/// p[i] = value(i, bits of element i) for the n elements of out, one Philox block per two elements.
template <class T, class F>
void draw_pairs(Tensor& out, double cost, const F& value) {
  const kernels::PhiloxStream s = next_stream();
  const std::int64_t n = out.numel();
  T* const p = out.data_ptr<T>();
  parallel_for((n + 1) / 2, cost, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t g = begin; g < end; ++g) {
      std::uint32_t r[4];
      s.block(static_cast<std::uint64_t>(g), r);
      p[2 * g] = value(2 * g, kernels::PhiloxStream::join(r[0], r[1]));
      if (2 * g + 1 < n) p[2 * g + 1] = value(2 * g + 1, kernels::PhiloxStream::join(r[2], r[3]));
    }
  });
}

}  // namespace

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

void random_int(Tensor& out, std::int64_t low, std::uint64_t range) {
  kernels::dispatch_all(out.dtype(), "random_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    draw_pairs<T>(out, 30.0, kernels::UniformIntValue<T>{low, range});
  });
}

void bernoulli(Tensor& out, const Tensor& p, double p_scalar) {
  kernels::dispatch_all(out.dtype(), "bernoulli", [&](auto tag) {
    using T = typename decltype(tag)::type;
    draw_pairs<T>(out, 25.0, kernels::BernoulliValue<T>{p.defined() ? p.data_ptr<T>() : nullptr, p_scalar});
  });
}

void randperm(Tensor& out) {
  // Fisher-Yates, serial: element i swaps with one of i .. n-1, each step's index from its own 64 bits.
  const kernels::PhiloxStream s = next_stream();
  const std::int64_t n = out.numel();
  std::int64_t* const p = out.data_ptr<std::int64_t>();
  std::iota(p, p + n, std::int64_t{0});
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const std::uint64_t rest = static_cast<std::uint64_t>(n - i);
    std::swap(p[i], p[i + static_cast<std::int64_t>(s.bits(static_cast<std::uint64_t>(i)) % rest)]);
  }
}

std::int64_t multinomial(const Tensor& weights, bool replacement, Tensor& out) {
  const kernels::PhiloxStream s = next_stream();
  const std::int64_t rows = weights.size(0), n = weights.size(1), k = out.size(1);
  std::int64_t* const result = out.data_ptr<std::int64_t>();
  std::atomic<std::uint64_t> fault{~std::uint64_t{0}};
  kernels::dispatch(
      kernels::DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16>{}, weights.dtype(),
      "multinomial", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = kernels::opmath_t<T>;
        const T* const w = weights.data_ptr<T>();
        parallel_for(rows, 20.0 * static_cast<double>(n + k), [&](std::int64_t begin, std::int64_t end) {
          std::vector<C> scratch(static_cast<std::size_t>(n));  // the row's prefix sums or keys
          std::vector<std::int32_t> order;
          for (std::int64_t row = begin; row < end; ++row) {
            const T* const wr = w + row * n;
            std::int64_t* const res = result + row * k;
            bool bad = false, positive = false;
            for (std::int64_t c = 0; c < n; ++c) {
              const C x = static_cast<C>(wr[c]);
              bad = bad || kernels::bad_weight(x);
              positive = positive || x > C(0);
            }
            if (bad || !positive) {
              const std::uint64_t f = kernels::multinomial_fault(row, bad);
              std::uint64_t seen = fault.load();
              while (f < seen && !fault.compare_exchange_weak(seen, f)) {
              }
              std::fill(res, res + k, 0);
              continue;
            }
            const std::uint64_t first = static_cast<std::uint64_t>(row * n);  // the row's elements of the stream
            if (k == 1 || !replacement) {
              for (std::int64_t c = 0; c < n; ++c) {
                scratch[c] =
                    kernels::exponential_key(s.bits(first + static_cast<std::uint64_t>(c)), static_cast<C>(wr[c]));
              }
              if (k == 1) {
                res[0] = std::min_element(scratch.begin(), scratch.end()) - scratch.begin();
                continue;
              }
              order.resize(static_cast<std::size_t>(n));
              std::iota(order.begin(), order.end(), 0);
              std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](std::int32_t a, std::int32_t b) {
                return scratch[a] < scratch[b] || (scratch[a] == scratch[b] && a < b);
              });
              std::copy(order.begin(), order.begin() + k, res);
              continue;
            }
            C sum = 0;
            for (std::int64_t c = 0; c < n; ++c) scratch[c] = sum += static_cast<C>(wr[c]);
            const std::uint64_t draws = static_cast<std::uint64_t>(row * k);
            for (std::int64_t j = 0; j < k; ++j) {
              const C u = kernels::unit<C>(s.bits(draws + static_cast<std::uint64_t>(j)));
              res[j] = kernels::sample_cdf(scratch.data(), wr, n, u * sum);
            }
          }
        });
      });
  const std::uint64_t f = fault.load();
  return f == ~std::uint64_t{0} ? -1 : static_cast<std::int64_t>(f);
}

}  // namespace cpu
}  // namespace minidl
