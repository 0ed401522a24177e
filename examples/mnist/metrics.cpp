#include "metrics.h"

#include <iomanip>
#include <sstream>

namespace mnist {

void MetricsWriter::write(std::int64_t epoch, const std::string& device, const std::string& split,
                          const EpochStats& s) {
  std::ostringstream row;
  row << epoch << "," << device << "," << split << "," << std::setprecision(6) << s.loss << "," << s.accuracy << ","
      << s.seconds << "," << std::setprecision(8) << s.images_per_s;
  file_.row(row.str());
}

}  // namespace mnist
