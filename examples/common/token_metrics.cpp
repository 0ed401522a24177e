#include "token_metrics.h"

#include <iomanip>
#include <sstream>

namespace examples {

void TokenMetricsWriter::train(std::int64_t iter, double loss, double ms_per_iter, double tokens_per_s,
                               double elapsed_s) {
  std::ostringstream s;
  s << iter << ",train," << std::setprecision(6) << loss << "," << ms_per_iter << "," << std::setprecision(8)
    << tokens_per_s << "," << std::setprecision(6) << elapsed_s;
  file_.row(s.str());
}

void TokenMetricsWriter::val(std::int64_t iter, double loss, double elapsed_s) {
  std::ostringstream s;
  s << iter << ",val," << std::setprecision(6) << loss << ",,," << elapsed_s;
  file_.row(s.str());
}

}  // namespace examples
