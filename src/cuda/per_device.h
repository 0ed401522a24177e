#pragma once
// A value made once per device on its first use there (a kernel's launch limits, a library handle), kept for the
// life of the process.
#include <map>
#include <mutex>

#include "cuda/context.h"

namespace minidl {
namespace gpu {

template <class T>
class PerDevice {
 public:
  /// The current device's value; on the first call for that device `make(device)` builds it, under the lock, so
  /// it runs once per device even when threads race.
  template <class Make>
  const T& get(Make make) {
    const int device = current_device();
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = values_.find(device);
    if (it == values_.end()) it = values_.emplace(device, make(device)).first;
    return it->second;
  }

 private:
  std::mutex mutex_;
  std::map<int, T> values_;
};

}  // namespace gpu
}  // namespace minidl
