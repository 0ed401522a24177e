// mnist_train --download's machinery (examples/mnist: md5, http_client, download): MD5 against RFC 1321's
// test suite; the HTTP client against crafted responses over a socket pair; download_files against
// `python3 -m http.server` on 127.0.0.1 serving random files: success, an existing good file kept, a bad one
// replaced, checksum mismatch, 404, connection refused — each failure with a clear error and no file left.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "download.h"
#include "http_client.h"
#include "md5.h"
#include "minidl/errors.h"

extern char** environ;

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string md5_of(const std::string& s) {
  mnist::Md5 md5;
  md5.update(s.data(), s.size());
  return md5.hex_digest();
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary);
  out << bytes;
  ASSERT_TRUE(out.good()) << "cannot write " << p;
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// A fresh directory under the system's temp dir, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "minidl_download_XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// A port on 127.0.0.1 nothing listens on: bound, then released (a race with other processes is possible but
/// harmless for the tests that use it: they only need a refused connection or a free port for the server).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

/// `python3 -m http.server` serving `root` on 127.0.0.1 for the lifetime of the object.
class LocalHttpServer {
 public:
  explicit LocalHttpServer(const fs::path& root) : port_(free_port()) {
    const std::vector<std::string> args = {"python3", "-m", "http.server", std::to_string(port_), "--bind",
                                           "127.0.0.1", "--directory", root.string()};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);  // its request log
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    const int rc = ::posix_spawnp(&pid_, "python3", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = 0;
      missing_ = rc == ENOENT;
      return;
    }
    // Bounded wait for the server to listen (it takes well under a second).
    for (int i = 0; i < 200 && !accepts_connections(port_); ++i) std::this_thread::sleep_for(50ms);
  }
  ~LocalHttpServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status;
      ::waitpid(pid_, &status, 0);
    }
  }
  bool python_missing() const { return missing_; }
  bool running() const { return pid_ > 0 && accepts_connections(port_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

 private:
  int port_;
  pid_t pid_ = 0;
  bool missing_ = false;
};

/// Starts the server over a directory of random files; each test then downloads from it.
class DownloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spit(served_.path() / "one.bin", one_);
    spit(served_.path() / "two.gz", two_);
    server_ = std::make_unique<LocalHttpServer>(served_.path());
    if (server_->python_missing()) GTEST_SKIP() << "python3 is not installed: no local HTTP server to download from";
    ASSERT_TRUE(server_->running()) << "python3 -m http.server did not start listening on 127.0.0.1";
  }

  /// Expects download_files to throw IOError with every one of `parts` in its message.
  void expect_failure(const std::string& base, const std::vector<mnist::RemoteFile>& files,
                      const std::vector<std::string>& parts) {
    try {
      mnist::download_files(base, target().string(), files);
      ADD_FAILURE() << "download_files succeeded";
    } catch (const minidl::IOError& e) {
      for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }

  fs::path target() const { return downloads_.path() / "mnist"; }

  TempDir served_, downloads_;
  const std::string one_ = random_bytes(300001, 1), two_ = random_bytes(4097, 2);
  std::unique_ptr<LocalHttpServer> server_;
};

// ---- MD5 ----------------------------------------------------------------------------------------------------

