#include "minidl/data/data_loader.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "kernels/backend.h"
#include "minidl/config.h"
#if MINIDL_CUDA_ENABLED
#include "cuda/batch_stager.h"
#endif

namespace minidl::data {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound): rejecting the lowest (2^64 mod bound) raw values leaves a multiple of bound
// equally likely values, so the modulo is unbiased.
std::uint64_t uniform_below(std::mt19937_64& gen, std::uint64_t bound) {
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

// Rows [start, start + len) of a contiguous tensor, as a view sharing its storage.
Tensor rows_view(const Tensor& t, std::int64_t start, std::int64_t len) {
  const TensorImpl* impl = t.unsafe_impl();
  Shape s = t.sizes();
  const std::size_t row_bytes =
      static_cast<std::size_t>(shape_numel(Shape(s.begin() + 1, s.end()))) * element_size(t.dtype());
  s[0] = len;
  return Tensor(std::make_shared<TensorImpl>(
      impl->storage, impl->byte_offset + static_cast<std::size_t>(start) * row_bytes, s, impl->dtype));
}

Shape with_rows(std::int64_t rows, const Shape& sample_shape) {
  Shape s{rows};
  s.insert(s.end(), sample_shape.begin(), sample_shape.end());
  return s;
}

// A Dataset is user code: check what it returned before anything copies it by size.
void check_host_batch(const Batch& b, std::int64_t rows, const Shape& sample_shape) {
  const char* what = "DataLoader: Dataset::get_batch";
  MINIDL_CHECK(b.data.defined() && b.target.defined(), ValueError, what, " returned an undefined ",
               b.data.defined() ? "target" : "data", " tensor");
  MINIDL_CHECK(b.data.device().is_cpu() && b.target.device().is_cpu(), TypeError, what,
               " must return CPU tensors, found data on ", b.data.device(), " and target on ", b.target.device());
  MINIDL_CHECK(b.data.dtype() == kFloat32 && b.target.dtype() == kInt64, TypeError, what,
               " must return float32 data and int64 target, found ", b.data.dtype(), " and ", b.target.dtype());
  const Shape expected = with_rows(rows, sample_shape);
  MINIDL_CHECK(b.data.sizes() == expected, ValueError, what, " returned data of shape ", shape_str(b.data.sizes()),
               " for ", rows, " indices, expected ", shape_str(expected));
  MINIDL_CHECK(b.target.sizes() == Shape{rows}, ValueError, what, " returned a target of shape ",
               shape_str(b.target.sizes()), " for ", rows, " indices, expected [", rows, "]");
}

// Runs produce(b) for b = 0, 1, ..., count - 1 on a background thread and queues the results, with at most
// `depth` batches produced (or being produced) that the consumer has not release()d yet.
class Prefetcher {
 public:
  using Produce = std::function<Batch(std::int64_t)>;
  Prefetcher(std::int64_t count, std::int64_t depth, Produce produce)
      : count_(count), depth_(depth), produce_(std::move(produce)), thread_([this] { run(); }) {}

  // Wakes the thread wherever it waits and joins it. It may first finish the batch it is producing.
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    space_.notify_all();
    thread_.join();
  }

  // The next batch in order. When producing it threw, rethrows that exception (and again on every later call).
  Batch pop() {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || error_; });
    if (queue_.empty()) std::rethrow_exception(error_);
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    return b;
  }

  // The consumer is done with the oldest popped batch (and whatever buffer it occupied).
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++released_;
    }
    space_.notify_one();
  }

 private:
  void run() {
    // The gathers run on this thread alone: the pool belongs to the training step (cpu/parallel.h).
    const cpu::SerialScope serial;
    try {
      for (std::int64_t b = 0; b < count_; ++b) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          space_.wait(lock, [&] { return stop_ || b < released_ + depth_; });
          if (stop_) return;
        }
        Batch batch = produce_(b);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          queue_.push_back(std::move(batch));
        }
        ready_.notify_one();
      }
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        error_ = std::current_exception();
      }
      ready_.notify_one();
    }
  }

  const std::int64_t count_, depth_;
  const Produce produce_;
  std::mutex mutex_;
  std::condition_variable space_, ready_;
  std::deque<Batch> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::int64_t released_ = 0;
  std::thread thread_;  // last: starts once everything it uses exists
};

}  // namespace

