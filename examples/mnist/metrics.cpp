#include "metrics.h"

#include <minidl/errors.h>

#include <cerrno>
#include <cstring>
#include <iomanip>

namespace mnist {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  const bool exists = std::ifstream(path).good();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw minidl::IOError("cannot open metrics file " + path + ": " + std::strerror(errno));
  if (!append || !exists) out_ << header() << "\n" << std::flush;
}

void MetricsWriter::write(std::int64_t epoch, const std::string& device, const std::string& split, const EpochStats& s) {
  out_ << epoch << "," << device << "," << split << "," << std::setprecision(6) << s.loss << "," << s.accuracy << ","
       << s.seconds << "," << std::setprecision(8) << s.images_per_s << "\n"
       << std::flush;
  if (!out_) throw minidl::IOError("cannot write metrics file " + path_ + ": " + std::strerror(errno));
}

}  // namespace mnist
