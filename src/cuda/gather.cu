// CUDA indexed accesses (kernels/index_geometry.h) and nonzero, queued on gpu::stream(). The general kernels give
// each thread kUnroll elements of up to 8 bytes or one 16-byte pack (a grid-stride loop over tiles): their offsets from
// the geometry (32-bit multiply-shift division while the element count allows), then all their index loads, then all
// their data loads, then the stores, so that enough accesses are in flight to cover the memory's latency. Gathers and
// plain scatters whose innermost dim is contiguous on both sides and not indexed move 16-byte packs instead of elements
// (bytes are bytes: they dispatch on the element size, not the dtype). A gather or accumulating scatter whose one
// index walks the innermost dim within a data row that fits shared memory (gather(x, -1, idx), x[:, idx],
// scatter_add_(-1, ...)) stages that row in shared memory with coalesced loads and serves the indices from there:
// the direct kernel would fetch a 32-byte sector from L2 per 4-byte element and contend on global atomics.
// Accumulating scatters add with atomics (native for 4- and 8-byte types and, on Hopper, for float packs of four;
// a compare-and-swap on the enclosing 32-bit word for 1- and 2-byte ones), except floating ones under
// minidl::deterministic(), which sort the destinations stably first (cub::DeviceRadixSort) and sum each run in
// order. An out-of-range index sets a device-side flag (which index, its value) that the host reads back after the
// kernel.
#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

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

/// Elements a thread of the element-wise kernels takes at a time.
constexpr int kUnroll = 4;
/// ... and for elements of type E: one 16-byte pack already keeps enough bytes in flight per thread, and four of
/// them (with their offsets and indices) cost the registers that fill a multiprocessor (see docs/BENCHMARKS.md).
template <class E>
constexpr int kElementUnroll = sizeof(E) >= 16 ? 1 : kUnroll;

/// Calls visit(d, o, ok) for each tile of U elements of g this thread owns (blockDim.x apart): element u's data
/// offset d[u] (indices included), its other offset o[u], and ok[u], false where it lies past the end or has an
/// index out of range (reported). Every offset and index of the tile is read before visit, with no branch on a
/// value read, so that the loads of all U elements are in flight together.
template <int U, bool Small, class Visit>
__device__ void visit_elements(const IndexGeometry& g, ull* fault, const Visit& visit) {
  const i64 tile = static_cast<i64>(blockDim.x) * U;
  for (i64 base = blockIdx.x * tile + threadIdx.x; base < g.numel; base += tile * gridDim.x) {
    i64 d[U], o[U];
    bool ok[U];
    int bad_k = -1;
    i64 bad_value = 0;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const i64 i = base + u * static_cast<i64>(blockDim.x);
      // Past the end: the last element once more (its loads are valid), dropped below.
      i64 at[kMaxIndices];
      g.locate<Small>(i < g.numel ? i : g.numel - 1, d[u], o[u], at);
      int k = 0;
      i64 value = 0;
      ok[u] = g.resolve(d[u], at, k, value);
      if (!ok[u]) {
        bad_k = k;
        bad_value = value;
      }
      ok[u] = ok[u] && i < g.numel;
    }
    if (bad_k >= 0) report(fault, bad_k, bad_value);
    visit(d, o, ok);
  }
}

/// The direction of a plain indexed copy: a gather reads data at the indexed offset into the other operand, a
/// scatter writes the other operand's element there.
enum class Move { Gather, Scatter };

template <Move M, class E, bool Small>
__global__ void move_kernel(IndexGeometry g, const E* __restrict__ from, E* __restrict__ to, ull* fault) {
  constexpr int U = kElementUnroll<E>;
  visit_elements<U, Small>(g, fault, [&](const i64(&d)[U], const i64(&o)[U], const bool(&ok)[U]) {
    E v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (ok[u]) v[u] = from[M == Move::Gather ? d[u] : o[u]];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (ok[u]) to[M == Move::Gather ? o[u] : d[u]] = v[u];
    }
  });
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
  constexpr int U = kElementUnroll<T>;
  visit_elements<U, Small>(g, fault, [&](const i64(&d)[U], const i64(&o)[U], const bool(&ok)[U]) {
    T v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (ok[u]) v[u] = values[o[u]];
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (ok[u]) atomic_accumulate(data + d[u], v[u]);
    }
  });
}