TEST(Md5, Rfc1321TestSuite) {
  EXPECT_EQ(md5_of(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_of("a"), "0cc175b9c0f1b6a831c399e269772661");
  EXPECT_EQ(md5_of("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(md5_of("message digest"), "f96b697d7cb7938d525a2f31aaf161d0");
  EXPECT_EQ(md5_of("abcdefghijklmnopqrstuvwxyz"), "c3fcd3d76192e4007dfb496cca67e13b");
  EXPECT_EQ(md5_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"), "d174ab98d277d9f5a5611c2c9f419d9f");
  EXPECT_EQ(md5_of("12345678901234567890123456789012345678901234567890123456789012345678901234567890"),
            "57edf4a22be3c955ac49da2e2107b67a");
}

TEST(Md5, PaddingBoundaries) {
  // Lengths around the 56-byte padding limit and the 64-byte block (values from Python's hashlib).
  const std::pair<std::size_t, const char*> cases[] = {
      {55, "ef1772b6dff9a122358552954ad0df65"},  {56, "3b0c8ac703f828b04c6c197006d17218"},
      {57, "652b906d60af96844ebd21b674f35e93"},  {63, "b06521f39153d618550606be297466d5"},
      {64, "014842d480b571495a4a0363793f7367"},  {65, "c743a45e0d2e6a95cb859adae0248435"},
      {119, "8a7bd0732ed6a28ce75f6dabc90e1613"}, {120, "5f61c0ccad4cac44c75ff505e1f1e537"},
      {128, "e510683b3f5ffe4093d021808bc6ff70"}, {1000000, "7707d6ae4e027c70eea2a935c2296f21"}};
  for (const auto& [n, digest] : cases) EXPECT_EQ(md5_of(std::string(n, 'a')), digest) << n << " x 'a'";
}

TEST(Md5, IndependentOfHowTheInputIsSplit) {
  const std::string data = random_bytes(10007, 3);
  const std::string whole = md5_of(data);
  for (std::size_t piece : {1, 3, 63, 64, 65, 1000}) {
    mnist::Md5 md5;
    for (std::size_t i = 0; i < data.size(); i += piece) md5.update(data.data() + i, std::min(piece, data.size() - i));
    EXPECT_EQ(md5.hex_digest(), whole) << "pieces of " << piece;
  }
  mnist::Md5 reused;
  reused.update("junk", 4);
  reused.hex_digest();
  reused.reset();
  reused.update(data.data(), data.size());
  EXPECT_EQ(reused.hex_digest(), whole) << "after reset()";
}

TEST(Md5, File) {
  TempDir dir;
  const std::string data = random_bytes(200003, 4);
  spit(dir.path() / "f", data);
  EXPECT_EQ(mnist::md5_file((dir.path() / "f").string()), md5_of(data));
  EXPECT_THROW(mnist::md5_file((dir.path() / "missing").string()), minidl::IOError);
}

// ---- URL parsing and the HTTP response reader ------------------------------------------------------------------

TEST(HttpClient, ParsesUrls) {
  const mnist::Url a = mnist::parse_url("http://127.0.0.1:8000/mnist/x.gz");
  EXPECT_EQ(a.scheme, "http");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, "8000");
  EXPECT_EQ(a.target, "/mnist/x.gz");
  const mnist::Url b = mnist::parse_url("HTTPS://example.org");
  EXPECT_EQ(b.scheme, "https");
  EXPECT_EQ(b.port, "443");
  EXPECT_EQ(b.target, "/");
  const mnist::Url c = mnist::parse_url("http://[::1]:81/a?b=c");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, "81");
  EXPECT_EQ(c.target, "/a?b=c");
  for (const char* bad : {"example.org/x", "ftp://example.org/", "http://", "http://host:0/", "http://host:99999/",
                          "http://host:8a/", "http://user@host/", "http://[::1/", "http://host/a b", "http://host/#f"}) {
    EXPECT_THROW(mnist::parse_url(bad), minidl::ValueError) << bad;
  }
}

/// The body read_http_response delivers for `response`, written by another thread into a socket pair.
std::string read_response(const std::string& response) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) throw std::runtime_error("socketpair failed");
  std::thread writer([&] {
    std::size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = ::send(fds[1], response.data() + sent, std::min<std::size_t>(response.size() - sent, 7),
                               MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    ::close(fds[1]);
  });
  std::string body;
  try {
    mnist::read_http_response(fds[0], "http://test/", [&](const char* d, std::size_t n) { body.append(d, n); });
  } catch (...) {
    ::close(fds[0]);  // unblocks the writer
    writer.join();
    throw;
  }
  ::close(fds[0]);
  writer.join();
  return body;
}

std::string error_of(const std::string& response) {
  try {
    read_response(response);
  } catch (const minidl::IOError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HttpClient, ReadsContentLengthChunkedAndUntilCloseBodies) {
  const std::string body = random_bytes(1000, 5);
  EXPECT_EQ(read_response("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + body), body);
  EXPECT_EQ(read_response("HTTP/1.0 200 OK\r\n\r\n" + body), body);
  EXPECT_EQ(read_response("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length:  1000 \r\n\r\n" + body),
            body);
  const std::string chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "1f4;name=value\r\n" + body.substr(0, 500) + "\r\n"
                              "1F4\r\n" + body.substr(500) + "\r\n"
                              "0\r\nX-Trailer: 1\r\n\r\n";
  EXPECT_EQ(read_response(chunked), body);
}

TEST(HttpClient, RejectsBrokenResponsesWithClearErrors) {
  EXPECT_NE(error_of("HTTP/1.1 404 File not found\r\nContent-Length: 0\r\n\r\n").find("404 File not found"),
            std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 301 Moved\r\nLocation: https://x/\r\n\r\n").find("redirect to https://x/"),
            std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345").find("after 5 of 10 body bytes"),
            std::string::npos);
  EXPECT_NE(error_of("SSH-2.0-OpenSSH\r\n\r\n").find("status line"), std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n").find("Content-Length"), std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n1234").find("Content-Length"),
            std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nxx").find("Content-Encoding"), std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").find("chunk size"),
            std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc").find("closed"), std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nContent-Type: x").find("closed in the middle of the response headers"),
            std::string::npos);
  EXPECT_NE(error_of("HTTP/1.1 200 OK\r\nX: " + std::string(10000, 'a') + "\r\n\r\n").find("longer than"),
            std::string::npos);
  EXPECT_NE(error_of("").find("status line"), std::string::npos);
}

// ---- download_files against a local server -------------------------------------------------------------------

TEST_F(DownloadTest, DownloadsAndVerifiesEveryFile) {
  mnist::download_files(server_->url(), target().string(), {{"one.bin", md5_of(one_)}, {"two.gz", md5_of(two_)}});
  EXPECT_EQ(slurp(target() / "one.bin"), one_);
  EXPECT_EQ(slurp(target() / "two.gz"), two_);
  EXPECT_EQ(listing(target()), (std::vector<std::string>{"one.bin", "two.gz"})) << "temporary files left behind";
}

TEST_F(DownloadTest, BaseUrlWithoutTrailingSlashAndUppercaseMd5) {
  std::string upper = md5_of(two_);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::string base = server_->url();
  base.pop_back();
  mnist::download_files(base, target().string(), {{"two.gz", upper}});
  EXPECT_EQ(slurp(target() / "two.gz"), two_);
}

TEST_F(DownloadTest, KeepsAGoodFileWithoutFetchingAndReplacesABadOne) {
  fs::create_directories(target());
  spit(target() / "one.bin", one_);
  spit(target() / "two.gz", "stale partial content");
  // one.bin must not be fetched: the server does not have it under this base URL, so a fetch would fail.
  fs::create_directories(served_.path() / "sub");
  spit(served_.path() / "sub" / "two.gz", two_);
  mnist::download_files(server_->url() + "sub/", target().string(),
                        {{"one.bin", md5_of(one_)}, {"two.gz", md5_of(two_)}});
  EXPECT_EQ(slurp(target() / "one.bin"), one_);
  EXPECT_EQ(slurp(target() / "two.gz"), two_);
  EXPECT_EQ(listing(target()), (std::vector<std::string>{"one.bin", "two.gz"}));
}

TEST_F(DownloadTest, ChecksumMismatchLeavesNoFile) {
  const std::string wrong = md5_of("something else");
  expect_failure(server_->url(), {{"one.bin", wrong}},
                 {"checksum mismatch", "one.bin", "expected MD5 " + wrong, "found " + md5_of(one_), "nothing was written"});
  EXPECT_TRUE(listing(target()).empty()) << "left: " << testing::PrintToString(listing(target()));
}

TEST_F(DownloadTest, ChecksumMismatchKeepsTheOldFile) {
  fs::create_directories(target());
  spit(target() / "one.bin", "old");
  expect_failure(server_->url(), {{"one.bin", md5_of("something else")}}, {"checksum mismatch"});
  EXPECT_EQ(slurp(target() / "one.bin"), "old");
  EXPECT_EQ(listing(target()), (std::vector<std::string>{"one.bin"}));
}

TEST_F(DownloadTest, NotFoundNamesTheUrlAndStatus) {
  expect_failure(server_->url(), {{"two.gz", md5_of(two_)}, {"missing.gz", md5_of("x")}},
                 {server_->url() + "missing.gz", "404"});
  // The file before the failure is complete and stays; the missing one leaves nothing.
  EXPECT_EQ(listing(target()), (std::vector<std::string>{"two.gz"}));
}

TEST_F(DownloadTest, ConnectionRefused) {
  const std::string base = "http://127.0.0.1:" + std::to_string(free_port()) + "/";
  expect_failure(base, {{"one.bin", md5_of(one_)}}, {base + "one.bin", "cannot connect", "refused"});
  EXPECT_TRUE(listing(target()).empty());
}

TEST_F(DownloadTest, HttpsGoesThroughCurlOrWget) {
  // Loopback only: an https:// URL to a port nothing listens on; the error must come from the tool.
  const std::string base = "https://127.0.0.1:" + std::to_string(free_port()) + "/";
  try {
    mnist::download_files(base, target().string(), {{"one.bin", md5_of(one_)}});
    ADD_FAILURE() << "download_files succeeded";
  } catch (const minidl::IOError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(base + "one.bin"), std::string::npos) << what;
    EXPECT_TRUE(what.find("curl") != std::string::npos || what.find("wget") != std::string::npos) << what;
  }
  EXPECT_TRUE(listing(target()).empty());
}

