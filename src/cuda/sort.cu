// CUDA sort and topk of contiguous rows (see kernels/backend.h), on gpu::stream(), nothing synchronised. Both
// order the unsigned keys of kernels/sort_keys.h, so they agree with the CPU's permutations.
//
// sort: CUB's radix sorts of (key, position) pairs, which are stable: DeviceRadixSort for one row,
// DeviceSegmentedRadixSort for many (DeviceSegmentedSort would be faster on short rows, but it copies its
// partition sizes to the host and waits, which a CUDA graph capture forbids); the values are then gathered from
// the input by position, so a NaN keeps its bits.
//
// topk (k up to kSelectMaxK): a selection that reads the input once. Blocks of kSelectThreads threads take tiles of
// kSelectTile elements of a row; each finds the k-th largest key of its tile by a radix select (8 bits a pass,
// histograms per warp in shared memory) and writes its k largest (ties to the lower position) as candidates; the
// candidates of a row are selected the same way until one tile holds them, then sorted by key (stably) when
// `sorted`. Larger k sort whole rows and keep their first k.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <cub/block/block_load.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <type_traits>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/dispatch_types.h"
#include "kernels/sort_keys.h"

namespace minidl {
namespace gpu {
namespace {

constexpr int kSelectThreads = 256;
constexpr int kSelectItems = 16;
constexpr i64 kSelectTile = kSelectThreads * kSelectItems;
constexpr i64 kSelectMaxK = 1024;  // a tile of candidates then shrinks at least four times per level
constexpr int kRadixBins = 256;

i64 ceil_div(i64 a, i64 b) { return (a + b - 1) / b; }

struct RowStart {
  i64 n;
  __host__ __device__ i64 operator()(i64 r) const { return r * n; }
};

/// keys[j] = the order key of x[j] (complemented when flip), pos[j] = j's position in its row.
template <class T, class U>
__global__ void keys_kernel(const T* x, U* keys, int* pos, i64 total, i64 n, bool flip) {
  GRID_STRIDE(j, total) {
    keys[j] = kernels::order_key(x[j], flip);
    pos[j] = static_cast<int>(j % n);
  }
}

/// values[r, j] = x[r, pos[r, j]] and indices = pos, for rows of n inputs and k outputs.
template <class T>
__global__ void gather_kernel(const T* x, const int* pos, T* values, i64* indices, i64 rows, i64 n, i64 k,
                              i64 pos_stride) {
  GRID_STRIDE(j, rows * k) {
    const i64 r = j / k, c = j % k;
    const int p = pos[r * pos_stride + c];
    values[j] = x[r * n + p];
    indices[j] = p;
  }
}

/// (key, position) pairs of each row of n sorted by key, ascending or descending (stable either way).
template <class U>
void sort_pairs(const U* keys_in, U* keys_out, const int* pos_in, int* pos_out, i64 rows, i64 n, bool descending) {
  const i64 total = rows * n;
  std::size_t bytes = 0;
  const auto starts = thrust::make_transform_iterator(thrust::counting_iterator<i64>(0), RowStart{n});
  const auto run = [&](void* temp) {
    if (rows == 1 && descending) {
      return cub::DeviceRadixSort::SortPairsDescending(temp, bytes, keys_in, keys_out, pos_in, pos_out, total, 0,
                                                       static_cast<int>(sizeof(U) * 8), stream());
    }
    if (rows == 1) {
      return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, pos_in, pos_out, total, 0,
                                             static_cast<int>(sizeof(U) * 8), stream());
    }
    if (descending) {
      return cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, bytes, keys_in, keys_out, pos_in, pos_out, total,
                                                                rows, starts, starts + 1, 0,
                                                                static_cast<int>(sizeof(U) * 8), stream());
    }
    return cub::DeviceSegmentedRadixSort::SortPairs(temp, bytes, keys_in, keys_out, pos_in, pos_out, total, rows,
                                                    starts, starts + 1, 0, static_cast<int>(sizeof(U) * 8), stream());
  };
  MINIDL_CUDA_CHECK(run(nullptr));
  Workspace temp(bytes, "sort temporary storage");
  MINIDL_CUDA_CHECK(run(temp.get()));
}

/// The key of element i of a row of x (level 0 of the selection).
template <class T>
struct KeyAt {
  const T* x;
  bool flip;
  __host__ __device__ kernels::key_t<T> operator()(i64 i) const { return kernels::order_key(x[i], flip); }
};

/// One level of topk's selection: block b takes tile b % tiles of row b / tiles (n elements, or candidates with
/// positions, -1 for none) and writes its min(k, valid) largest keys with their positions to slots
/// [b * k, b * k + k), the unused ones with position -1.
template <class T, class U>
__global__ void __launch_bounds__(kSelectThreads)
    select_kernel(const T* x, bool flip, const U* keys_in, const int* pos_in, i64 rows, i64 n, i64 tiles, int k,
                  U* keys_out, int* pos_out) {
  using W = std::conditional_t<sizeof(U) <= 4, unsigned int, unsigned long long>;
  using LoadKeys = cub::BlockLoad<U, kSelectThreads, kSelectItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using LoadPos = cub::BlockLoad<int, kSelectThreads, kSelectItems, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Scan = cub::BlockScan<int, kSelectThreads>;
  using Reduce = cub::BlockReduce<int, kSelectThreads>;
  __shared__ union {
    typename LoadKeys::TempStorage keys;
    typename LoadPos::TempStorage pos;
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } temp;
  __shared__ int hist[kSelectThreads / kWarp][kRadixBins];
  __shared__ int chosen_digit, chosen_rank, valid_total;
  const int tid = threadIdx.x, warp = tid / kWarp;
  for (i64 b = blockIdx.x; b < rows * tiles; b += gridDim.x) {  // uniform per block: it syncs
    const i64 row = b / tiles, start = (b % tiles) * kSelectTile;
    const int len = static_cast<int>(n - start < kSelectTile ? n - start : i64{kSelectTile});
    U key[kSelectItems];
    int pos[kSelectItems];
    if (x) {
      const auto src =
          thrust::make_transform_iterator(thrust::counting_iterator<i64>(row * n + start), KeyAt<T>{x, flip});
      LoadKeys(temp.keys).Load(src, key, len, U(0));
#pragma unroll
      for (int j = 0; j < kSelectItems; ++j) {
        const int p = tid * kSelectItems + j;
        pos[j] = p < len ? static_cast<int>(start) + p : -1;
      }
    } else {
      LoadKeys(temp.keys).Load(keys_in + row * n + start, key, len, U(0));
      __syncthreads();
      LoadPos(temp.pos).Load(pos_in + row * n + start, pos, len, -1);
    }
    __syncthreads();
    int valid = 0;
#pragma unroll
    for (int j = 0; j < kSelectItems; ++j) valid += pos[j] >= 0;
    const int total = Reduce(temp.reduce).Sum(valid);
    if (tid == 0) valid_total = total;
    __syncthreads();
    const int kk = min(k, valid_total);
    // The kk-th largest key `kth`, and how many elements equal to it are taken (`ties`).
    W kth = 0, mask = 0;
    int ties = kk;
    const bool take_all = kk == valid_total;
    if (!take_all) {
      for (int shift = static_cast<int>(sizeof(U) * 8) - 8; shift >= 0; shift -= 8) {
        for (int i = tid; i < (kSelectThreads / kWarp) * kRadixBins; i += kSelectThreads) (&hist[0][0])[i] = 0;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < kSelectItems; ++j) {
          const W kw = key[j];
          if (pos[j] >= 0 && (kw & mask) == kth) atomicAdd(&hist[warp][(kw >> shift) & (kRadixBins - 1)], 1);
        }
        __syncthreads();
        const int bin = kRadixBins - 1 - tid;  // thread t counts bin 255 - t: scanning from the largest digit
        int count = 0;
        for (int w = 0; w < kSelectThreads / kWarp; ++w) count += hist[w][bin];
        int above = 0;  // elements in larger bins
        Scan(temp.scan).ExclusiveSum(count, above);
        if (above < ties && ties <= above + count) {
          chosen_digit = bin;
          chosen_rank = ties - above;
        }
        __syncthreads();
        kth |= static_cast<W>(chosen_digit) << shift;
        mask |= static_cast<W>(kRadixBins - 1) << shift;
        ties = chosen_rank;
        __syncthreads();
      }
    }
    // Offsets: elements above kth first (in position order), then the first `ties` equal to it.
    int above = 0, equal = 0;
#pragma unroll
    for (int j = 0; j < kSelectItems; ++j) {
      if (pos[j] < 0) continue;
      const W kw = key[j];
      above += take_all || kw > kth;
      equal += !take_all && kw == kth;
    }
    int packed = 0;  // both counts in one scan: each stays below 2^16
    Scan(temp.scan).ExclusiveSum((above << 16) | equal, packed);
    int next_above = packed >> 16, next_equal = packed & 0xFFFF;
    const int above_total = kk - (take_all ? 0 : ties);
    U* keys_slot = keys_out + b * k;
    int* pos_slot = pos_out + b * k;
#pragma unroll
    for (int j = 0; j < kSelectItems; ++j) {
      if (pos[j] < 0) continue;
      const W kw = key[j];
      int slot = -1;
      if (take_all || kw > kth) {
        slot = next_above++;
      } else if (kw == kth) {
        if (next_equal < ties) slot = above_total + next_equal;
        ++next_equal;
      }
      if (slot >= 0) {
        keys_slot[slot] = key[j];
        pos_slot[slot] = pos[j];
      }
    }
    for (int s = kk + tid; s < k; s += kSelectThreads) pos_slot[s] = -1;
    __syncthreads();
  }
}

