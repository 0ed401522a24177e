#include "epoch_clock.h"

#include <algorithm>

namespace examples {

void EpochClock::start() {
  one_time_ = {};
  one_time_images_ = steady_images_ = one_time_steps_ = 0;
}

EpochTiming EpochClock::finish(double seconds) const {
  EpochTiming t;
  t.seconds = seconds;
  t.one_time_steps = one_time_steps_;
  t.steady_measured = steady_images_ > 0;
  if (!t.steady_measured) {
    t.steady_seconds = seconds;
    return t;
  }
  // The one-time steps also did a steady step's work: count it at the steady steps' rate per image (a smaller
  // last batch then counts for its share of the images).
  const double steady_part = std::max(0.0, seconds - std::chrono::duration<double>(one_time_).count());
  const double images = static_cast<double>(steady_images_ + one_time_images_);
  // Bracketed steps that ran no slower per image than the others (no real one-time work, or a noisy host) hold
  // no one-time cost: the estimate never exceeds the measured epoch, so the cost is never negative.
  t.steady_seconds = std::min(seconds, steady_part * images / static_cast<double>(steady_images_));
  t.one_time_seconds = seconds - t.steady_seconds;
  return t;
}

}  // namespace examples
