// CUDA indexed accesses (kernels/index_geometry.h) and nonzero, queued on gpu::stream(). One thread per element
// (a grid-stride loop): its offsets from the geometry (32-bit multiply-shift division while the element count
// allows), its indices read and checked, one load and one store. Gathers and plain scatters whose innermost dim is
// contiguous on both sides and not indexed move 16-byte packs instead of elements (bytes are bytes: they dispatch
// on the element size, not the dtype). Accumulating scatters add with
// atomics (native for 4- and 8-byte types and, on Hopper, for float packs of four; a compare-and-swap on the
// enclosing 32-bit word for 1- and 2-byte ones), except floating ones under
// minidl::deterministic(), which sort the destinations stably first (cub::DeviceRadixSort) and sum each run in
// order. An out-of-range index sets a device-side flag (which index, its value) that the host reads back after the
// kernel.
#include <thrust/iterator/counting_iterator.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include "cuda/context.h"
#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/index_geometry.h"
#include "minidl/cuda.h"

namespace minidl {
namespace gpu {
namespace {

using kernels::IndexFault;
using kernels::IndexGeometry;
using kernels::kMaxIndices;
using ull = unsigned long long;
constexpr ull kNoFault = ~0ULL;

/// The first out-of-range index a kernel meets: two words on the device, (index tensor, value), written once by
/// whichever thread claims the first word. Not armed while a CUDA graph is being captured (reading it back would
/// synchronise inside the capture).
class FaultFlag {
 public:
  FaultFlag() : armed_(!stream_is_capturing()), words_(armed_ ? 2 * sizeof(ull) : 0, "an index check") {
    if (armed_) MINIDL_CUDA_CHECK(cudaMemsetAsync(words_.get(), 0xFF, 2 * sizeof(ull), stream()));
  }
  ull* get() const { return armed_ ? words_.as<ull>() : nullptr; }
  /// Waits for the stream.
  IndexFault read(Device device) const {
    if (!armed_) return {};
    ull host[2];
    copy_bytes(host, Device(kCPU), words_.get(), device, sizeof(host));
    if (host[0] == kNoFault) return {};
    return {static_cast<i64>(host[0]), static_cast<i64>(host[1])};
  }

