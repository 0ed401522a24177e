// CUDA cat (see kernels/backend.h). Element types do not matter to a copy, so every input is moved as words of the
// widest access (16, 8, 4, 2 or 1 bytes) that its row length and stride, its column in out's rows and both
// addresses allow; the inputs of one width go in batches of up to kCatBatch per launch. A block copies
// kCatBlockWords consecutive words of one input: the blocks are numbered across the batch's inputs in proportion to
// their sizes, so one large input and many small ones keep the device equally busy, and a thread loads all its
// words before it stores any. Narrow rows go output word by output word instead (cat_narrow_kernel). On
// gpu::stream(), without synchronising.
#include <algorithm>
#include <limits>

#include "cuda/launch.cuh"
#include "kernels/backend.h"
#include "kernels/joining.h"

namespace minidl {
namespace gpu {
namespace {

constexpr int kCatThreads = 256;
constexpr int kCatUnroll = 4;
constexpr i64 kCatBlockWords = kCatThreads * kCatUnroll;
constexpr int kCatBatch = 48;
constexpr i64 kNarrowRow = 1024;

/// One launch's inputs, in words: input k fills columns [col0, col0 + cols) of out's rows, `words` = rows * cols
/// of them, from block first_block[k] on; its rows start `pitch` words apart. row_step / col_step: how far
/// kCatThreads words move in rows and columns.
struct CatBatch {
  int count = 0;
  const void* src[kCatBatch];
  i64 cols[kCatBatch], pitch[kCatBatch], col0[kCatBatch], words[kCatBatch], first_block[kCatBatch];
  i64 row_step[kCatBatch], col_step[kCatBatch];
};
static_assert(sizeof(CatBatch) <= 4096, "cat kernel arguments exceed 4 KiB");

__device__ __forceinline__ i64 divide(i64 a, i64 b) {
  constexpr i64 k32 = std::numeric_limits<unsigned int>::max();
  return a <= k32 && b <= k32 ? static_cast<i64>(static_cast<unsigned int>(a) / static_cast<unsigned int>(b)) : a / b;
}

template <class Word>
__global__ void __launch_bounds__(kCatThreads) cat_kernel(Word* dst, i64 dst_cols, const __grid_constant__ CatBatch b) {
  const i64 block = blockIdx.x;
  int k = 0;  // the input this block copies: the last whose first block is at most this one
  for (int hi = b.count - 1; k < hi;) {
    const int mid = (k + hi + 1) / 2;
    if (b.first_block[mid] <= block) {
      k = mid;
    } else {
      hi = mid - 1;
    }
  }
  const Word* src = static_cast<const Word*>(b.src[k]);
  const i64 cols = b.cols[k], words = b.words[k];
  const i64 begin = (block - b.first_block[k]) * kCatBlockWords + threadIdx.x;
  i64 row[kCatUnroll], col[kCatUnroll];
  row[0] = divide(begin, cols);
  col[0] = begin - row[0] * cols;
#pragma unroll
  for (int u = 1; u < kCatUnroll; ++u) {
    row[u] = row[u - 1] + b.row_step[k];
    col[u] = col[u - 1] + b.col_step[k];
    if (col[u] >= cols) {
      col[u] -= cols;
      ++row[u];
    }
  }
  const i64 pitch = b.pitch[k];
  Word v[kCatUnroll];
#pragma unroll
  for (int u = 0; u < kCatUnroll; ++u) {
    if (begin + u * kCatThreads < words) v[u] = src[row[u] * pitch + col[u]];
  }
  Word* out = dst + b.col0[k];
#pragma unroll
  for (int u = 0; u < kCatUnroll; ++u) {
    if (begin + u * kCatThreads < words) out[row[u] * dst_cols + col[u]] = v[u];
  }
}

/// Rows of at most kNarrowRow bytes are copied output word by output word instead: input-major copies of blocks
/// narrower than a cache line would write every line of out once per input, each time in part. Thread t of a
/// block writes words begin + u * kCatThreads of out, each from the input whose columns hold it (or none: the
/// columns of inputs the copy kernel wrote).
template <class Word>
__global__ void __launch_bounds__(kCatThreads)
    cat_narrow_kernel(Word* dst, i64 dst_cols, i64 total, i64 row_step, i64 col_step,
                      const __grid_constant__ CatBatch b) {
  const i64 begin = blockIdx.x * kCatBlockWords + threadIdx.x;
  i64 row = divide(begin, dst_cols), col = begin - row * dst_cols;
  Word v[kCatUnroll];
  bool mine[kCatUnroll];
#pragma unroll
  for (int u = 0; u < kCatUnroll; ++u) {
    int k = 0;  // the last input whose columns start at or before col
    for (int hi = b.count - 1; k < hi;) {
      const int mid = (k + hi + 1) / 2;
      if (b.col0[mid] <= col) {
        k = mid;
      } else {
        hi = mid - 1;
      }
    }
    const i64 c = col - b.col0[k];
    mine[u] = begin + u * kCatThreads < total && c >= 0 && c < b.cols[k];
    if (mine[u]) v[u] = static_cast<const Word*>(b.src[k])[row * b.pitch[k] + c];
    row += row_step;
    col += col_step;
    if (col >= dst_cols) {
      col -= dst_cols;
      ++row;
    }
  }
#pragma unroll
  for (int u = 0; u < kCatUnroll; ++u) {
    if (mine[u]) dst[begin + u * kCatThreads] = v[u];
  }
}

/// The widest access (a power of two up to 16 bytes) that divides every value.
template <class... V>
int access_width(V... values) {
  int w = 16;
  while (((static_cast<std::uint64_t>(values) % static_cast<std::uint64_t>(w) != 0) || ...)) w /= 2;
  return w;
}

struct Piece {
  const char* src;
  i64 width, pitch, col0;  // bytes
};

/// pieces[first, first + count) as words of W bytes; with `blocks`, the block each starts at (input-major).
template <int W>
CatBatch batch_of(const std::vector<Piece>& pieces, std::size_t first, std::size_t count, i64 rows, i64& blocks) {
  CatBatch b;
  blocks = 0;
  for (std::size_t p = first; p < first + count; ++p) {
    const int k = b.count++;
    b.src[k] = pieces[p].src;
    b.cols[k] = pieces[p].width / W;
    b.pitch[k] = pieces[p].pitch / W;
    b.col0[k] = pieces[p].col0 / W;
    b.words[k] = rows * b.cols[k];
    b.row_step[k] = kCatThreads / b.cols[k];
    b.col_step[k] = kCatThreads % b.cols[k];
    b.first_block[k] = blocks;
    blocks += (b.words[k] + kCatBlockWords - 1) / kCatBlockWords;
  }
  MINIDL_CHECK(blocks <= std::numeric_limits<int>::max(), ValueError, "cat: ", blocks,
               " blocks of work exceed one launch's grid");
  return b;
}

template <int W>
void launch_width(const std::vector<Piece>& pieces, char* dst, i64 rows, i64 row_bytes) {
  using Word = typename AccessWord<W>::type;
  for (std::size_t first = 0; first < pieces.size(); first += kCatBatch) {
    i64 blocks = 0;
    const std::size_t count = std::min<std::size_t>(kCatBatch, pieces.size() - first);
    const CatBatch b = batch_of<W>(pieces, first, count, rows, blocks);
    cat_kernel<Word><<<static_cast<unsigned int>(blocks), kCatThreads, 0, stream()>>>(reinterpret_cast<Word*>(dst),
                                                                                      row_bytes / W, b);
    MINIDL_CUDA_KERNEL_CHECK();
  }
}

template <int W>
void launch_narrow(const std::vector<Piece>& pieces, char* dst, i64 rows, i64 row_bytes) {
  using Word = typename AccessWord<W>::type;
  i64 unused = 0;
  const CatBatch b = batch_of<W>(pieces, 0, pieces.size(), rows, unused);
  const i64 cols = row_bytes / W, total = rows * cols, blocks = (total + kCatBlockWords - 1) / kCatBlockWords;
  MINIDL_CHECK(blocks <= std::numeric_limits<int>::max(), ValueError, "cat: ", blocks,
               " blocks of work exceed one launch's grid");
  cat_narrow_kernel<Word><<<static_cast<unsigned int>(blocks), kCatThreads, 0, stream()>>>(
      reinterpret_cast<Word*>(dst), cols, total, kCatThreads / cols, kCatThreads % cols, b);
  MINIDL_CUDA_KERNEL_CHECK();
}

}  // namespace

void cat(const std::vector<Tensor>& inputs, const std::vector<std::int64_t>& starts, std::int64_t dim, Tensor& out) {
  const auto d = static_cast<std::size_t>(dim);
  const Shape& shape = out.sizes();
  i64 rows = 1, inner = static_cast<i64>(out.element_size());
  for (std::size_t i = 0; i < d; ++i) rows *= shape[i];
  for (std::size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
  const i64 row_bytes = shape[d] * inner;
  if (rows == 0 || row_bytes == 0) return;
  auto* dst = static_cast<char*>(out.data_ptr());
  const int out_width = access_width(row_bytes, reinterpret_cast<std::uintptr_t>(dst));
  std::vector<Piece> pieces;
  std::vector<Piece> by_width[5];  // 1, 2, 4, 8, 16 bytes
  int narrow_width = out_width;
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const Piece p{static_cast<const char*>(inputs[k].data_ptr()), inputs[k].size(dim) * inner,
                  kernels::cat_row_stride(inputs[k], dim) * static_cast<i64>(out.element_size()), starts[k] * inner};
    if (p.width == 0) continue;
    const int w = std::min(out_width, access_width(p.width, p.pitch, p.col0, reinterpret_cast<std::uintptr_t>(p.src)));
    narrow_width = std::min(narrow_width, w);
    pieces.push_back(p);
    by_width[__builtin_ctz(static_cast<unsigned int>(w))].push_back(p);
  }
  if (row_bytes <= kNarrowRow && pieces.size() <= static_cast<std::size_t>(kCatBatch)) {
    switch (narrow_width) {
      case 1: return launch_narrow<1>(pieces, dst, rows, row_bytes);
      case 2: return launch_narrow<2>(pieces, dst, rows, row_bytes);
      case 4: return launch_narrow<4>(pieces, dst, rows, row_bytes);
      case 8: return launch_narrow<8>(pieces, dst, rows, row_bytes);
      default: return launch_narrow<16>(pieces, dst, rows, row_bytes);
    }
  }
  launch_width<1>(by_width[0], dst, rows, row_bytes);
  launch_width<2>(by_width[1], dst, rows, row_bytes);
  launch_width<4>(by_width[2], dst, rows, row_bytes);
  launch_width<8>(by_width[3], dst, rows, row_bytes);
  launch_width<16>(by_width[4], dst, rows, row_bytes);
}

}  // namespace gpu
}  // namespace minidl
