#include "cuda/batch_stager.h"

#include <cuda_runtime.h>

#include <cstring>

#include "cuda/context.h"

namespace minidl {
namespace gpu {

namespace {
constexpr std::size_t kAlign = 256;  // keeps every slot and every target region aligned for the copy engines
std::size_t round_up(std::size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

BatchStager::BatchStager(int device, int slots, std::int64_t max_rows, const Shape& sample_shape)
    : device_(device), sample_shape_(sample_shape), sample_numel_(shape_numel(sample_shape)) {
  MINIDL_CHECK(slots >= 1 && max_rows >= 1, ValueError, "BatchStager: expected slots >= 1 and max_rows >= 1, found ",
               slots, " and ", max_rows);
  slot_bytes_ = round_up(target_offset(max_rows) + static_cast<std::size_t>(max_rows) * sizeof(std::int64_t));
  DeviceGuard guard(device_);
  try {
    MINIDL_CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
    const std::size_t total = slot_bytes_ * static_cast<std::size_t>(slots);
    MINIDL_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned_), total, cudaHostAllocDefault));
    device_buf_ = static_cast<char*>(device_alloc(total));
    for (int s = 0; s < slots; ++s) {
      for (auto* events : {&uploaded_, &consumed_}) {
        cudaEvent_t e = nullptr;
        MINIDL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        events->push_back(e);
      }
    }
  } catch (...) {
    release();  // what was obtained before the failure
    throw;
  }
}

BatchStager::~BatchStager() { release(); }

void BatchStager::release() noexcept {
  // No exceptions from here: failures at teardown leave nothing for a caller to act on.
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                        cudaSetDevice(device_) == cudaSuccess;
  if (side_) (void)cudaStreamSynchronize(side_);  // no upload may still be writing device_buf_ or reading pinned_
  for (cudaEvent_t e : uploaded_) (void)cudaEventDestroy(e);
  for (cudaEvent_t e : consumed_) (void)cudaEventDestroy(e);
  uploaded_.clear();
  consumed_.clear();
  // The copies out of device_buf_ were queued on gpu::stream(), the order the caching allocator reuses in.
  if (device_buf_) {
    try {
      device_free(device_buf_);
    } catch (const Error&) {  // current_device() failing: the context is gone, and the memory with it
    }
  }
  if (pinned_) (void)cudaFreeHost(pinned_);
  if (side_) (void)cudaStreamDestroy(side_);
  device_buf_ = nullptr;
  pinned_ = nullptr;
  side_ = nullptr;
  if (switched) (void)cudaSetDevice(previous);
}

std::size_t BatchStager::data_bytes(std::int64_t rows) const {
  return static_cast<std::size_t>(rows * sample_numel_) * sizeof(float);
}

std::size_t BatchStager::target_offset(std::int64_t rows) const { return round_up(data_bytes(rows)); }

void BatchStager::stage(int s, const Tensor& data, const Tensor& target) {
  const std::int64_t rows = target.numel();
  const std::size_t off = slot_bytes_ * static_cast<std::size_t>(s);
  DeviceGuard guard(device_);
  const auto slot = static_cast<std::size_t>(s);
  MINIDL_CUDA_CHECK(cudaEventSynchronize(uploaded_[slot]));
  std::memcpy(pinned_ + off, data.data_ptr(), data_bytes(rows));
  std::memcpy(pinned_ + off + target_offset(rows), target.data_ptr(),
              static_cast<std::size_t>(rows) * sizeof(std::int64_t));
  MINIDL_CUDA_CHECK(cudaStreamWaitEvent(side_, consumed_[slot], 0));
  MINIDL_CUDA_CHECK(cudaMemcpyAsync(device_buf_ + off, pinned_ + off,
                                    target_offset(rows) + static_cast<std::size_t>(rows) * sizeof(std::int64_t),
                                    cudaMemcpyHostToDevice, side_));
  MINIDL_CUDA_CHECK(cudaEventRecord(uploaded_[slot], side_));
}

StagedBatch BatchStager::take(int s, std::int64_t rows) {
  const Device dev(kCUDA, device_);
  Shape data_shape{rows};
  data_shape.insert(data_shape.end(), sample_shape_.begin(), sample_shape_.end());
  StagedBatch b{empty(data_shape, TensorOptions(kFloat32).device(dev)), empty({rows}, TensorOptions(kInt64).device(dev))};
  const std::size_t off = slot_bytes_ * static_cast<std::size_t>(s);
  const auto slot = static_cast<std::size_t>(s);
  DeviceGuard guard(device_);
  MINIDL_CUDA_CHECK(cudaStreamWaitEvent(stream(), uploaded_[slot], 0));
  MINIDL_CUDA_CHECK(cudaMemcpyAsync(b.data.data_ptr(), device_buf_ + off, data_bytes(rows), cudaMemcpyDeviceToDevice,
                                    stream()));
  MINIDL_CUDA_CHECK(cudaMemcpyAsync(b.target.data_ptr(), device_buf_ + off + target_offset(rows),
                                    static_cast<std::size_t>(rows) * sizeof(std::int64_t), cudaMemcpyDeviceToDevice,
                                    stream()));
  MINIDL_CUDA_CHECK(cudaEventRecord(consumed_[slot], stream()));
  return b;
}

}  // namespace gpu
}  // namespace minidl
