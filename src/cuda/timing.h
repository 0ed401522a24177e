#pragma once
// Timing of candidate kernels (convolution and matmul algorithms) on the library's stream.
#include <functional>

namespace minidl {
namespace gpu {

/// Milliseconds per run of `launch`: the mean of `runs` runs on stream(), queued behind a kernel that holds the
/// stream while the host queues them. Kernels of a few microseconds are about as long as the host takes to queue
/// one, so without the hold the events would measure the host's launch rate. Synchronises with the stream; the
/// caller does any warm-up run.
float time_on_stream(const std::function<void()>& launch, int runs);

}  // namespace gpu
}  // namespace minidl
