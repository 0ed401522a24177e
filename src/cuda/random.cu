// CUDA random kernels (see kernels/backend.h) on gpu::stream(): uniform and normal draws from cuRAND's Philox
// (random.cuh); integer, Bernoulli, permutation and multinomial draws from the same Philox stream addressed by
// element (kernels/random.h), each launch at offsets of its own (philox_reserve), so they work inside a captured
// graph. The permutation sorts random keys and the multinomial without replacement sorts each row's exponential
// keys (CUB radix sorts); with replacement it binary-searches each row's prefix sums. No host synchronisation
// except multinomial's one status word outside a capture.
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "cuda/random.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/random.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::PhiloxStream;
using Fault = unsigned long long;

void random_fill(Tensor& out, bool normal, double a, double b) {
  if (out.numel() == 0) return;
  kernels::dispatch_floating(out.dtype(), normal ? "randn" : "rand", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data_ptr<T>();
    launch_random<T>(out.numel(), normal, a, b, StoreDraw<T>{y, is_aligned(y, 16)});
  });
}

/// The launch's stream: cuRAND's layout for (seed, subsequence g, offset), the offset moved by the graph's
/// device-side base inside a capture.
__device__ PhiloxStream stream_of(const PhiloxState& st) {
  const std::uint64_t offset = st.offset + (st.device_base ? *st.device_base : 0);
  return {{static_cast<std::uint32_t>(st.seed), static_cast<std::uint32_t>(st.seed >> 32)}, offset / 4};
}

PhiloxState reserve() { return philox_reserve(current_device(), 4); }

template <class T, class F>
__global__ void draw_pairs_kernel(T* out, i64 n, PhiloxState st, F value) {
  const PhiloxStream s = stream_of(st);
  GRID_STRIDE(g, (n + 1) / 2) {
    std::uint32_t r[4];
    s.block(static_cast<std::uint64_t>(g), r);
    out[2 * g] = value(2 * g, PhiloxStream::join(r[0], r[1]));
    if (2 * g + 1 < n) out[2 * g + 1] = value(2 * g + 1, PhiloxStream::join(r[2], r[3]));
  }
}

template <class T, class F>
void draw_pairs(Tensor& out, const F& value) {
  const i64 n = out.numel();
  if (n == 0) return;
  draw_pairs_kernel<<<blocks_for((n + 1) / 2), kThreads, 0, stream()>>>(out.data_ptr<T>(), n, reserve(), value);
  MINIDL_CUDA_KERNEL_CHECK();
}

/// Scratch of one call carved from one workspace, each piece 256-byte aligned. Without a base it only measures.
class Carve {
 public:
  explicit Carve(char* base) : base_(base) {}
  template <class T>
  T* take(std::size_t count) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (count * sizeof(T) + 255) / 256 * 256;
    return p;
  }
  std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

__global__ void randperm_keys_kernel(std::uint64_t* keys, i64* values, i64 n, PhiloxState st) {
  const PhiloxStream s = stream_of(st);
  GRID_STRIDE(i, n) {
    keys[i] = s.bits(static_cast<std::uint64_t>(i));
    values[i] = i;
  }
}

// ---- multinomial -----------------------------------------------------------------------------------------------

template <class C>
struct KeyIndex {
  C key;
  i64 index;
};
struct SmallerKey {
  template <class C>
  __device__ KeyIndex<C> operator()(const KeyIndex<C>& a, const KeyIndex<C>& b) const {
    return b.key < a.key || (b.key == a.key && b.index < a.index) ? b : a;
  }
};

/// The row's checks, once every thread has seen its weights: thread 0 records a fault.
__device__ void record_fault(bool bad, bool positive, i64 row, Fault* fault) {
  bad = __syncthreads_or(bad);
  positive = __syncthreads_or(positive);
  if (threadIdx.x == 0 && (bad || !positive))
    atomicMin(fault, static_cast<Fault>(kernels::multinomial_fault(row, bad)));
}