template <class T>
void topk_typed(const T* x, i64 rows, i64 n, i64 k, bool largest, bool sorted, T* values, i64* indices, Device device) {
  using U = kernels::key_t<T>;
  if (k > kSelectMaxK) {  // sort whole rows, largest first for largest, and keep the first k
    Workspace keys(static_cast<std::size_t>(rows * n) * sizeof(U), "topk keys");
    Workspace sorted_keys(static_cast<std::size_t>(rows * n) * sizeof(U), "topk keys");
    Workspace pos(static_cast<std::size_t>(rows * n) * sizeof(int), "topk positions");
    Workspace sorted_pos(static_cast<std::size_t>(rows * n) * sizeof(int), "topk positions");
    keys_kernel<<<blocks_for(rows * n), kThreads, 0, stream()>>>(x, keys.as<U>(), pos.as<int>(), rows * n, n, largest);
    MINIDL_CUDA_KERNEL_CHECK();
    sort_pairs(keys.as<U>(), sorted_keys.as<U>(), pos.as<int>(), sorted_pos.as<int>(), rows, n, false);
    gather_kernel<<<blocks_for(rows * k), kThreads, 0, stream()>>>(x, sorted_pos.as<int>(), values, indices, rows, n, k,
                                                                   n);
    MINIDL_CUDA_KERNEL_CHECK();
    return;
  }
  // Level by level: (rows, n) elements, then (rows, tiles * k) candidates, until one tile per row is left.
  // Candidates live in byte tensors of the caching allocator, handed from level to level.
  const auto scratch = [&](i64 count, std::size_t size) {
    return empty({count * static_cast<i64>(size)}, TensorOptions(kUInt8).device(device));
  };
  const int kk = static_cast<int>(k);
  i64 tiles = ceil_div(n, kSelectTile);
  Tensor cand_keys = scratch(rows * tiles * k, sizeof(U)), cand_pos = scratch(rows * tiles * k, sizeof(int));
  select_kernel<T, U><<<row_blocks(rows * tiles), kSelectThreads, 0, stream()>>>(
      x, !largest, nullptr, nullptr, rows, n, tiles, kk, static_cast<U*>(cand_keys.data_ptr()),
      static_cast<int*>(cand_pos.data_ptr()));
  MINIDL_CUDA_KERNEL_CHECK();
  while (tiles > 1) {
    const i64 width = tiles * k;
    tiles = ceil_div(width, kSelectTile);
    Tensor next_keys = scratch(rows * tiles * k, sizeof(U)), next_pos = scratch(rows * tiles * k, sizeof(int));
    select_kernel<T, U><<<row_blocks(rows * tiles), kSelectThreads, 0, stream()>>>(
        nullptr, false, static_cast<const U*>(cand_keys.data_ptr()), static_cast<const int*>(cand_pos.data_ptr()), rows,
        width, tiles, kk, static_cast<U*>(next_keys.data_ptr()), static_cast<int*>(next_pos.data_ptr()));
    MINIDL_CUDA_KERNEL_CHECK();
    cand_keys = next_keys;
    cand_pos = next_pos;
  }
  const U* cur_keys = static_cast<const U*>(cand_keys.data_ptr());
  const int* cur_pos = static_cast<const int*>(cand_pos.data_ptr());
  if (sorted && k > 1) {
    Workspace sorted_keys(static_cast<std::size_t>(rows * k) * sizeof(U), "topk keys");
    Workspace sorted_pos(static_cast<std::size_t>(rows * k) * sizeof(int), "topk positions");
    sort_pairs(cur_keys, sorted_keys.as<U>(), cur_pos, sorted_pos.as<int>(), rows, k, true);
    gather_kernel<<<blocks_for(rows * k), kThreads, 0, stream()>>>(x, sorted_pos.as<int>(), values, indices, rows, n, k,
                                                                   k);
  } else {
    gather_kernel<<<blocks_for(rows * k), kThreads, 0, stream()>>>(x, cur_pos, values, indices, rows, n, k, k);
  }
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace

void sort(const Tensor& x, i64 rows, i64 n, bool descending, Tensor& values, Tensor& indices) {
  if (rows * n == 0) return;
  MINIDL_CHECK(n <= INT32_MAX, ValueError,
               "sort: rows longer than 2^31 - 1 elements are not supported on the GPU "
               "(found ",
               n, ")");
  kernels::dispatch_all(x.dtype(), "sort", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using U = kernels::key_t<T>;
    const i64 total = rows * n;
    Workspace keys(static_cast<std::size_t>(total) * sizeof(U), "sort keys");
    Workspace sorted_keys(static_cast<std::size_t>(total) * sizeof(U), "sort keys");
    Workspace pos(static_cast<std::size_t>(total) * sizeof(int), "sort positions");
    Workspace sorted_pos(static_cast<std::size_t>(total) * sizeof(int), "sort positions");
    keys_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(x.data_ptr<T>(), keys.as<U>(), pos.as<int>(), total, n,
                                                              descending);
    MINIDL_CUDA_KERNEL_CHECK();
    sort_pairs(keys.as<U>(), sorted_keys.as<U>(), pos.as<int>(), sorted_pos.as<int>(), rows, n, false);
    gather_kernel<<<blocks_for(total), kThreads, 0, stream()>>>(
        x.data_ptr<T>(), sorted_pos.as<int>(), values.data_ptr<T>(), indices.data_ptr<i64>(), rows, n, n, n);
    MINIDL_CUDA_KERNEL_CHECK();
  });
}

void topk(const Tensor& x, i64 rows, i64 n, i64 k, bool largest, bool sorted, Tensor& values, Tensor& indices) {
  if (rows * k == 0) return;
  MINIDL_CHECK(n <= INT32_MAX, ValueError,
               "topk: rows longer than 2^31 - 1 elements are not supported on the GPU "
               "(found ",
               n, ")");
  kernels::dispatch_all(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    topk_typed(x.data_ptr<T>(), rows, n, k, largest, sorted, values.data_ptr<T>(), indices.data_ptr<i64>(), x.device());
  });
}

}  // namespace gpu
}  // namespace minidl
