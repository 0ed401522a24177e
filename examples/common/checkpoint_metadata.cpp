#include "checkpoint_metadata.h"

#include <minidl/errors.h>

#include <cmath>
#include <sstream>

namespace examples {

std::string exact_text(double v) {
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

const std::string& metadata_text(const std::map<std::string, std::string>& metadata, const std::string& key,
                                 const std::string& file, const std::string& writer) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) {
    throw minidl::FormatError(file + ": the metadata lacks " + key + " (not a checkpoint written by " + writer + ")");
  }
  return it->second;
}

std::int64_t metadata_positive_int(const std::map<std::string, std::string>& metadata, const std::string& key,
                                   const std::string& file, const std::string& writer) {
  const std::string& text = metadata_text(metadata, key, file, writer);
  try {
    std::size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 1) return v;
  } catch (const std::exception&) {
  }
  throw minidl::FormatError(file + ": metadata " + key + " is \"" + text + "\", expected a positive integer");
}

double extra_number(const std::map<std::string, std::string>& extra, const std::string& key, const std::string& file,
                    const std::string& writer) {
  const auto it = extra.find(key);
  if (it == extra.end()) throw minidl::FormatError(file + ": lacks " + key + " (not written by " + writer + ")");
  std::size_t used = 0;
  double v = -1;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
  }
  if (used != it->second.size() || !std::isfinite(v) || v < 0) {
    throw minidl::FormatError(file + ": " + key + " is \"" + it->second + "\", expected a number >= 0");
  }
  return v;
}

}  // namespace examples
