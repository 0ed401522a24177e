// ProcessGroupNCCL: NCCL collectives on a communication stream forked from and joined to the library's stream
// with events (both capture-safe), the rendezvous through TCPStore, and the watchdog that ends this process
// when another rank dies instead of letting it hang in a collective.
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "core/tensor_impl.h"
#include "cuda/context.h"
#include "minidl/distributed/process_group.h"
#include "minidl/distributed/store.h"

namespace minidl {
namespace distributed {

namespace {

[[noreturn]] void throw_nccl_error(ncclResult_t r, ncclComm_t comm, const char* call) {
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  throw CudaError(detail::str("NCCL error ", ncclGetErrorString(r), " in ", call,
                              last && *last ? std::string(": ") + last : std::string(),
                              " (NCCL_DEBUG=WARN shows more)"));
}

#define MINIDL_NCCL_CHECK(call, comm)                               \
  do {                                                              \
    ncclResult_t r_ = (call);                                       \
    if (r_ != ncclSuccess) throw_nccl_error(r_, (comm), #call);     \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case kFloat32: return ncclFloat32;
    case kFloat64: return ncclFloat64;
    case kBFloat16: return ncclBfloat16;
    case kFloat16: return ncclFloat16;
    case kInt64: return ncclInt64;
    case kInt32: return ncclInt32;
    case kUInt8: return ncclUint8;
    case kBool: break;  // a sum of bools is not a bool: the caller converts first
  }
  throw TypeError(detail::str("ProcessGroupNCCL: unsupported dtype ", t));
}

}  // namespace

struct ProcessGroupNCCL::Impl {
  DistributedEnv env;
  ProcessGroupOptions options;
  int device = 0;
  std::unique_ptr<TCPStore> store;        // rendezvous and barriers (runs the server on rank 0)
  std::unique_ptr<TCPStore> watch_store;  // the watchdog's own connection, so its checks never wait behind a get
  ncclComm_t comm = nullptr;
  cudaStream_t comm_stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  bool pending = false;
  std::thread watchdog;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::atomic<ncclComm_t> watched_comm{nullptr};

  void check_tensors(const std::vector<Tensor>& tensors, const char* op) const {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      MINIDL_CHECK(t.defined(), ValueError, "ProcessGroupNCCL::", op, ": tensor ", i, " is undefined");
      MINIDL_CHECK(t.device() == Device(kCUDA, device), ValueError, "ProcessGroupNCCL::", op, ": tensor ", i,
                   " is on ", t.device(), ", expected this rank's device cuda:", device);
      MINIDL_CHECK(t.is_contiguous(), ValueError, "ProcessGroupNCCL::", op, ": tensor ", i, " of shape ",
                   shape_str(t.sizes()), " is a strided view (strides ", shape_str(t.strides()), "); collectives "
                   "move contiguous memory, pass t.contiguous()");
    }
  }

  // Fork: the communication stream starts after everything queued on the library's stream so far.
  void fork_comm_stream() {
    MINIDL_CUDA_CHECK(cudaEventRecord(fork, gpu::stream()));
    MINIDL_CUDA_CHECK(cudaStreamWaitEvent(comm_stream, fork, 0));
  }

  void run_watchdog() {
    std::unique_lock<std::mutex> lock(mu);
    while (!cv.wait_for(lock, options.watchdog_interval, [&] { return stop; })) {
      lock.unlock();
      std::string failure;
      try {
        const int dead = watch_store->dead_rank();
        if (dead >= 0) failure = "rank " + std::to_string(dead) + " died (its process ended without leaving the job)";
      } catch (const std::exception& e) {
        failure = "rank 0 died (" + std::string(e.what()) + ")";
      }
      if (ncclComm_t c = watched_comm.load(); failure.empty() && c) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(c, &async) == ncclSuccess && async != ncclSuccess && async != ncclInProgress) {
          failure = std::string("NCCL reported ") + ncclGetErrorString(async) + ": " + ncclGetLastError(c);
        }
      }
      if (!failure.empty()) fail(failure);
      lock.lock();
    }
  }

  // A collective with a dead peer never finishes and cannot be cancelled from here, so this rank ends itself:
  // the message names the failed rank, the communicator is aborted (bounded, in case abort blocks too).
  [[noreturn]] void fail(const std::string& why) {
    std::fprintf(stderr, "minidl distributed: rank %d of %d: %s; aborting this rank\n", env.rank, env.world_size,
                 why.c_str());
    std::fflush(stderr);
    if (ncclComm_t c = watched_comm.exchange(nullptr)) {
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::thread([c, done] {
        (void)ncclCommAbort(c);
        *done = true;
      }).detach();
      for (int i = 0; i < 50 && !*done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    std::_Exit(1);
  }
};

ProcessGroupNCCL::ProcessGroupNCCL(const DistributedEnv& env, ProcessGroupOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.env = env;
  s.options = options;
  int count = 0;
  MINIDL_CUDA_CHECK(cudaGetDeviceCount(&count));
  MINIDL_CHECK(env.local_rank < count, ValueError, "ProcessGroupNCCL: LOCAL_RANK ", env.local_rank,
               " names no GPU: this process sees ", count, " (CUDA_VISIBLE_DEVICES=",
               std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "unset",
               "); start at most that many ranks per machine");
  s.device = env.local_rank;
  MINIDL_CUDA_CHECK(cudaSetDevice(s.device));  // this thread's device: the library's stream and handles follow it

  TCPStoreOptions so;
  so.host = env.master_addr;
  so.port = env.master_port;
  so.is_server = env.rank == 0;
  so.rank = env.rank;
  so.world_size = env.world_size;
  so.timeout = options.timeout;
  s.store = std::make_unique<TCPStore>(so);
  so.is_server = false;
  s.watch_store = std::make_unique<TCPStore>(so);
  // Watch from here on: a rank dying during NCCL's own initialisation would otherwise hang it.
  s.watchdog = std::thread([&s] { s.run_watchdog(); });

  try {
    ncclUniqueId id;
    if (env.rank == 0) {
      MINIDL_NCCL_CHECK(ncclGetUniqueId(&id), nullptr);
      s.store->set("minidl/nccl_id", std::vector<std::uint8_t>(reinterpret_cast<std::uint8_t*>(&id),
                                                               reinterpret_cast<std::uint8_t*>(&id) + sizeof id));
    }
    const std::vector<std::uint8_t> blob = s.store->get("minidl/nccl_id");
    MINIDL_CHECK(blob.size() == sizeof id, IOError, "ProcessGroupNCCL: the NCCL id from the store has ", blob.size(),
                 " bytes, expected ", sizeof id);
    std::memcpy(&id, blob.data(), sizeof id);
    MINIDL_NCCL_CHECK(ncclCommInitRank(&s.comm, env.world_size, id, env.rank), nullptr);
    s.watched_comm = s.comm;
    MINIDL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.comm_stream, cudaStreamNonBlocking));
    MINIDL_CUDA_CHECK(cudaEventCreateWithFlags(&s.fork, cudaEventDisableTiming));
    MINIDL_CUDA_CHECK(cudaEventCreateWithFlags(&s.join, cudaEventDisableTiming));
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stop = true;
    }
    s.cv.notify_all();
    s.watchdog.join();
    if (s.comm) (void)ncclCommAbort(s.comm);
    throw;
  }
}

