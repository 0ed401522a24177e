#pragma once
// Turns a runtime dtype into a compile-time type: dispatch<AllTypes>(dt, "op", [&](auto tag) {
// using T = typename decltype(tag)::type; ... }). A dtype outside the set is a TypeError naming the op, the
// dtypes it takes and the one it was given. The sets are spelled with MINIDL_FORALL_DTYPES's enum names.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "minidl/dtype.h"
#include "minidl/errors.h"

namespace minidl {
namespace kernels {

template <class T> struct TypeTag { using type = T; };

template <DType... Ds> struct DTypeSet {};

/// Drops the leading 0 that lets a macro list each entry with a comma before it.
template <int, DType... Ds> struct CommaList { using type = DTypeSet<Ds...>; };
#define MINIDL_DTYPE_LIST_ENTRY(T, name, str, cat, rank, file) , DType::name
/// Every dtype of MINIDL_FORALL_DTYPES.
using AllTypes = CommaList<0 MINIDL_FORALL_DTYPES(MINIDL_DTYPE_LIST_ENTRY)>::type;
#undef MINIDL_DTYPE_LIST_ENTRY
/// The kernels that exist in the two standard floating types only.
using FloatDouble = DTypeSet<DType::Float32, DType::Float64>;
/// The layer kernels with 16-bit forms too (float32 arithmetic inside): MINIDL_LAYER_KERNEL_LOWP.
using FloatingLowp = DTypeSet<DType::Float32, DType::Float64, DType::BFloat16, DType::Float16>;
/// Sums: the floating types and int64 (integral sums are taken in int64).
using SumTypes = DTypeSet<DType::Float32, DType::Float64, DType::Int64>;

template <DType... Ds, class F>
void dispatch(DTypeSet<Ds...>, DType dt, const char* op, F&& f) {
  bool done = false;
  ((!done && dt == Ds ? (f(TypeTag<typename ctype_of<Ds>::type>{}), done = true) : false), ...);
  if (done) return;
  std::string names;
  ((names += (names.empty() ? "" : ", ") + std::string(dtype_name(Ds))), ...);
  throw TypeError(detail::str(op, ": expected a tensor of dtype ", names, "; found ", dtype_name(dt)));
}

template <class F> void dispatch_all(DType dt, const char* op, F&& f) { dispatch(AllTypes{}, dt, op, f); }
/// float32 and float64: the kernels whose bfloat16 / float16 versions are still to come.
template <class F> void dispatch_floating(DType dt, const char* op, F&& f) { dispatch(FloatDouble{}, dt, op, f); }
/// float32, float64, bfloat16 and float16: the kernels that compute 16-bit data in float32.
template <class F> void dispatch_floating_lowp(DType dt, const char* op, F&& f) { dispatch(FloatingLowp{}, dt, op, f); }

/// f(TypeTag<E>) with E the unsigned integer type of `bytes` bytes (1, 2, 4 or 8), or Pack16 for 16 (a backend's
/// 16-byte vector, uint4 on the GPU; void: none). The kernels that only move elements (gathers, plain scatters)
/// dispatch on the element size, not the dtype: bytes are bytes.
template <class Pack16 = void, class F> void dispatch_bytes(std::size_t bytes, const char* op, F&& f) {
  switch (bytes) {
    case 1:
      return f(TypeTag<std::uint8_t>{});
    case 2:
      return f(TypeTag<std::uint16_t>{});
    case 4:
      return f(TypeTag<std::uint32_t>{});
    case 8:
      return f(TypeTag<std::uint64_t>{});
    default:
      break;
  }
  if constexpr (!std::is_void_v<Pack16>) {
    if (bytes == sizeof(Pack16)) return f(TypeTag<Pack16>{});
  }
  throw TypeError(detail::str(op, ": no kernel moves elements of ", bytes, " bytes"));
}

/// An elementwise kernel's types: body(tag S, tag O) for the stored input type S and the output type O, which is
/// S itself or bool (comparisons and logical ops).
template <class F> void dispatch_in_out(DType in, DType out, const char* op, F&& body) {
  dispatch_all(in, op, [&](auto stag) {
    using S = typename decltype(stag)::type;
    if (out == in) return body(stag, stag);
    if (out != DType::Bool) {
      throw TypeError(detail::str(op, ": output dtype ", dtype_name(out), " for inputs of ", dtype_name(in)));
    }
    if constexpr (!std::is_same_v<S, bool>) body(stag, TypeTag<bool>{});
  });
}

}  // namespace kernels
}  // namespace minidl
