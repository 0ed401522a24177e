#pragma once
// Per-epoch progress: a redrawn bar on a terminal, one log line every few seconds otherwise.
#include <chrono>
#include <cstdint>
#include <string>

namespace mnist {

class Progress {
 public:
  Progress(std::string label, std::int64_t total_batches, std::int64_t batch_size);
  /// True when it is time to show progress again (so the caller reads the running loss from the device
  /// only then, not every step).
  bool due() const;
  void update(std::int64_t batches_done, double running_loss);
  void finish();

 private:
  std::string label_;
  std::int64_t total_, batch_size_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace mnist
