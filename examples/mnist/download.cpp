#include "download.h"

#include <spdlog/spdlog.h>

#include <minidl/errors.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

#include "http_client.h"
#include "io/atomic_file.h"
#include "md5.h"
#include "subprocess.h"

namespace fs = std::filesystem;

namespace mnist {

const std::vector<RemoteFile>& mnist_files() {
  static const std::vector<RemoteFile> files = {
      {"train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
      {"train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"},
      {"t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"},
      {"t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c"},
  };
  return files;
}

namespace {

/// https:// through whichever of curl and wget is installed; both fail (non-zero exit) on HTTP errors.
std::vector<char> fetch_with_tool(const std::string& url) {
  const std::vector<std::vector<std::string>> commands = {
      {"curl", "--fail", "--silent", "--show-error", "--location", "--connect-timeout", "30", "--speed-time", "60",
       "--speed-limit", "1", "--max-filesize", std::to_string(kMaxDownloadBytes), url},
      {"wget", "--no-verbose", "--timeout=30", "--output-document=-", url},
  };
  for (const auto& argv : commands) {
    const std::optional<ProcessResult> r = run_process(argv, kMaxDownloadBytes);
    if (!r) continue;
    if (r->exit_code == 0) return std::vector<char>(r->out.begin(), r->out.end());
    std::string err = r->err;
    while (!err.empty() && std::isspace(static_cast<unsigned char>(err.back()))) err.pop_back();
    const std::string how = r->signal ? "was killed by signal " + std::to_string(r->signal)
                                      : "failed with exit status " + std::to_string(r->exit_code);
    throw minidl::IOError("GET " + url + ": " + argv[0] + " " + how + (err.empty() ? "" : ": " + err));
  }
  throw minidl::IOError("GET " + url + ": https:// downloads need curl or wget, and neither is installed "
                        "(sudo apt-get install curl), or give an http:// mirror");
}

void check_file(const RemoteFile& f) {
  MINIDL_CHECK(!f.name.empty() && f.name != "." && f.name != ".." && f.name.find('/') == std::string::npos,
               minidl::ValueError, "download_files: file name \"", f.name, "\" must be a plain file name");
  MINIDL_CHECK(f.md5.size() == 32 && std::all_of(f.md5.begin(), f.md5.end(),
                                                 [](unsigned char c) { return std::isxdigit(c) != 0; }),
               minidl::ValueError, "download_files: MD5 of \"", f.name, "\" must be 32 hex digits, found \"", f.md5,
               "\"");
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::vector<char> fetch_url(const std::string& url) {
  if (parse_url(url).scheme == "https") return fetch_with_tool(url);
  std::vector<char> body;
  http_get(url, [&](const char* data, std::size_t size) {
    if (body.size() + size > kMaxDownloadBytes) {
      throw minidl::IOError("GET " + url + ": the body is larger than " + std::to_string(kMaxDownloadBytes) + " bytes");
    }
    body.insert(body.end(), data, data + size);
  });
  return body;
}

void download_files(const std::string& base_url, const std::string& dir, const std::vector<RemoteFile>& files) {
  parse_url(base_url);  // a malformed base fails before anything is created
  for (const RemoteFile& f : files) check_file(f);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw minidl::IOError("download_files: cannot create directory " + dir + ": " + ec.message());

  const std::string base = base_url.back() == '/' ? base_url : base_url + "/";
  for (const RemoteFile& f : files) {
    const std::string path = (fs::path(dir) / f.name).string();
    const std::string expected = lowercase(f.md5);
    if (fs::exists(path)) {
      const std::string found = md5_file(path);
      if (found == expected) {
        spdlog::info("{}: present, MD5 {} as expected", path, found);
        continue;
      }
      spdlog::warn("{}: MD5 {} instead of {}; downloading it again", path, found, expected);
    }
    const std::string url = base + f.name;
    spdlog::info("downloading {}", url);
    const std::vector<char> bytes = fetch_url(url);
    Md5 md5;
    md5.update(bytes.data(), bytes.size());
    const std::string found = md5.hex_digest();
    if (found != expected) {
      throw minidl::IOError("GET " + url + ": checksum mismatch: expected MD5 " + expected + ", found " + found +
                            " (" + std::to_string(bytes.size()) + " bytes); nothing was written to " + path);
    }
    minidl::io::atomic_write_file(path, bytes.data(), bytes.size());
    spdlog::info("{}: {} bytes, MD5 {} as expected", path, bytes.size(), found);
  }
}

}  // namespace mnist
