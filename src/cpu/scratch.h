#pragma once
// Per-thread working memory for the CPU kernels: a buffer per (element type, slot) and thread that only grows,
// so steady-state training steps do not allocate. Buffers start on a cache-line boundary, so aligned vector
// loads never straddle two lines.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace minidl {
namespace cpu {

/// Buffers that can be live on one thread at the same time need different slots.
enum class Scratch {
  ConvColumns, ConvPadded, ConvWide, ConvPartials, ConvWeightT, GemmPackedA, GemmPackedB, GemmPartials,
  PoolColumns, PoolRows, PoolPositions, WinogradFilters, WinogradInputs, WinogradProducts, WinogradRows
};

template <class T, Scratch Slot>
T* scratch(std::int64_t n) {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  constexpr std::size_t kAlign = 64;
  thread_local std::unique_ptr<T[], Free> buffer;
  thread_local std::int64_t capacity = 0;
  if (capacity < n) {
    const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(T) + kAlign - 1) / kAlign * kAlign;
    buffer.reset(static_cast<T*>(std::aligned_alloc(kAlign, bytes)));
    if (!buffer) throw std::bad_alloc();
    capacity = n;
  }
  return buffer.get();
}

}  // namespace cpu
}  // namespace minidl
