#pragma once
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace minidl {

enum class DType : std::uint8_t { Float32, Float64, Int64 };
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kDouble = DType::Float64;
constexpr DType kInt64 = DType::Int64;
constexpr DType kLong = DType::Int64;

constexpr std::size_t dtype_size(DType t) { return t == DType::Float32 ? 4 : 8; }
constexpr bool is_floating(DType t) { return t != DType::Int64; }
const char* dtype_name(DType t);
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::Int64; };

}  // namespace minidl
