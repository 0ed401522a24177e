#pragma once
// LibTorch's enum values (torch/enum.h): each name is a type of its own in minidl::enumtype and a constant of that
// type in minidl (`minidl::kReflect`), so an option takes a std::variant of exactly the values it accepts and a
// wrong one fails to compile. get_enum_name gives the name as LibTorch prints it ("kReflect").
#include <string>
#include <variant>

#define MINIDL_ENUM_DECLARE(name)                                      \
  namespace enumtype {                                                 \
  struct k##name {                                                     \
    static constexpr const char* enum_name() { return "k" #name; }     \
  };                                                                   \
  }                                                                    \
  inline constexpr enumtype::k##name k##name {}

namespace minidl {
MINIDL_ENUM_DECLARE(Zeros);
MINIDL_ENUM_DECLARE(Constant);
MINIDL_ENUM_DECLARE(Reflect);
MINIDL_ENUM_DECLARE(Replicate);
MINIDL_ENUM_DECLARE(Circular);
MINIDL_ENUM_DECLARE(Nearest);
MINIDL_ENUM_DECLARE(Linear);
MINIDL_ENUM_DECLARE(Bilinear);
MINIDL_ENUM_DECLARE(Tanh);
MINIDL_ENUM_DECLARE(ReLU);

namespace enumtype {
/// "kReflect" for a variant holding kReflect.
template <class... Ts>
std::string get_enum_name(const std::variant<Ts...>& v) {
  return std::visit([](const auto& e) { return std::string(e.enum_name()); }, v);
}
}  // namespace enumtype
}  // namespace minidl
