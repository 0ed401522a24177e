#include "minidl/distributed/env.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "minidl/errors.h"

namespace minidl {
namespace distributed {

namespace {

constexpr const char* kHint =
    " (set by `minidl run` or torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)";

int int_var(const std::function<const char*(const char*)>& lookup, const char* name, long lo, long hi) {
  const char* v = lookup(name);
  MINIDL_CHECK(v != nullptr, ValueError, "distributed: environment variable ", name, " is not set", kHint);
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  MINIDL_CHECK(*v != '\0' && *end == '\0' && errno == 0, ValueError, "distributed: environment variable ", name,
               " must be an integer, found \"", v, "\"");
  MINIDL_CHECK(x >= lo && x <= hi, ValueError, "distributed: environment variable ", name, " must be in [", lo, ", ",
               hi, "], found ", x);
  return static_cast<int>(x);
}

}  // namespace

bool launched_as_rank() { return std::getenv("RANK") != nullptr; }

DistributedEnv parse_env(const std::function<const char*(const char*)>& lookup) {
  constexpr long kMax = std::numeric_limits<int>::max();
  DistributedEnv e;
  e.world_size = int_var(lookup, "WORLD_SIZE", 1, kMax);
  e.rank = int_var(lookup, "RANK", 0, kMax);
  MINIDL_CHECK(e.rank < e.world_size, ValueError, "distributed: RANK must be below WORLD_SIZE (", e.world_size,
               "), found ", e.rank);
  e.local_rank = int_var(lookup, "LOCAL_RANK", 0, kMax);
  const char* addr = lookup("MASTER_ADDR");
  MINIDL_CHECK(addr != nullptr && *addr != '\0', ValueError, "distributed: environment variable MASTER_ADDR is ",
               addr ? "empty" : "not set", kHint);
  e.master_addr = addr;
  e.master_port = int_var(lookup, "MASTER_PORT", 1, 65535);
  return e;
}

DistributedEnv env_from_environment() {
  return parse_env([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace distributed
}  // namespace minidl