 private:
  bool armed_;
  Workspace words_;
};

__device__ void report(ull* fault, int k, i64 value) {
  if (fault != nullptr && atomicCAS(fault, kNoFault, static_cast<ull>(k)) == kNoFault)
    fault[1] = static_cast<ull>(value);
}

template <class E, bool Small>
__global__ void gather_kernel(IndexGeometry g, const E* __restrict__ data, E* __restrict__ out, ull* fault) {
  GRID_STRIDE(i, g.numel) {
    i64 d, o, at[kMaxIndices];
    g.locate<Small>(i, d, o, at);
    int bad_k;
    i64 bad_value;
    if (!g.resolve(d, at, bad_k, bad_value)) {
      report(fault, bad_k, bad_value);
      continue;
    }
    out[o] = data[d];
  }
}

template <class E, bool Small>
__global__ void scatter_kernel(IndexGeometry g, const E* __restrict__ values, E* __restrict__ data, ull* fault) {
  GRID_STRIDE(i, g.numel) {
    i64 d, o, at[kMaxIndices];
    g.locate<Small>(i, d, o, at);
    int bad_k;
    i64 bad_value;
    if (!g.resolve(d, at, bad_k, bad_value)) {
      report(fault, bad_k, bad_value);
      continue;
    }
    data[d] = values[o];
  }
}

/// *p = accumulate_add(*p, v), atomically.
template <class T>
__device__ void atomic_accumulate(T* p, T v) {
  if constexpr (std::is_same_v<T, float4>) {
#if __CUDA_ARCH__ >= 900
    atomicAdd(p, v);  // Hopper's vector atomics: one operation per 16 bytes
#else
    atomicAdd(&p->x, v.x);
    atomicAdd(&p->y, v.y);
    atomicAdd(&p->z, v.z);
    atomicAdd(&p->w, v.w);
#endif
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t>) {
    atomicAdd(p, v);
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    atomicAdd(reinterpret_cast<ull*>(p), static_cast<ull>(v));  // two's complement: the same bits
  } else {
    static_assert(sizeof(T) <= 2, "atomic_accumulate: 1- and 2-byte types go through their 32-bit word");
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto* word = reinterpret_cast<unsigned int*>(addr & ~std::uintptr_t{3});
    const unsigned int shift = static_cast<unsigned int>(addr & 3) * 8;
    constexpr unsigned int mask = sizeof(T) == 1 ? 0xFFu : 0xFFFFu;
    unsigned int old = *word, assumed;
    do {
      assumed = old;
      const unsigned int bits = (assumed >> shift) & mask;
      T cur;
      memcpy(&cur, &bits, sizeof(T));  // little-endian: the low bytes
      const T next = kernels::accumulate_add(cur, v);
      unsigned int next_bits = 0;
      memcpy(&next_bits, &next, sizeof(T));
      old = atomicCAS(word, assumed, (assumed & ~(mask << shift)) | (next_bits << shift));
    } while (assumed != old);
  }
}

template <class T, bool Small>
__global__ void scatter_add_kernel(IndexGeometry g, const T* __restrict__ values, T* data, ull* fault) {
  GRID_STRIDE(i, g.numel) {
    i64 d, o, at[kMaxIndices];
    g.locate<Small>(i, d, o, at);
    int bad_k;
    i64 bad_value;
    if (!g.resolve(d, at, bad_k, bad_value)) {
      report(fault, bad_k, bad_value);
      continue;
    }
    atomic_accumulate(data + d, values[o]);
  }
}

// The deterministic accumulation: each element's destination as a sort key (`sentinel`, above every destination,
// for an out-of-range one) with its flat position as the value.
__global__ void destination_kernel(IndexGeometry g, ull* __restrict__ keys, i64* __restrict__ order, ull sentinel,
                                   ull* fault) {
  GRID_STRIDE(i, g.numel) {
    i64 d, o, at[kMaxIndices];
    g.locate<true>(i, d, o, at);
    int bad_k;
    i64 bad_value;
    const bool ok = g.resolve(d, at, bad_k, bad_value);
    if (!ok) report(fault, bad_k, bad_value);
    keys[i] = ok ? static_cast<ull>(d) : sentinel;
    order[i] = i;
  }
}

// The thread at the start of each run of equal keys sums the run in order (the sort is stable: row-major order of
// the elements, as on the CPU).
template <class T>
__global__ void run_sum_kernel(IndexGeometry g, const ull* __restrict__ keys, const i64* __restrict__ order,
                               ull sentinel, const T* __restrict__ values, T* __restrict__ data) {
  GRID_STRIDE(p, g.numel) {
    const ull key = keys[p];
    if (key == sentinel || (p > 0 && keys[p - 1] == key)) continue;
    T acc = data[key];
    for (i64 q = p; q < g.numel && keys[q] == key; ++q) {
      i64 d, o, at[kMaxIndices];
      g.locate<true>(order[q], d, o, at);
      acc = kernels::accumulate_add(acc, values[o]);
    }
    data[key] = acc;
  }
}

/// The largest data offset g can reach with indices in range.
i64 max_data_offset(const IndexGeometry& g) {
  i64 m = 0;
  for (int d = 0; d < g.ndim; ++d) m += (g.sizes[d] - 1) * g.data_strides[d];
  for (int k = 0; k < g.nidx; ++k) m += (g.index_bound[k] - 1) * g.index_step[k];
  return m;
}

template <class T>
void deterministic_accumulate(const IndexGeometry& g, const T* values, T* data, ull* fault) {
  const auto n = static_cast<int>(g.numel);
  const ull sentinel = static_cast<ull>(max_data_offset(g)) + 1;
  int end_bit = 1;
  while (end_bit < 64 && (sentinel >> end_bit) != 0) ++end_bit;
  Workspace keys(2 * g.numel * sizeof(ull), "the sorted destinations of a scatter");
  Workspace order(2 * g.numel * sizeof(i64), "the sorted order of a scatter");
  ull* keys_in = keys.as<ull>();
  i64* order_in = order.as<i64>();
  destination_kernel<<<blocks_for(g.numel, kThreads), kThreads, 0, stream()>>>(g, keys_in, order_in, sentinel, fault);
  MINIDL_CUDA_KERNEL_CHECK();
  std::size_t temp_bytes = 0;
  MINIDL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys_in, keys_in + g.numel, order_in,
                                                    order_in + g.numel, n, 0, end_bit, stream()));
  Workspace temp(temp_bytes, "a radix sort");
  MINIDL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, keys_in, keys_in + g.numel, order_in,
                                                    order_in + g.numel, n, 0, end_bit, stream()));
  run_sum_kernel<<<blocks_for(g.numel, kThreads), kThreads, 0, stream()>>>(g, keys_in + g.numel, order_in + g.numel,
                                                                           sentinel, values, data);
  MINIDL_CUDA_KERNEL_CHECK();
}

