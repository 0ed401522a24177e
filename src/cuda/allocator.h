#pragma once
// Caching device allocator. Freed blocks go to a per-device cache keyed by size and are handed out again
// without cudaMalloc; since all of the library's work is ordered on one stream per device, a block freed by
// the host may be reused at once. While a private pool is active (CUDA-graph capture), blocks come from and
// return to that pool only, so memory a captured graph uses is never given to anyone else.
#include <cstddef>

namespace minidl {
namespace gpu {

/// Routes allocations on the current device to pool `id` (> 0) until end_private_pool().
void begin_private_pool(int id);
void end_private_pool();
/// Returns the cached blocks of pool `id` to the general cache (after its graph was destroyed).
void release_private_pool(int id);

}  // namespace gpu
}  // namespace minidl
