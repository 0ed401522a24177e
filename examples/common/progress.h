#pragma once
// Progress of a training loop: a redrawn bar on a terminal, one log line every few seconds otherwise, with the
// running loss (or several named running values, e.g. a GAN's two losses), the throughput in the loop's own unit
// (images, tokens) and the time left.
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace examples {

class Progress {
 public:
  /// `total_steps` steps of `items_per_step` items each; `item` names the items ("img", "tok") and `step` the
  /// steps ("batches", "iters") in the log lines.
  Progress(std::string label, std::int64_t total_steps, std::int64_t items_per_step, std::string item = "img",
           std::string step = "batches");
  /// True when it is time to show progress again (so the caller reads the running loss from the device
  /// only then, not every step).
  bool due() const;
  void update(std::int64_t steps_done, double running_loss);
  /// As update(steps_done, loss), showing each named value ("loss_D 1.3862  loss_G 0.6931") in place of the loss.
  void update(std::int64_t steps_done, const std::vector<std::pair<std::string, double>>& running_values);
  void finish();

 private:
  std::string label_, item_, step_;
  std::int64_t total_, items_per_step_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace examples
