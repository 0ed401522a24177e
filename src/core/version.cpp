#include "minidl/version.h"

#include "minidl/config.h"

namespace minidl {
std::string version() { return MINIDL_VERSION_STRING; }
}  // namespace minidl
