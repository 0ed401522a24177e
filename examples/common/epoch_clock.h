#pragma once
// The steady-state time of a training epoch, apart from its one-time cost. The first epoch also does what later
// epochs do not: cuDNN's algorithm search, the optimizer state's creation, eager warm-up steps and the CUDA-graph
// capture, the first step of each batch shape. Reported as it is, that epoch understates a GPU (0.75 s against a
// steady 0.21 s for the MNIST CNN on an H200). A trainer brackets each step that does such work with
// EpochClock::one_time; the clock waits for the device before and after it, so that the bracket holds exactly
// that step's time, and extrapolates the other (steady) steps' rate to the whole epoch.
#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

namespace examples {

struct EpochTiming {
  double seconds = 0;           ///< the epoch's wall time, one-time work included
  double steady_seconds = 0;    ///< the epoch at its steady steps' rate per image: what a later epoch takes
  double one_time_seconds = 0;  ///< seconds - steady_seconds: the one-time work's extra cost
  std::int64_t one_time_steps = 0;
  /// Whether steady_seconds was measured: false when every step did one-time work (then it equals seconds).
  bool steady_measured = false;
};

class EpochClock {
 public:
  using Clock = std::chrono::steady_clock;

  /// `wait_for_device` blocks until the device has run everything queued (cuda::synchronize; nothing on the CPU).
  explicit EpochClock(std::function<void()> wait_for_device) : wait_(std::move(wait_for_device)) {}

  /// Starts an epoch (forgets the previous one's steps).
  void start();

  /// Runs `step`, a step over `images` samples that does one-time work, and times it apart.
  template <class Step>
  void one_time(std::int64_t images, Step&& step) {
    wait_();
    const Clock::time_point t0 = Clock::now();
    std::forward<Step>(step)();
    wait_();
    one_time_ += Clock::now() - t0;
    one_time_images_ += images;
    ++one_time_steps_;
  }
  /// Counts a steady step over `images` samples (not timed on its own: the host runs ahead of the device).
  void steady(std::int64_t images) { steady_images_ += images; }

  /// The split of an epoch that took `seconds` from start() until the device finished its work.
  EpochTiming finish(double seconds) const;

 private:
  std::function<void()> wait_;
  Clock::duration one_time_{};
  std::int64_t one_time_images_ = 0, steady_images_ = 0, one_time_steps_ = 0;
};

}  // namespace examples
