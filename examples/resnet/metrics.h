#pragma once
// The --metrics CSV: epoch,iter,lr,train_loss,train_acc,test_loss,test_acc,epoch_s,steady_epoch_s,elapsed_s — one
// row per epoch: the steps so far (a resumed run continues the count), the learning rate of the epoch's last step,
// the training pass's mean loss and accuracy (of the augmented images, with the weights as they were at each step),
// the test set's after the epoch (empty without a test set), the epoch's training time, what it takes at its steady
// steps' rate (without the one-time work: the algorithm search, the CUDA-graph capture) and the training time so
// far.
#include <string>

#include "csv_file.h"
#include "trainer.h"

namespace resnet {

class MetricsWriter {
 public:
  /// Opens (truncates, or appends when `append` and the file exists) and writes the header if new.
  MetricsWriter(const std::string& path, bool append) : file_(path, header(), append) {}
  void write(const EpochStats& s, std::int64_t iter, double elapsed_seconds);
  static const char* header() {
    return "epoch,iter,lr,train_loss,train_acc,test_loss,test_acc,epoch_s,steady_epoch_s,elapsed_s";
  }

 private:
  examples::CsvFile file_;
};

}  // namespace resnet
