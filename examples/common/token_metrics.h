#pragma once
// The --metrics CSV of the language-model examples (gpt_train, char_lstm): iter,split,loss,ms_per_iter,
// tokens_per_s,elapsed_s. At every evaluation after the first training interval, a `train` row with the
// interval's mean training loss and speed; then a `val` row with the evaluation's validation loss (its speed
// fields empty). elapsed_s is the training time so far, evaluation
// excluded. Each row is flushed as it is written, so a crashed run keeps every finished interval.
#include <cstdint>
#include <string>

#include "csv_file.h"

namespace examples {

class TokenMetricsWriter {
 public:
  /// Opens (truncates, or appends when `append` and the file exists) and writes the header if new.
  TokenMetricsWriter(const std::string& path, bool append) : file_(path, header(), append) {}
  void train(std::int64_t iter, double loss, double ms_per_iter, double tokens_per_s, double elapsed_s);
  void val(std::int64_t iter, double loss, double elapsed_s);
  static const char* header() { return "iter,split,loss,ms_per_iter,tokens_per_s,elapsed_s"; }

 private:
  CsvFile file_;
};

}  // namespace examples
