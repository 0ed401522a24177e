#include "classifier_metrics.h"

#include <iomanip>
#include <sstream>

namespace examples {

void ClassifierMetricsWriter::write(std::int64_t epoch, const std::string& device, const std::string& split,
                                    double loss, double accuracy, double seconds, double images_per_s) {
  std::ostringstream row;
  row << epoch << "," << device << "," << split << "," << std::setprecision(6) << loss << "," << accuracy << ","
      << seconds << "," << std::setprecision(8) << images_per_s;
  file_.row(row.str());
}

}  // namespace examples
