// Global numeric settings shared by both backends.
#include <atomic>

#include "core/env_switch.h"
#include "minidl/cuda.h"

namespace minidl {
namespace {
std::atomic<bool> g_tf32_conv{true};     // PyTorch's defaults: cuDNN may use TF32, cuBLAS matmuls may not
std::atomic<bool> g_tf32_matmul{false};
std::atomic<bool> g_deterministic{false};
// On unless the environment says MINIDL_CUDNN_BENCHMARK=0 (scripts/cuda-sanitize.sh does, see cuda.h).
std::atomic<bool> g_cudnn_benchmark{env_switch("MINIDL_CUDNN_BENCHMARK", true)};
}  // namespace

namespace cuda {
void set_allow_tf32(bool conv, bool matmul) {
  g_tf32_conv = conv;
  g_tf32_matmul = matmul;
}
bool allow_tf32_conv() { return g_tf32_conv; }
bool allow_tf32_matmul() { return g_tf32_matmul; }
void set_cudnn_benchmark(bool enabled) { g_cudnn_benchmark = enabled; }
bool cudnn_benchmark() { return g_cudnn_benchmark; }
}  // namespace cuda

void set_deterministic(bool enabled) { g_deterministic = enabled; }
bool deterministic() { return g_deterministic; }

}  // namespace minidl
