#pragma once
// Reading text entries back from a checkpoint: the model configuration in its metadata (what a program's --save wrote
// beside the weights) and the counters in its training state's extra entries, with errors that name the file, the
// key and the program that writes such checkpoints.
#include <cstdint>
#include <map>
#include <string>

namespace examples {

/// `v` as text that reads back to exactly `v` (17 significant digits), for a metadata entry.
std::string exact_text(double v);

/// The text under `key`. Throws minidl::FormatError naming `file` and the key when it is missing ("not a
/// checkpoint written by <writer>", e.g. "dcgan --save").
const std::string& metadata_text(const std::map<std::string, std::string>& metadata, const std::string& key,
                                 const std::string& file, const std::string& writer);
/// The integer >= 1 under `key`; also a FormatError quoting the value when it is not one.
std::int64_t metadata_positive_int(const std::map<std::string, std::string>& metadata, const std::string& key,
                                   const std::string& file, const std::string& writer);

/// The number >= 0 under `key` of a training state's extra entries (minidl::io::TrainingState::extra: a step count,
/// the training time). Throws minidl::FormatError naming `file` and the key when it is missing or not such a number.
double extra_number(const std::map<std::string, std::string>& extra, const std::string& key, const std::string& file,
                    const std::string& writer);

}  // namespace examples
