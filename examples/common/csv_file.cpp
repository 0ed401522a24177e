#include "csv_file.h"

#include <minidl/errors.h>

#include <cerrno>
#include <cstring>

namespace examples {

CsvFile::CsvFile(const std::string& path, const std::string& header, bool append) : path_(path) {
  const bool exists = std::ifstream(path).good();
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw minidl::IOError("cannot open metrics file " + path + ": " + std::strerror(errno));
  if (!append || !exists) row(header);
}

void CsvFile::row(const std::string& line) {
  out_ << line << "\n" << std::flush;
  if (!out_) throw minidl::IOError("cannot write metrics file " + path_ + ": " + std::strerror(errno));
}

}  // namespace examples
