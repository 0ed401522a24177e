#include "metrics.h"

#include <sstream>

namespace resnet {

void MetricsWriter::write(const EpochStats& s, std::int64_t iter, double elapsed_seconds) {
  std::ostringstream row;
  row.precision(6);
  row << s.epoch << "," << iter << "," << s.lr << "," << s.train.loss << "," << s.train.accuracy << ",";
  if (s.test.images > 0) row << s.test.loss << "," << s.test.accuracy;
  else row << ",";
  row << "," << s.train.seconds << "," << s.timing.steady_seconds << "," << elapsed_seconds;
  file_.row(row.str());
}

}  // namespace resnet