std::vector<std::int64_t> epoch_order(std::int64_t n, bool shuffle, std::uint64_t seed, std::int64_t epoch) {
  MINIDL_CHECK(n >= 0, ValueError, "epoch_order: expected n >= 0, found ", n);
  MINIDL_CHECK(epoch >= 0, ValueError, "epoch_order: expected epoch >= 0, found ", epoch);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (!shuffle) return order;
  std::mt19937_64 gen(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(epoch))));
  for (std::int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<std::int64_t>(uniform_below(gen, static_cast<std::uint64_t>(i + 1)));
    std::swap(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>(j)]);
  }
  return order;
}

struct DataLoader::State {
  std::shared_ptr<const Dataset> dataset;
  DataLoaderOptions opt;
  Shape sample_shape;
  std::int64_t size = 0, batches = 0;
  std::int64_t count = 0;  // samples per epoch: size, or the sampler's size
  std::int64_t epoch = -1;  // -1 until the first start_epoch()
  std::vector<std::int64_t> order;
  std::int64_t next_batch = 0;
  Tensor resident_data, resident_target, resident_order;  // device_resident only
#if MINIDL_CUDA_ENABLED
  std::unique_ptr<gpu::BatchStager> stager;  // CUDA device with a prefetch thread
#endif
  std::unique_ptr<Prefetcher> prefetcher;  // after the stager, so the thread is joined before the buffers go

  std::int64_t depth() const { return std::int64_t{opt.prefetch} + 1; }
  std::int64_t rows(std::int64_t b) const { return std::min(opt.batch_size, count - b * opt.batch_size); }

  // Batch b of the epoch, straight from the dataset (CPU).
  Batch gather_host(std::int64_t b) const {
    const auto begin = order.begin() + b * opt.batch_size;
    const std::vector<std::int64_t> indices(begin, begin + rows(b));
    Batch batch = dataset->get_batch(indices);
    check_host_batch(batch, rows(b), sample_shape);
    return batch;
  }

  // What the prefetch thread does for batch b: gather, and on CUDA also upload into slot b % depth.
  Batch produce(std::int64_t b) const {
    Batch batch = gather_host(b);
#if MINIDL_CUDA_ENABLED
    if (stager) {
      stager->stage(static_cast<int>(b % depth()), batch.data, batch.target);
      return {};
    }
#endif
    return batch;
  }

  void make_resident() {
    const Device dev = opt.device;
    resident_data = empty(with_rows(size, sample_shape), TensorOptions(kFloat32).device(dev));
    resident_target = empty({size}, TensorOptions(kInt64).device(dev));
    // In chunks, so the host never holds a second copy of the whole set.
    constexpr std::int64_t kChunk = 8192;
    for (std::int64_t start = 0; start < size; start += kChunk) {
      const std::int64_t len = std::min(kChunk, size - start);
      std::vector<std::int64_t> indices(static_cast<std::size_t>(len));
      std::iota(indices.begin(), indices.end(), start);
      const Batch chunk = dataset->get_batch(indices);
      check_host_batch(chunk, len, sample_shape);
      rows_view(resident_data, start, len).copy_(chunk.data);
      rows_view(resident_target, start, len).copy_(chunk.target);
    }
  }

  // Batch b gathered on the device from the resident set by the epoch's uploaded order.
  Batch gather_resident(std::int64_t b) const {
    const Device dev = opt.device;
    const Tensor index = rows_view(resident_order, b * opt.batch_size, rows(b));
    Batch out{empty(with_rows(rows(b), sample_shape), TensorOptions(kFloat32).device(dev)),
              empty({rows(b)}, TensorOptions(kInt64).device(dev))};
    // The order holds indices in [0, size) (built here, or a sampler's checked in start_epoch), so the kernels'
    // range precondition holds.
    MINIDL_ON_BACKEND(dev, index_select(resident_data, index, out.data, 1, size, shape_numel(sample_shape)));
    MINIDL_ON_BACKEND(dev, index_select(resident_target, index, out.target, 1, size, 1));
    return out;
  }
};

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  MINIDL_CHECK(dataset != nullptr, ValueError, "DataLoader: dataset is null");
  MINIDL_CHECK(options.batch_size >= 1, ValueError, "DataLoader: batch_size must be >= 1, found ", options.batch_size);
  MINIDL_CHECK(options.prefetch >= 0, ValueError, "DataLoader: prefetch must be >= 0, found ", options.prefetch);
  s.size = dataset->size();
  MINIDL_CHECK(s.size >= 1, ValueError, "DataLoader: the dataset is empty (size ", s.size, ")");
  s.count = options.sampler ? options.sampler->size() : s.size;
  MINIDL_CHECK(s.count >= 1, ValueError, "DataLoader: the sampler yields no samples (size ", s.count, ")");
  s.batches = options.drop_last ? s.count / options.batch_size
                                : (s.count + options.batch_size - 1) / options.batch_size;
  MINIDL_CHECK(s.batches >= 1, ValueError, "DataLoader: batch_size ", options.batch_size, " with drop_last leaves no ",
               "batch from ", s.count, " samples");