TEST(Download, RejectsBadArgumentsBeforeTouchingAnything) {
  TempDir dir;
  const fs::path target = dir.path() / "never";
  const std::string md5 = md5_of("x");
  EXPECT_THROW(mnist::download_files("ftp://127.0.0.1/", target.string(), {{"a", md5}}), minidl::ValueError);
  EXPECT_THROW(mnist::download_files("http://127.0.0.1/", target.string(), {{"a/b", md5}}), minidl::ValueError);
  EXPECT_THROW(mnist::download_files("http://127.0.0.1/", target.string(), {{"..", md5}}), minidl::ValueError);
  EXPECT_THROW(mnist::download_files("http://127.0.0.1/", target.string(), {{"a", "123"}}), minidl::ValueError);
  EXPECT_THROW(mnist::download_files("http://127.0.0.1/", target.string(), {{"a", std::string(32, 'g')}}),
               minidl::ValueError);
  EXPECT_FALSE(fs::exists(target));
}

TEST(Download, MnistFileList) {
  const auto& files = mnist::mnist_files();
  ASSERT_EQ(files.size(), 4u);
  std::vector<std::string> names;
  for (const auto& f : files) {
    names.push_back(f.name);
    EXPECT_EQ(f.md5.size(), 32u);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}));
}

}  // namespace