// ---- Rows staged in shared memory ------------------------------------------------------------------------------
// A row job: g has one index tensor, walking g's last dim, and the data row it picks from (index_bound[0] elements,
// index_step[0] apart) stays put along that dim (data stride 0). Block b takes part b % chunks of row b / chunks
// of g (rows: its elements over the last dim's size): it stages the data row in shared memory, serves that part's
// indices from there and, for an accumulating scatter, writes the row back.

/// A block's shared memory without opting in to more.
constexpr std::size_t kStageBytes = 48 * 1024;

/// to[j * to_step] = from[j * from_step] for j < n, by the whole block, kUnroll loads in flight per thread.
template <class E>
__device__ void block_copy_elements(const E* from, i64 from_step, E* to, i64 to_step, i64 n) {
  for (i64 j0 = threadIdx.x; j0 < n; j0 += static_cast<i64>(blockDim.x) * kUnroll) {
    E v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const i64 j = j0 + u * static_cast<i64>(blockDim.x);
      if (j < n) v[u] = from[j * from_step];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const i64 j = j0 + u * static_cast<i64>(blockDim.x);
      if (j < n) to[j * to_step] = v[u];
    }
  }
}

/// block_copy_elements by 16-byte packs where both sides are contiguous and aligned.
template <class E>
__device__ void block_copy(const E* from, i64 from_step, E* to, i64 to_step, i64 n) {
  if constexpr (sizeof(E) < 16) {
    constexpr i64 v = 16 / sizeof(E);
    const bool packs = from_step == 1 && to_step == 1 && n % v == 0 &&
                       (reinterpret_cast<std::uintptr_t>(from) | reinterpret_cast<std::uintptr_t>(to)) % 16 == 0;
    if (packs) {
      block_copy_elements(reinterpret_cast<const uint4*>(from), 1, reinterpret_cast<uint4*>(to), 1, n / v);
      return;
    }
  }
  block_copy_elements(from, from_step, to, to_step, n);
}

/// The elements j < n of a row part, kUnroll at a time per thread: load(j) (the element's own operand, loaded
/// beside its index) and then, where its index is in range, use(j, position along the row, load's value); an
/// index out of range is reported and its element skipped. ix: the part's first index, ix_step apart.
template <class Load, class Use>
__device__ void walk_part(const IndexGeometry& g, const i64* ix, i64 ix_step, i64 n, ull* fault, const Load& load,
                          const Use& use) {
  using V = decltype(load(i64{0}));
  for (i64 j0 = threadIdx.x; j0 < n; j0 += static_cast<i64>(blockDim.x) * kUnroll) {
    i64 raw[kUnroll];
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const i64 j = j0 + u * static_cast<i64>(blockDim.x);
      const i64 at = j < n ? j : n - 1;  // past the end: the last element once more, dropped below
      raw[u] = ix[at * ix_step];
      v[u] = load(at);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const i64 j = j0 + u * static_cast<i64>(blockDim.x);
      i64 pos;
      if (j >= n) continue;
      if (!g.position(0, raw[u], pos)) {
        report(fault, 0, raw[u]);
        continue;
      }
      use(j, pos, v[u]);
    }
  }
}

/// Part b's row offsets (data row, other operand, index) and its element count, over parts of `chunk` elements.
template <bool Small>
__device__ i64 locate_part(const IndexGeometry& g, i64 b, i64 chunk, i64& d, i64& o, i64& at) {
  const i64 len = g.sizes[g.ndim - 1], chunks = (len + chunk - 1) / chunk, begin = b % chunks * chunk;
  i64 at_k[kMaxIndices];
  g.locate<Small>(b / chunks * len + begin, d, o, at_k);
  at = at_k[0];
  return len - begin < chunk ? len - begin : chunk;
}

