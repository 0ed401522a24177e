#pragma once
// The upload half of the DataLoader's CUDA path: a ring of slots, each a pinned host buffer and a device buffer
// of one batch (data and target packed), filled by the loader's prefetch thread and emptied by its consumer.
//
// Ordering, per slot s (the loader guarantees that a slot is staged again only after take() of its previous
// batch returned, and that stage() of a batch returns before take() of it is called):
//   producer stage():  cudaEventSynchronize(uploaded[s])   the previous upload has finished reading pinned[s]
//                      fill pinned[s] on the host
//                      side waits for consumed[s]          the previous take's copies out of device[s] are done
//                      cudaMemcpyAsync pinned[s] -> device[s] on the side stream; record uploaded[s] on side
//   consumer take():   allocate the batch tensors (caching allocator, ordered on gpu::stream())
//                      gpu::stream() waits for uploaded[s]  (a device-side wait: no host synchronisation)
//                      copy device[s] -> the batch tensors on gpu::stream(); record consumed[s] on stream()
// Each cudaStreamWaitEvent waits for the event's most recent record, and the loader's queue (a mutex) orders
// every record before the matching wait on the other thread. The background thread never enqueues work on
// gpu::stream() nor allocates from the caching allocator, whose blocks are only stream-ordered on
// gpu::stream(); that is why batches get a device-to-device copy (a few microseconds at HBM speed) rather
// than an upload straight into tensors the consumer may free and reuse at once. It also keeps the thread
// out of any CUDA-graph capture running on gpu::stream().
//
// The header includes no CUDA header and no data-loader type (it is included by src/data/data_loader.cpp, a
// host compile unit): streams and events are held by the types cudaStream_t and cudaEvent_t point to.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "minidl/tensor.h"

struct CUstream_st;  // cudaStream_t is CUstream_st* (driver_types.h)
struct CUevent_st;   // cudaEvent_t is CUevent_st*

namespace minidl {
namespace gpu {

/// A batch as the stager hands it out: float32 data (rows, sample_shape...) and int64 target (rows).
struct StagedBatch {
  Tensor data;
  Tensor target;
};

class BatchStager {
 public:
  /// Allocates `slots` pinned and device buffers for batches of up to max_rows samples of `sample_shape`
  /// (float32 data, int64 target) on `device`. Call from the consumer thread.
  BatchStager(int device, int slots, std::int64_t max_rows, const Shape& sample_shape);
  /// Waits for the side stream, then frees everything. The producer thread must have been joined.
  ~BatchStager();
  BatchStager(const BatchStager&) = delete;
  BatchStager& operator=(const BatchStager&) = delete;

  /// Producer thread: copies `data` and `target` (CPU, float32 (rows, sample_shape...) and int64 (rows)) into
  /// slot s and queues its upload.
  void stage(int s, const Tensor& data, const Tensor& target);
  /// Consumer thread: the batch of `rows` samples staged in slot s, as new tensors on the device, ready in
  /// gpu::stream() order.
  StagedBatch take(int s, std::int64_t rows);

 private:
  /// Frees whatever has been obtained; used by the destructor and by a constructor that fails halfway.
  void release() noexcept;
  std::size_t data_bytes(std::int64_t rows) const;
  /// Where the target starts in a slot holding `rows` samples (data first, packed so one copy uploads both).
  std::size_t target_offset(std::int64_t rows) const;

  int device_;
  Shape sample_shape_;
  std::int64_t sample_numel_;
  std::size_t slot_bytes_;
  CUstream_st* side_ = nullptr;
  char* pinned_ = nullptr;
  char* device_buf_ = nullptr;
  std::vector<CUevent_st*> uploaded_, consumed_;
};

}  // namespace gpu
}  // namespace minidl