std::shared_ptr<ProcessGroupNCCL> ProcessGroupNCCL::from_env(ProcessGroupOptions options) {
  return std::make_shared<ProcessGroupNCCL>(env_from_environment(), options);
}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  Impl& s = *impl_;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.stop = true;
  }
  s.cv.notify_all();
  s.watchdog.join();
  s.watched_comm = nullptr;
  gpu::DeviceGuard guard(s.device);
  if (std::uncaught_exceptions() > 0) {
    // This rank is failing (an exception unwinds): its peers may never finish a collective with it, so do not
    // wait for the communication stream; the store then tells the others that this rank died.
    (void)ncclCommAbort(s.comm);
  } else {
    (void)cudaStreamSynchronize(s.comm_stream);  // no collective of this rank may still be running
    (void)ncclCommDestroy(s.comm);
  }
  (void)cudaEventDestroy(s.fork);
  (void)cudaEventDestroy(s.join);
  (void)cudaStreamDestroy(s.comm_stream);
  s.watch_store.reset();
  s.store.reset();  // rank 0: waits for the others to leave before closing the store
}

int ProcessGroupNCCL::rank() const { return impl_->env.rank; }
int ProcessGroupNCCL::size() const { return impl_->env.world_size; }
Device ProcessGroupNCCL::device() const { return Device(kCUDA, impl_->device); }

void ProcessGroupNCCL::allreduce_async(const std::vector<Tensor>& tensors, ReduceOp op) {
  Impl& s = *impl_;
  s.check_tensors(tensors, "allreduce");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    MINIDL_CHECK(tensors[i].dtype() != kInt64 || op == ReduceOp::Sum, TypeError,
                 "ProcessGroupNCCL::allreduce: average of an int64 tensor (", i, ")");
  }
  if (tensors.empty()) return;
  gpu::DeviceGuard guard(s.device);
  s.fork_comm_stream();
  const ncclRedOp_t nop = op == ReduceOp::Avg ? ncclAvg : ncclSum;
  MINIDL_NCCL_CHECK(ncclGroupStart(), s.comm);
  for (const Tensor& t : tensors) {
    MINIDL_NCCL_CHECK(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<std::size_t>(t.numel()),
                                    nccl_type(t.dtype()), nop, s.comm, s.comm_stream),
                      s.comm);
  }
  MINIDL_NCCL_CHECK(ncclGroupEnd(), s.comm);
  for (const Tensor& t : tensors) t.unsafe_impl()->storage->version.fetch_add(1);  // written in place
  s.pending = true;
}

void ProcessGroupNCCL::wait_pending() {
  Impl& s = *impl_;
  if (!s.pending) return;
  gpu::DeviceGuard guard(s.device);
  MINIDL_CUDA_CHECK(cudaEventRecord(s.join, s.comm_stream));
  MINIDL_CUDA_CHECK(cudaStreamWaitEvent(gpu::stream(), s.join, 0));
  s.pending = false;
}

void ProcessGroupNCCL::broadcast(const std::vector<Tensor>& tensors, int root) {
  Impl& s = *impl_;
  MINIDL_CHECK(root >= 0 && root < s.env.world_size, ValueError, "ProcessGroupNCCL::broadcast: root must be in [0, ",
               s.env.world_size, "), found ", root);
  s.check_tensors(tensors, "broadcast");
  if (tensors.empty()) return;
  gpu::DeviceGuard guard(s.device);
  s.fork_comm_stream();
  MINIDL_NCCL_CHECK(ncclGroupStart(), s.comm);
  for (const Tensor& t : tensors) {
    MINIDL_NCCL_CHECK(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<std::size_t>(t.numel()),
                                    nccl_type(t.dtype()), root, s.comm, s.comm_stream),
                      s.comm);
  }
  MINIDL_NCCL_CHECK(ncclGroupEnd(), s.comm);
  for (const Tensor& t : tensors) t.unsafe_impl()->storage->version.fetch_add(1);
  s.pending = true;
  wait_pending();
}

void ProcessGroupNCCL::barrier() { impl_->store->barrier(); }

}  // namespace distributed
}  // namespace minidl
