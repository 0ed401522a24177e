#include "metrics.h"

#include <sstream>

namespace dcgan {

void MetricsWriter::write(const IntervalStats& s) {
  std::ostringstream row;
  row.precision(6);
  row << s.epoch << "," << s.iter << "," << s.means.loss_d << "," << s.means.loss_g << "," << s.means.d_x << ","
      << s.means.d_g_z1 << "," << s.means.d_g_z2 << "," << 1e3 * s.seconds / static_cast<double>(s.steps) << ","
      << s.elapsed_seconds;
  file_.row(row.str());
}

}  // namespace dcgan
