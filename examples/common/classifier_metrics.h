#pragma once
// The image classifiers' --metrics CSV (mnist_train, resnet): epoch,device,split,loss,accuracy,seconds,images_per_s
// — one row per epoch, device and split (train, test), flushed as it is written so a crashed run keeps every
// finished epoch; scripts/plot_metrics.py draws it.
#include <cstdint>
#include <string>

#include "csv_file.h"

namespace examples {

class ClassifierMetricsWriter {
 public:
  /// Opens (truncates, or appends when `append` and the file exists) and writes the header if new.
  ClassifierMetricsWriter(const std::string& path, bool append) : file_(path, header(), append) {}
  void write(std::int64_t epoch, const std::string& device, const std::string& split, double loss, double accuracy,
             double seconds, double images_per_s);
  static const char* header() { return "epoch,device,split,loss,accuracy,seconds,images_per_s"; }

 private:
  CsvFile file_;
};

}  // namespace examples