/// One sample per row (with or without replacement): the category of smallest exponential key, one block per row.
template <class T>
__global__ void multinomial_one_kernel(const T* w, i64 rows, i64 n, PhiloxState st, i64* out, Fault* fault) {
  using C = kernels::opmath_t<T>;
  using Reduce = cub::BlockReduce<KeyIndex<C>, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const PhiloxStream s = stream_of(st);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    KeyIndex<C> best{C(INFINITY), n};
    bool bad = false, positive = false;
    for (i64 c = threadIdx.x; c < n; c += blockDim.x) {
      const C x = static_cast<C>(w[row * n + c]);
      bad = bad || kernels::bad_weight(x);
      positive = positive || x > C(0);
      const C key = kernels::exponential_key(s.bits(static_cast<std::uint64_t>(row * n + c)), x);
      if (key < best.key || (key == best.key && c < best.index)) best = {key, c};
    }
    best = Reduce(tmp).Reduce(best, SmallerKey{});
    record_fault(bad, positive, row, fault);  // its barriers also free tmp for the next row
    if (threadIdx.x == 0) out[row] = best.index < n ? best.index : 0;
  }
}

/// Every category's exponential key and index, one block per row, for the sort of sampling without replacement.
template <class T>
__global__ void multinomial_keys_kernel(const T* w, i64 rows, i64 n, PhiloxState st, kernels::opmath_t<T>* keys,
                                        int* index, Fault* fault) {
  using C = kernels::opmath_t<T>;
  const PhiloxStream s = stream_of(st);
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    bool bad = false, positive = false;
    for (i64 c = threadIdx.x; c < n; c += blockDim.x) {
      const C x = static_cast<C>(w[row * n + c]);
      bad = bad || kernels::bad_weight(x);
      positive = positive || x > C(0);
      keys[row * n + c] = kernels::exponential_key(s.bits(static_cast<std::uint64_t>(row * n + c)), x);
      index[row * n + c] = static_cast<int>(c);
    }
    record_fault(bad, positive, row, fault);
  }
}

/// Each row's inclusive prefix sums of the weights, one block per row in chunks of the block's width.
template <class T>
__global__ void multinomial_cdf_kernel(const T* w, i64 rows, i64 n, kernels::opmath_t<T>* cdf, Fault* fault) {
  using C = kernels::opmath_t<T>;
  using Scan = cub::BlockScan<C, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  for (i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    bool bad = false, positive = false;
    C carry = 0;
    for (i64 base = 0; base < n; base += kThreads) {
      const i64 c = base + threadIdx.x;
      const C x = c < n ? static_cast<C>(w[row * n + c]) : C(0);
      bad = bad || kernels::bad_weight(x);
      positive = positive || x > C(0);
      C prefix, chunk;
      Scan(tmp).InclusiveSum(x, prefix, chunk);
      if (c < n) cdf[row * n + c] = carry + prefix;
      carry += chunk;
      __syncthreads();  // tmp is reused by the next chunk
    }
    record_fault(bad, positive, row, fault);
  }
}

template <class T>
__global__ void multinomial_draw_kernel(const T* w, const kernels::opmath_t<T>* cdf, i64 rows, i64 n, i64 k,
                                        PhiloxState st, i64* out) {
  using C = kernels::opmath_t<T>;
  const PhiloxStream s = stream_of(st);
  GRID_STRIDE(e, rows * k) {
    const i64 row = e / k;
    const C* const cr = cdf + row * n;
    const C u = kernels::unit<C>(s.bits(static_cast<std::uint64_t>(e)));
    out[e] = kernels::sample_cdf(cr, w + row * n, n, u * cr[n - 1]);
  }
}

__global__ void segment_offsets_kernel(int* offsets, i64 segments, i64 n) {
  GRID_STRIDE(i, segments + 1) offsets[i] = static_cast<int>(i * n);
}