template <class E, bool Small>
__global__ void row_gather_kernel(IndexGeometry g, i64 chunk, const E* __restrict__ data, E* __restrict__ out,
                                  ull* fault) {
  extern __shared__ __align__(16) unsigned char stage[];
  E* row = reinterpret_cast<E*>(stage);
  const int last = g.ndim - 1;
  const i64 len = g.sizes[last], parts = g.numel / len * ((len + chunk - 1) / chunk);
  const i64 out_step = g.other_strides[last];
  for (i64 b = blockIdx.x; b < parts; b += gridDim.x) {
    i64 d, o, at;
    const i64 n = locate_part<Small>(g, b, chunk, d, o, at);
    __syncthreads();  // the previous part's reads of the stage are done
    block_copy(data + d, g.index_step[0], row, 1, g.index_bound[0]);
    __syncthreads();
    walk_part(
        g, g.index[0] + at, g.index_strides[0][last], n, fault, [](i64) { return 0; },
        [&](i64 j, i64 pos, int) { out[o + j * out_step] = row[pos]; });
  }
}

/// One part per row (chunk = the row): a block owns its data row while it adds into the stage.
template <class T, bool Small>
__global__ void row_scatter_add_kernel(IndexGeometry g, const T* __restrict__ values, T* data, ull* fault) {
  extern __shared__ __align__(16) unsigned char stage[];
  T* row = reinterpret_cast<T*>(stage);
  const int last = g.ndim - 1;
  const i64 len = g.sizes[last], rows = g.numel / len, value_step = g.other_strides[last];
  for (i64 b = blockIdx.x; b < rows; b += gridDim.x) {
    i64 d, o, at;
    const i64 n = locate_part<Small>(g, b, len, d, o, at);
    __syncthreads();  // the previous row's write-back is done
    block_copy<T>(data + d, g.index_step[0], row, 1, g.index_bound[0]);
    __syncthreads();
    walk_part(
        g, g.index[0] + at, g.index_strides[0][last], n, fault, [&](i64 j) { return values[o + j * value_step]; },
        [&](i64, i64 pos, T v) { atomic_accumulate(row + pos, v); });
    __syncthreads();
    block_copy<T>(row, 1, data + d, g.index_step[0], g.index_bound[0]);
  }
}

/// Whether g is a row job (above) whose data row of `bytes`-byte elements fits the stage and is worth staging:
/// its bytes are at most 16 per element of the row part that reads them (the direct kernel's cost is a 32-byte
/// sector per element).
bool stageable(const IndexGeometry& g, std::size_t bytes, i64 part) {
  const int last = g.ndim - 1;
  if (g.nidx != 1 || last < 0 || g.data_strides[last] != 0 || g.index_strides[0][last] == 0) return false;
  const auto row_bytes = static_cast<std::size_t>(g.index_bound[0]) * bytes;
  return row_bytes <= kStageBytes && row_bytes <= 16 * static_cast<std::size_t>(part);
}

/// The stage's size for rows of `bytes`-byte elements: whole 16-byte packs, so that a 1- or 2-byte atomic's
/// enclosing word stays inside.
std::size_t stage_bytes(const IndexGeometry& g, std::size_t bytes) {
  return (static_cast<std::size_t>(g.index_bound[0]) * bytes + 15) / 16 * 16;
}

