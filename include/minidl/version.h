#pragma once
#include <string>

namespace minidl {
/// The library's version, "major.minor.patch" (MINIDL_VERSION_STRING of the build that is linked, which may
/// differ from the header a program was compiled with).
std::string version();
}  // namespace minidl
