#pragma once
// --download: fetches dataset files from a mirror into a directory, verifying each against its published MD5.
// A file appears under its final name only complete and verified: it is downloaded into memory, checked, and
// only then written (temporary file in the same directory + rename), so no failure leaves a partial or
// unverified file behind. http:// goes through the built-in client (http_client.h); https:// through `curl`
// or, failing that, `wget`, run as a subprocess.
#include <cstddef>
#include <string>
#include <vector>

namespace mnist {

struct RemoteFile {
  std::string name;  ///< file name on the mirror and on disk (no directory part)
  std::string md5;   ///< expected MD5 of the file's bytes, 32 hex digits
};

/// MNIST's four gzip files with the MD5s torchvision checks them against (torchvision/datasets/mnist.py,
/// MNIST.resources; the files are byte-identical on every mirror torchvision lists).
const std::vector<RemoteFile>& mnist_files();

/// The mirror torchvision uses first (Yann LeCun's original site no longer serves the files reliably).
inline constexpr const char* kMnistBaseUrl = "https://ossci-datasets.s3.amazonaws.com/mnist/";

/// Largest file accepted from a mirror: a bound against a broken server, 25x MNIST's largest file.
inline constexpr std::size_t kMaxDownloadBytes = std::size_t{256} << 20;

/// Makes `dir` (created if missing) hold every file of `files`, each with its MD5: a file already there with
/// the right MD5 is kept, any other is fetched from `base_url` + name (a '/' is inserted when `base_url` does
/// not end with one) and replaces what was there. Files are handled in order; those completed before a
/// failure stay. Throws minidl::ValueError for a malformed base URL, file name or MD5, and minidl::IOError
/// naming the URL when fetching fails (unreachable host, HTTP error, no curl/wget for https://) or the bytes
/// do not have the expected MD5 (then nothing is written).
void download_files(const std::string& base_url, const std::string& dir, const std::vector<RemoteFile>& files);

/// The bytes at an http:// or https:// URL (see the file comment for the transports). Throws like
/// download_files.
std::vector<char> fetch_url(const std::string& url);

}  // namespace mnist
