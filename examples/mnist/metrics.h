#pragma once
// The --metrics CSV: epoch,device,split,loss,accuracy,seconds,images_per_s — one row per epoch and split,
// flushed as it is written so a crashed run keeps every finished epoch.
#include <cstdint>
#include <string>

#include "csv_file.h"
#include "epoch_clock.h"

namespace mnist {

struct EpochStats {
  double loss = 0, accuracy = 0, seconds = 0, images_per_s = 0;
  /// A training epoch's seconds split into steady state and one-time work (evaluation: all steady).
  examples::EpochTiming timing;
};

class MetricsWriter {
 public:
  /// Opens (truncates, or appends when `append` and the file exists) and writes the header if new.
  MetricsWriter(const std::string& path, bool append) : file_(path, header(), append) {}
  void write(std::int64_t epoch, const std::string& device, const std::string& split, const EpochStats& s);
  static const char* header() { return "epoch,device,split,loss,accuracy,seconds,images_per_s"; }

 private:
  examples::CsvFile file_;
};

}  // namespace mnist