#if !MINIDL_CUDA_ENABLED
  if (options.device.is_cuda()) detail::throw_cuda_not_built();
#endif
  s.dataset = std::move(dataset);
  s.opt = options;
  s.sample_shape = s.dataset->sample_shape();
  (void)shape_numel(s.sample_shape);  // rejects negative sizes
  if (s.opt.device_resident) {
    s.make_resident();
    return;
  }
#if MINIDL_CUDA_ENABLED
  if (s.opt.device.is_cuda() && s.opt.prefetch > 0) {
    s.stager = std::make_unique<gpu::BatchStager>(s.opt.device.index(), static_cast<int>(s.depth()),
                                                  s.opt.batch_size, s.sample_shape);
  }
#endif
}

DataLoader::~DataLoader() { state_->prefetcher.reset(); }

void DataLoader::start_epoch(std::int64_t epoch) {
  State& s = *state_;
  MINIDL_CHECK(epoch >= 0, ValueError, "DataLoader::start_epoch: expected epoch >= 0, found ", epoch);
  s.prefetcher.reset();  // abandons the unfinished epoch, if any
  if (s.opt.sampler) {
    s.order = s.opt.sampler->indices(epoch);
    MINIDL_CHECK(static_cast<std::int64_t>(s.order.size()) == s.count, ValueError, "DataLoader: the sampler gave ",
                 s.order.size(), " indices for epoch ", epoch, ", expected its size() ", s.count);
    for (std::int64_t i : s.order) {
      MINIDL_CHECK(i >= 0 && i < s.size, IndexError, "DataLoader: the sampler gave index ", i, " for epoch ", epoch,
                   ", outside the dataset's [0, ", s.size, ")");
    }
  } else {
    s.order = epoch_order(s.size, s.opt.shuffle, s.opt.seed, epoch);
  }
  s.epoch = epoch;
  s.next_batch = 0;
  if (s.opt.device_resident) {
    s.resident_order = from_vector(s.order, {s.count}).to(s.opt.device);  // once per epoch
  } else if (s.opt.prefetch > 0) {
    s.prefetcher = std::make_unique<Prefetcher>(s.batches, s.depth(), [&s](std::int64_t b) { return s.produce(b); });
  }
}

std::optional<Batch> DataLoader::next() {
  State& s = *state_;
  MINIDL_CHECK(s.epoch >= 0, ValueError, "DataLoader::next: no epoch has been started; call start_epoch(epoch) ",
               "first (or iterate over loader.epoch(epoch))");
  if (s.next_batch >= s.batches) return std::nullopt;
  const std::int64_t b = s.next_batch;
  Batch out;
  if (s.opt.device_resident) {
    out = s.gather_resident(b);
  } else if (s.prefetcher) {
    out = s.prefetcher->pop();
#if MINIDL_CUDA_ENABLED
    if (s.stager) {
      gpu::StagedBatch staged = s.stager->take(static_cast<int>(b % s.depth()), s.rows(b));
      out = {std::move(staged.data), std::move(staged.target)};
    }
#endif
    s.prefetcher->release();
  } else {
    out = s.gather_host(b);
    if (s.opt.device.is_cuda()) out = {out.data.to(s.opt.device), out.target.to(s.opt.device)};
  }
  ++s.next_batch;
  return out;
}

std::int64_t DataLoader::num_batches() const { return state_->batches; }
const DataLoaderOptions& DataLoader::options() const { return state_->opt; }
const Dataset& DataLoader::dataset() const { return *state_->dataset; }

}  // namespace minidl::data