/// Whether no data element is reached from two rows of g (a row job): the data rows are disjoint, so that a block
/// may own one. The outer dims' data strides and the row's (step, bound), as a tensor without internal overlap.
bool rows_disjoint(const IndexGeometry& g) {
  std::vector<std::pair<i64, i64>> dims;  // (|stride|, size)
  for (int d = 0; d < g.ndim - 1; ++d) dims.emplace_back(std::abs(g.data_strides[d]), g.sizes[d]);
  dims.emplace_back(std::abs(g.index_step[0]), g.index_bound[0]);
  std::sort(dims.begin(), dims.end());
  i64 span = 0;
  for (const auto& [stride, size] : dims) {
    if (size > 1 && stride <= span) return false;
    span += (size - 1) * stride;
  }
  return true;
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

/// launch(small) with small a std::bool_constant: whether g's flat element counts fit the 32-bit division.
template <class Launch>
void launch_small(const IndexGeometry& g, Launch&& launch) {
  if (kernels::small_geometry(g)) {
    launch(std::true_type{});
  } else {
    launch(std::false_type{});
  }
  MINIDL_CUDA_KERNEL_CHECK();
}

/// Blocks for the element-wise kernels over g, with elements of type E.
template <class E>
unsigned int element_blocks(const IndexGeometry& g) {
  return blocks_for((g.numel + kElementUnroll<E> - 1) / kElementUnroll<E>, kThreads);
}

/// Parts in flight that fill the GPU (a few blocks per multiprocessor).
constexpr i64 kFillBlocks = 1024;
/// Rows below which an accumulating scatter stays with global atomics: one block per row would leave
/// multiprocessors idle.
constexpr i64 kMinStagedRows = 256;

void gather_into(IndexGeometry g, const Tensor& data, Tensor& out, ull* fault) {
  if (g.numel == 0) return;
  std::size_t bytes = element_size(data.dtype());
  const i64 len = g.ndim > 0 ? g.sizes[g.ndim - 1] : 1, rows = g.numel / len;
  // Few rows: parts of each, so that the grid fills the GPU, each at least as long as the row it stages.
  const i64 per_row = (kFillBlocks + rows - 1) / rows;
  const i64 chunk = per_row > 1 ? std::max<i64>({(len + per_row - 1) / per_row, g.nidx > 0 ? g.index_bound[0] : 0,
                                                 static_cast<i64>(kThreads) * kUnroll})
                                : len;
  if (stageable(g, bytes, std::min(chunk, len))) {
    const i64 parts = rows * ((len + chunk - 1) / chunk);
    kernels::dispatch_bytes(bytes, "index_gather", [&](auto tag) {
      using E = typename decltype(tag)::type;
      launch_small(g, [&](auto small) {
        row_gather_kernel<E, decltype(small)::value><<<row_blocks(parts), kThreads, stage_bytes(g, bytes), stream()>>>(
            g, chunk, static_cast<const E*>(data.data_ptr()), static_cast<E*>(out.data_ptr()), fault);
      });
    });
    return;
  }
  if (to_packs(g, bytes, data.data_ptr(), out.data_ptr())) bytes = 16;
  kernels::dispatch_bytes<uint4>(bytes, "index_gather", [&](auto tag) {
    using E = typename decltype(tag)::type;
    launch_small(g, [&](auto small) {
      move_kernel<Move::Gather, E, decltype(small)::value><<<element_blocks<E>(g), kThreads, 0, stream()>>>(
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
    kernels::dispatch_bytes<uint4>(bytes, "index_scatter", [&](auto tag) {
      using E = typename decltype(tag)::type;
      launch_small(g, [&](auto small) {
        move_kernel<Move::Scatter, E, decltype(small)::value><<<element_blocks<E>(g), kThreads, 0, stream()>>>(
            g, static_cast<const E*>(values.data_ptr()), static_cast<E*>(data.data_ptr()), fault.get());
      });
    });
    return fault.read(data.device());
  }
  const bool deterministic_sum = is_floating_point(data.dtype()) && minidl::deterministic();
  const std::size_t bytes = element_size(data.dtype());
  const i64 len = g.ndim > 0 ? g.sizes[g.ndim - 1] : 1, rows = g.numel / len;
  if (!deterministic_sum && rows >= kMinStagedRows && stageable(g, bytes, len) && rows_disjoint(g)) {
    kernels::dispatch_all(data.dtype(), "index_scatter", [&](auto tag) {
      using T = typename decltype(tag)::type;
      launch_small(g, [&](auto small) {
        row_scatter_add_kernel<T, decltype(small)::value>
            <<<row_blocks(rows), kThreads, stage_bytes(g, bytes), stream()>>>(g, values.data_ptr<T>(),
                                                                              data.data_ptr<T>(), fault.get());
      });
    });
    return fault.read(data.device());
  }
  if (data.dtype() == kFloat32 && !deterministic_sum &&
      to_packs(g, sizeof(float), data.data_ptr(), values.data_ptr())) {
    launch_small(g, [&](auto small) {
      scatter_add_kernel<float4, decltype(small)::value><<<element_blocks<float4>(g), kThreads, 0, stream()>>>(
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
    launch_small(g, [&](auto small) {
      scatter_add_kernel<T, decltype(small)::value>
          <<<element_blocks<T>(g), kThreads, 0, stream()>>>(g, values.data_ptr<T>(), data.data_ptr<T>(), fault.get());
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
