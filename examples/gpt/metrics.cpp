#include "metrics.h"

#include <minidl/errors.h>

#include <cerrno>
#include <cstring>
#include <iomanip>

namespace gpt {

MetricsWriter::MetricsWriter(const std::string& path, bool append) : path_(path) {
  const bool exists = std::ifstream(path).good();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw minidl::IOError("cannot open metrics file " + path + ": " + std::strerror(errno));
  if (!append || !exists) out_ << header() << "\n" << std::flush;
}

void MetricsWriter::train(std::int64_t iter, double loss, double ms_per_iter, double tokens_per_s, double elapsed_s) {
  out_ << iter << ",train," << std::setprecision(6) << loss << "," << ms_per_iter << "," << std::setprecision(8)
       << tokens_per_s << "," << std::setprecision(6) << elapsed_s << "\n";
  finish_row();
}

void MetricsWriter::val(std::int64_t iter, double loss, double elapsed_s) {
  out_ << iter << ",val," << std::setprecision(6) << loss << ",,," << elapsed_s << "\n";
  finish_row();
}

void MetricsWriter::finish_row() {
  out_ << std::flush;
  if (!out_) throw minidl::IOError("cannot write metrics file " + path_ + ": " + std::strerror(errno));
}

}  // namespace gpt
