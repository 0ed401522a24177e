#pragma once
namespace minidl {
/// Threads of the CPU backend's pool (default: the hardware's thread count, or MINIDL_NUM_THREADS).
void set_num_threads(int n);
int get_num_threads();
}  // namespace minidl
