#pragma once
// The element types. MINIDL_FORALL_DTYPES is the one list: the enum, names, sizes, categories, dtype_of<T> and
// the kernels' dispatch (src/kernels/dispatch_types.h) are all generated from it, so adding a dtype edits it
// alone (plus, for a new category, the promotion rules in result_type).
#include <cstddef>
#include <cstdint>
#include <ostream>

#include "minidl/float16.h"

namespace minidl {

// _(C++ type, enum name, printed name (PyTorch's), category, promotion rank, safetensors name). The rank orders
// dtypes for promote_types: across categories bool < integral < floating, and within one the wider type ranks
// higher (bfloat16 and float16 share a rank: together they promote to float32).
#define MINIDL_FORALL_DTYPES(_)                                  \
  _(float, Float32, "float32", Floating, 5, "F32")               \
  _(double, Float64, "float64", Floating, 6, "F64")              \
  _(::minidl::BFloat16, BFloat16, "bfloat16", Floating, 4, "BF16") \
  _(::minidl::Half, Float16, "float16", Floating, 4, "F16")      \
  _(std::int64_t, Int64, "int64", Integral, 3, "I64")            \
  _(std::int32_t, Int32, "int32", Integral, 2, "I32")            \
  _(std::uint8_t, UInt8, "uint8", Integral, 1, "U8")             \
  _(bool, Bool, "bool", Boolean, 0, "BOOL")

enum class DType : std::uint8_t {
#define MINIDL_DTYPE_ENUM(T, name, str, cat, rank, file) name,
  MINIDL_FORALL_DTYPES(MINIDL_DTYPE_ENUM)
#undef MINIDL_DTYPE_ENUM
};
/// LibTorch's name for the same enum.
using ScalarType = DType;

// LibTorch's constants (each dtype under its width name and its C name).
constexpr DType kFloat32 = DType::Float32, kFloat = DType::Float32;
constexpr DType kFloat64 = DType::Float64, kDouble = DType::Float64;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat16 = DType::Float16, kHalf = DType::Float16;
constexpr DType kInt64 = DType::Int64, kLong = DType::Int64;
constexpr DType kInt32 = DType::Int32, kInt = DType::Int32;
constexpr DType kUInt8 = DType::UInt8, kByte = DType::UInt8;
constexpr DType kBool = DType::Bool;

/// Type promotion's categories, in promotion order: bool < integral < floating.
enum class DTypeCategory : std::uint8_t { Boolean, Integral, Floating };

constexpr std::size_t element_size(DType t) {
  switch (t) {
#define MINIDL_DTYPE_SIZE(T, name, str, cat, rank, file) \
  case DType::name: return sizeof(T);
    MINIDL_FORALL_DTYPES(MINIDL_DTYPE_SIZE)
#undef MINIDL_DTYPE_SIZE
  }
  return 0;
}

constexpr DTypeCategory category(DType t) {
  switch (t) {
#define MINIDL_DTYPE_CATEGORY(T, name, str, cat, rank, file) \
  case DType::name: return DTypeCategory::cat;
    MINIDL_FORALL_DTYPES(MINIDL_DTYPE_CATEGORY)
#undef MINIDL_DTYPE_CATEGORY
  }
  return DTypeCategory::Boolean;
}

constexpr bool is_floating_point(DType t) { return category(t) == DTypeCategory::Floating; }
/// LibTorch's isIntegralType: int64, int32, uint8, and bool when include_bool.
constexpr bool is_integral(DType t, bool include_bool) {
  return category(t) == DTypeCategory::Integral || (include_bool && t == DType::Bool);
}
/// bfloat16 and float16: stored in 16 bits, computed in float32.
constexpr bool is_reduced_floating_point(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

const char* dtype_name(DType t);
/// The dtype's name in safetensors files ("F32", "BF16", "BOOL", ...).
const char* safetensors_name(DType t);
/// The dtype's rank in type promotion (MINIDL_FORALL_DTYPES).
constexpr int promotion_rank(DType t) {
  switch (t) {
#define MINIDL_DTYPE_RANK(T, name, str, cat, rank, file) \
  case DType::name: return rank;
    MINIDL_FORALL_DTYPES(MINIDL_DTYPE_RANK)
#undef MINIDL_DTYPE_RANK
  }
  return 0;
}
/// The smallest dtype both a and b convert to without leaving their categories (PyTorch's promote_types):
/// bool < uint8 < int32 < int64 < the floating types; bfloat16 with float16 gives float32.
DType promote_types(DType a, DType b);
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

/// The dtype of a C++ element type: dtype_of<float>::value == kFloat32.
template <class T> struct dtype_of;
#define MINIDL_DTYPE_OF(T, name, str, cat, rank, file) \
  template <> struct dtype_of<T> { static constexpr DType value = DType::name; };
MINIDL_FORALL_DTYPES(MINIDL_DTYPE_OF)
#undef MINIDL_DTYPE_OF

/// The C++ element type of a dtype: ctype_of<kFloat32>::type is float.
template <DType D> struct ctype_of;
#define MINIDL_CTYPE_OF(T, name, str, cat, rank, file) \
  template <> struct ctype_of<DType::name> { using type = T; };
MINIDL_FORALL_DTYPES(MINIDL_CTYPE_OF)
#undef MINIDL_CTYPE_OF

}  // namespace minidl