/// g rewritten over 16-byte packs of its `bytes`-byte elements when its innermost dim is contiguous in data and
/// other, walked by no index, and every offset stays a whole number of packs; false (g unchanged) otherwise.
bool to_packs(IndexGeometry& g, std::size_t bytes, const void* data, const void* other) {
  const auto v = static_cast<i64>(16 / bytes);
  const int last = g.ndim - 1;
  if (v < 2 || last < 0 || !is_aligned(data, 16) || !is_aligned(other, 16)) return false;
  if (g.data_strides[last] != 1 || g.other_strides[last] != 1 || g.sizes[last] % v != 0) return false;
  for (int k = 0; k < g.nidx; ++k) {
    if (g.index_strides[k][last] != 0 || g.index_step[k] % v != 0) return false;
  }
  for (int d = 0; d < last; ++d) {
    if (g.data_strides[d] % v != 0 || g.other_strides[d] % v != 0) return false;
  }
  g.sizes[last] /= v;
  g.numel /= v;
  for (int d = 0; d < last; ++d) {
    g.data_strides[d] /= v;
    g.other_strides[d] /= v;
  }
  for (int k = 0; k < g.nidx; ++k) g.index_step[k] /= v;
  kernels::prepare_divisors(g);
  return true;
}

/// f(TypeTag<E>) with E an unsigned type of `bytes` bytes (uint4 for a 16-byte pack).
template <class F>
void dispatch_bytes(std::size_t bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(kernels::TypeTag<std::uint8_t>{});
    case 2:
      return f(kernels::TypeTag<std::uint16_t>{});
    case 4:
      return f(kernels::TypeTag<std::uint32_t>{});
    case 8:
      return f(kernels::TypeTag<std::uint64_t>{});
    default:
      return f(kernels::TypeTag<uint4>{});
  }
}

/// Launches kernel<Small> (Small: 32-bit division) over g's elements.
template <class Launch>
void launch_over(const IndexGeometry& g, Launch&& launch) {
  const unsigned int blocks = blocks_for(g.numel, kThreads);
  if (kernels::small_geometry(g)) {
    launch(std::true_type{}, blocks);
  } else {
    launch(std::false_type{}, blocks);
  }
  MINIDL_CUDA_KERNEL_CHECK();
}

void gather_into(IndexGeometry g, const Tensor& data, Tensor& out, ull* fault) {
  if (g.numel == 0) return;
  std::size_t bytes = element_size(data.dtype());
  if (to_packs(g, bytes, data.data_ptr(), out.data_ptr())) bytes = 16;
  dispatch_bytes(bytes, [&](auto tag) {
    using E = typename decltype(tag)::type;
    launch_over(g, [&](auto small, unsigned int blocks) {
      gather_kernel<E, decltype(small)::value><<<blocks, kThreads, 0, stream()>>>(
          g, static_cast<const E*>(data.data_ptr()), static_cast<E*>(out.data_ptr()), fault);
    });
  });
}

}  // namespace

IndexFault index_gather(const IndexGeometry& g, const Tensor& data, Tensor& out) {
  if (g.numel == 0) return {};
  const FaultFlag fault;
  gather_into(g, data, out, fault.get());
  return fault.read(data.device());
}

IndexFault index_scatter(const IndexGeometry& geometry, const Tensor& values, Tensor& data, bool accumulate) {
  if (geometry.numel == 0) return {};
  const FaultFlag fault;
  IndexGeometry g = geometry;
  if (!accumulate) {
    std::size_t bytes = element_size(data.dtype());
    if (to_packs(g, bytes, data.data_ptr(), values.data_ptr())) bytes = 16;
    dispatch_bytes(bytes, [&](auto tag) {
      using E = typename decltype(tag)::type;
      launch_over(g, [&](auto small, unsigned int blocks) {
        scatter_kernel<E, decltype(small)::value><<<blocks, kThreads, 0, stream()>>>(
            g, static_cast<const E*>(values.data_ptr()), static_cast<E*>(data.data_ptr()), fault.get());
      });
    });
    return fault.read(data.device());
  }
  const bool deterministic_sum = is_floating_point(data.dtype()) && minidl::deterministic();
  if (data.dtype() == kFloat32 && !deterministic_sum &&
      to_packs(g, sizeof(float), data.data_ptr(), values.data_ptr())) {
    launch_over(g, [&](auto small, unsigned int blocks) {
      scatter_add_kernel<float4, decltype(small)::value><<<blocks, kThreads, 0, stream()>>>(
          g, static_cast<const float4*>(values.data_ptr()), static_cast<float4*>(data.data_ptr()), fault.get());
    });
    return fault.read(data.device());
  }
  kernels::dispatch_all(data.dtype(), "index_scatter", [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The sort takes an int count: larger scatters accumulate with atomics even in deterministic mode.
    if (deterministic_sum && kernels::small_geometry(g)) {
      deterministic_accumulate(g, values.data_ptr<T>(), data.data_ptr<T>(), fault.get());
      return;
    }
    launch_over(g, [&](auto small, unsigned int blocks) {
      scatter_add_kernel<T, decltype(small)::value>
          <<<blocks, kThreads, 0, stream()>>>(g, values.data_ptr<T>(), data.data_ptr<T>(), fault.get());
    });
  });
  return fault.read(data.device());
}

