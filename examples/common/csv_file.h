#pragma once
// A metrics CSV file: created with its header, or appended to (a resumed run) keeping the header it has; every row
// is flushed as it is written, so a crashed run keeps every finished row.
#include <fstream>
#include <string>

namespace examples {

class CsvFile {
 public:
  /// Opens `path` (truncated, or appended to when `append` and it exists) and writes `header` if the file is new.
  /// Throws minidl::IOError naming the file.
  CsvFile(const std::string& path, const std::string& header, bool append);
  /// Writes one line (without its newline) and flushes it; throws minidl::IOError naming the file.
  void row(const std::string& line);

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace examples
