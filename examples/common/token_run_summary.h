#pragma once
// What the language-model examples (gpt_train, char_lstm) print after their runs: the steady-state speed of each
// device's run (warm-up steps and a CUDA-graph capture taken out, on lines of their own), its last validation
// loss and, with --compare, the GPU's speedup over the CPU; and the per-device name of the --metrics file.
#include <minidl/device.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "epoch_clock.h"

namespace examples {

struct TokenRunSummary {
  minidl::Device device;
  double steady_seconds = 0, one_time_seconds = 0;
  std::int64_t iters = 0, one_time_steps = 0, tokens_per_iter = 0;
  bool steady_measured = true;
  double last_val = std::numeric_limits<double>::quiet_NaN();

  /// Adds an interval of `iters` iterations timed by `timing`.
  void add(std::int64_t iters, const EpochTiming& timing);
};

/// The table: device, ms/iter, tokens/s, val loss, speedup (of a CUDA run over the CPU run before it); then each
/// run's one-time cost. `one_time_work` names what a GPU run's one-time steps did.
void print_token_run_summary(const std::vector<TokenRunSummary>& runs, const std::string& one_time_work);

/// --metrics FILE as it is, or with --compare (`per_device`) FILE with the device before its extension
/// (FILE.cpu.csv, FILE.cuda.csv).
std::string metrics_path(const std::string& path, bool per_device, const minidl::Device& device);

}  // namespace examples