void index_select(const Tensor& src, const Tensor& index, Tensor& out, std::int64_t outer, std::int64_t n,
                  std::int64_t inner) {
  gather_into(kernels::select_geometry(outer, n, inner, index.numel(), index.data_ptr<i64>()), src, out, nullptr);
}

namespace {
__global__ void first_out_of_range_kernel(const i64* __restrict__ index, i64 k, i64 n, ull* __restrict__ first) {
  GRID_STRIDE(j, k) {
    if (index[j] < 0 || index[j] >= n) atomicMin(first, static_cast<ull>(j));
  }
}

/// Whether an element is nonzero (NaN is).
template <class T>
struct IsNonzero {
  const T* x;
  __device__ bool operator()(i64 i) const { return kernels::convert<bool>(x[i]); }
};

template <class T>
__global__ void count_nonzero_kernel(const T* __restrict__ x, i64 n, ull* __restrict__ count) {
  __shared__ ull partial[kThreads];
  ull c = 0;
  GRID_STRIDE(i, n) c += kernels::convert<bool>(x[i]) ? 1 : 0;
  const ull total = block_sum(c, partial);
  if (threadIdx.x == 0 && total != 0) atomicAdd(count, total);
}

/// The sizes of a tensor nonzero takes (PyTorch's limit on dims).
struct NonzeroDims {
  int ndim;
  i64 sizes[25];
};

__global__ void coordinates_kernel(const i64* __restrict__ flat, i64 count, NonzeroDims dims, i64* __restrict__ out) {
  GRID_STRIDE(r, count) {
    i64 i = flat[r];
    for (int d = dims.ndim - 1; d >= 0; --d) {
      out[r * dims.ndim + d] = i % dims.sizes[d];
      i /= dims.sizes[d];
    }
  }
}
}  // namespace

std::int64_t first_out_of_range(const Tensor& index, std::int64_t n) {
  const i64 k = index.numel();
  if (k == 0) return -1;
  Tensor first = full({1}, static_cast<double>(k), TensorOptions(kInt64).device(index.device()));
  first_out_of_range_kernel<<<blocks_for(k, kThreads), kThreads, 0, stream()>>>(
      index.data_ptr<i64>(), k, n, reinterpret_cast<ull*>(first.data_ptr<i64>()));
  MINIDL_CUDA_KERNEL_CHECK();
  const i64 j = first.item<i64>();
  return j == k ? -1 : j;
}

std::int64_t count_nonzero(const Tensor& x) {
  const i64 n = x.numel();
  if (n == 0) return 0;
  Tensor count = zeros({1}, TensorOptions(kInt64).device(x.device()));
  kernels::dispatch_all(x.dtype(), "nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    count_nonzero_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream()>>>(x.data_ptr<T>(), n,
                                                                             reinterpret_cast<ull*>(count.data_ptr()));
  });
  MINIDL_CUDA_KERNEL_CHECK();
  return count.item<i64>();
}

void nonzero(const Tensor& x, Tensor& out) {
  const i64 count = out.size(0), n = x.numel();
  MINIDL_CHECK(x.dim() <= 25, ValueError, "nonzero: at most 25 dims are supported, found ", x.dim());
  Workspace flat(static_cast<std::size_t>(count) * sizeof(i64), "nonzero's positions");
  Workspace selected(sizeof(i64), "nonzero's count");
  kernels::dispatch_all(x.dtype(), "nonzero", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const thrust::counting_iterator<i64> positions(0);
    const IsNonzero<T> pred{x.data_ptr<T>()};
    std::size_t temp_bytes = 0;
    MINIDL_CUDA_CHECK(
        cub::DeviceSelect::If(nullptr, temp_bytes, positions, flat.as<i64>(), selected.as<i64>(), n, pred, stream()));
    Workspace temp(temp_bytes, "nonzero's selection");
    MINIDL_CUDA_CHECK(cub::DeviceSelect::If(temp.get(), temp_bytes, positions, flat.as<i64>(), selected.as<i64>(), n,
                                            pred, stream()));
  });
  NonzeroDims dims{static_cast<int>(x.dim()), {}};
  for (int d = 0; d < dims.ndim; ++d) dims.sizes[d] = x.size(d);
  if (dims.ndim > 0) {
    coordinates_kernel<<<blocks_for(count, kThreads), kThreads, 0, stream()>>>(flat.as<i64>(), count, dims,
                                                                               out.data_ptr<i64>());
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

}  // namespace gpu
}  // namespace minidl