__global__ void take_first_kernel(const int* sorted, i64 rows, i64 n, i64 k, i64* out) {
  GRID_STRIDE(e, rows * k) out[e] = sorted[(e / k) * n + e % k];
}

/// Sampling without replacement, k >= 2: the k smallest keys of each row, by segmented radix sorts over as many
/// rows at a time as CUB's 32-bit item count allows.
template <class T>
void multinomial_sorted(const T* w, i64 rows, i64 n, i64 k, i64* out, Fault* fault) {
  using C = kernels::opmath_t<T>;
  const i64 per_sort = std::max<i64>(1, std::min<i64>(rows, INT_MAX / n));
  const int items = static_cast<int>(per_sort * n), segments = static_cast<int>(per_sort);
  std::size_t sort_bytes = 0;
  MINIDL_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const C*>(nullptr), static_cast<C*>(nullptr), static_cast<const int*>(nullptr),
      static_cast<int*>(nullptr), items, segments, static_cast<const int*>(nullptr), static_cast<const int*>(nullptr),
      0, sizeof(C) * 8, stream()));
  const std::size_t total = static_cast<std::size_t>(rows * n);
  Carve size(nullptr);
  size.take<C>(total);
  size.take<C>(static_cast<std::size_t>(items));
  size.take<int>(total);
  size.take<int>(static_cast<std::size_t>(items));
  size.take<int>(static_cast<std::size_t>(segments) + 1);
  size.take<char>(sort_bytes);
  Workspace ws(size.used(), "multinomial's sort");
  Carve carve(static_cast<char*>(ws.get()));
  C* const keys = carve.take<C>(total);
  C* const keys_sorted = carve.take<C>(static_cast<std::size_t>(items));
  int* const index = carve.take<int>(total);
  int* const index_sorted = carve.take<int>(static_cast<std::size_t>(items));
  int* const offsets = carve.take<int>(static_cast<std::size_t>(segments) + 1);
  void* const sort_scratch = carve.take<char>(sort_bytes);
  multinomial_keys_kernel<<<row_blocks(rows), kThreads, 0, stream()>>>(w, rows, n, reserve(), keys, index, fault);
  MINIDL_CUDA_KERNEL_CHECK();
  segment_offsets_kernel<<<blocks_for(segments + 1), kThreads, 0, stream()>>>(offsets, segments, n);
  MINIDL_CUDA_KERNEL_CHECK();
  for (i64 first = 0; first < rows; first += per_sort) {
    const i64 count = std::min(per_sort, rows - first);
    std::size_t bytes = sort_bytes;
    MINIDL_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
        sort_scratch, bytes, keys + first * n, keys_sorted, index + first * n, index_sorted,
        static_cast<int>(count * n), static_cast<int>(count), offsets, offsets + 1, 0, sizeof(C) * 8, stream()));
    take_first_kernel<<<blocks_for(count * k), kThreads, 0, stream()>>>(index_sorted, count, n, k, out + first * k);
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

}  // namespace

void uniform(Tensor& out, double low, double high) { random_fill(out, false, low, high); }
void normal(Tensor& out, double mean, double stddev) { random_fill(out, true, mean, stddev); }

void random_int(Tensor& out, std::int64_t low, std::uint64_t range) {
  kernels::dispatch_all(out.dtype(), "random_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    draw_pairs<T>(out, kernels::UniformIntValue<T>{low, range});
  });
}

void bernoulli(Tensor& out, const Tensor& p, double p_scalar) {
  kernels::dispatch_all(out.dtype(), "bernoulli", [&](auto tag) {
    using T = typename decltype(tag)::type;
    draw_pairs<T>(out, kernels::BernoulliValue<T>{p.defined() ? p.data_ptr<T>() : nullptr, p_scalar});
  });
}

