#pragma once
// The command-line check of an output file: its directory must exist, so that a run does not train for an hour
// and then fail to save.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <string>
#include <system_error>

namespace examples {

inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        namespace fs = std::filesystem;
        const fs::path p(path);
        const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
        std::error_code ec;
        if (!fs::is_directory(parent, ec)) return "directory " + parent.string() + " of " + path + " does not exist";
        if (fs::is_directory(p, ec)) return path + " is a directory";
        return "";
      },
      "FILE in an existing directory");
}

}  // namespace examples
