#pragma once
// The --metrics CSV: epoch,iter,loss_d,loss_g,d_x,d_g_z1,d_g_z2,ms_per_step,elapsed_s — one row per --log-every
// steps (and one for the rest of each epoch): the interval's mean discriminator loss (real + fake), generator
// loss, D(x) (the discriminator's mean probability for real images), D(G(z)) before the discriminator's update
// (d_g_z1) and after it (d_g_z2, what the generator's update sees), as PyTorch's DCGAN tutorial prints them; the
// interval's wall time per step (the first interval holds the first step's one-time work) and the training time
// so far. `iter` counts steps from the start of training (a resumed run continues the count).
#include <string>

#include "csv_file.h"
#include "trainer.h"

namespace dcgan {

class MetricsWriter {
 public:
  /// Opens (truncates, or appends when `append` and the file exists) and writes the header if new.
  MetricsWriter(const std::string& path, bool append) : file_(path, header(), append) {}
  void write(const IntervalStats& s);
  static const char* header() { return "epoch,iter,loss_d,loss_g,d_x,d_g_z1,d_g_z2,ms_per_step,elapsed_s"; }

 private:
  examples::CsvFile file_;
};

}  // namespace dcgan