void randperm(Tensor& out) {
  const i64 n = out.numel();
  if (n == 0) return;
  // Sorting by random keys: ties (probability about n^2 / 2^(bits + 1)) keep index order, so the keys have 24
  // bits more than twice the bits of n, which puts that below 2^-24 at a fraction of a 64-bit sort's passes.
  int index_bits = 1;
  while (index_bits < 63 && (i64{1} << index_bits) < n) ++index_bits;
  const int key_bits = std::min(64, 2 * index_bits + 24);
  std::size_t sort_bytes = 0;
  MINIDL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, static_cast<const std::uint64_t*>(nullptr), static_cast<std::uint64_t*>(nullptr),
      static_cast<const i64*>(nullptr), static_cast<i64*>(nullptr), n, 0, key_bits, stream()));
  Carve size(nullptr);
  size.take<std::uint64_t>(static_cast<std::size_t>(n));
  size.take<std::uint64_t>(static_cast<std::size_t>(n));
  size.take<i64>(static_cast<std::size_t>(n));
  size.take<char>(sort_bytes);
  Workspace ws(size.used(), "randperm's sort");
  Carve carve(static_cast<char*>(ws.get()));
  std::uint64_t* const keys = carve.take<std::uint64_t>(static_cast<std::size_t>(n));
  std::uint64_t* const keys_sorted = carve.take<std::uint64_t>(static_cast<std::size_t>(n));
  i64* const values = carve.take<i64>(static_cast<std::size_t>(n));
  void* const sort_scratch = carve.take<char>(sort_bytes);
  randperm_keys_kernel<<<blocks_for(n), kThreads, 0, stream()>>>(keys, values, n, reserve());
  MINIDL_CUDA_KERNEL_CHECK();
  MINIDL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch, sort_bytes, keys, keys_sorted, values,
                                                    out.data_ptr<i64>(), n, 0, key_bits, stream()));
}

std::int64_t multinomial(const Tensor& weights, bool replacement, Tensor& out) {
  const i64 rows = weights.size(0), n = weights.size(1), k = out.size(1);
  if (rows == 0) return -1;
  Workspace fault_word(sizeof(Fault), "multinomial's status");
  Fault* const fault = fault_word.as<Fault>();
  MINIDL_CUDA_CHECK(cudaMemsetAsync(fault, 0xFF, sizeof(Fault), stream()));
  i64* const result = out.data_ptr<i64>();
  kernels::dispatch(
      kernels::DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16>{}, weights.dtype(),
      "multinomial", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = kernels::opmath_t<T>;
        const T* const w = weights.data_ptr<T>();
        if (k == 1) {
          multinomial_one_kernel<<<row_blocks(rows), kThreads, 0, stream()>>>(w, rows, n, reserve(), result, fault);
          MINIDL_CUDA_KERNEL_CHECK();
        } else if (!replacement) {
          multinomial_sorted(w, rows, n, k, result, fault);
        } else {
          Workspace cdf(static_cast<std::size_t>(rows * n) * sizeof(C), "multinomial's prefix sums");
          multinomial_cdf_kernel<<<row_blocks(rows), kThreads, 0, stream()>>>(w, rows, n, cdf.as<C>(), fault);
          MINIDL_CUDA_KERNEL_CHECK();
          multinomial_draw_kernel<<<blocks_for(rows * k), kThreads, 0, stream()>>>(w, cdf.as<C>(), rows, n, k,
                                                                                   reserve(), result);
          MINIDL_CUDA_KERNEL_CHECK();
        }
      });
  if (stream_is_capturing()) return -1;
  Fault word = 0;
  MINIDL_CUDA_CHECK(cudaMemcpyAsync(&word, fault, sizeof word, cudaMemcpyDeviceToHost, stream()));
  MINIDL_CUDA_CHECK(cudaStreamSynchronize(stream()));
  return word == ~Fault{0} ? -1 : static_cast<std::int64_t>(word);
}

}  // namespace gpu
}  // namespace minidl
