#include "http_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <minidl/errors.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <system_error>
#include <vector>

namespace mnist {

namespace {

// std::strerror may share a static buffer between threads; the error_code message does not.
std::string reason(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

// Limits on what a server may send before the body: they bound memory against a broken or hostile peer.
constexpr std::size_t kMaxLine = 8192;
constexpr std::size_t kMaxHeaderBytes = 65536;

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

/// Buffered reads from the socket, with the error messages every read shares.
class Reader {
 public:
  Reader(int fd, const std::string& url) : fd_(fd), url_(url), buffer_(65536) {}

  /// A line without its CRLF (or bare LF). Throws when the connection ends first or the line is too long.
  std::string line(const char* what) {
    std::string out;
    for (;;) {
      if (pos_ == end_ && !fill()) {
        throw minidl::IOError("GET " + url_ + ": the connection closed in the middle of the " + what);
      }
      const char c = buffer_[pos_++];
      if (c == '\n') break;
      out += c;
      if (out.size() > kMaxLine) {
        throw minidl::IOError("GET " + url_ + ": malformed response: " + what + " longer than " +
                              std::to_string(kMaxLine) + " bytes");
      }
    }
    if (!out.empty() && out.back() == '\r') out.pop_back();
    consumed_ += out.size() + 2;
    return out;
  }
  /// Header bytes read so far (for the size limit).
  std::size_t consumed() const { return consumed_; }

  /// Passes exactly `n` bytes to `sink`; `*delivered` counts them, for the error message of a short body.
  void exact(std::uint64_t n, const BodySink& sink, std::uint64_t* delivered, std::uint64_t expected) {
    while (n > 0) {
      if (pos_ == end_ && !fill()) {
        throw minidl::IOError("GET " + url_ + ": the connection closed after " + std::to_string(*delivered) + " of " +
                              std::to_string(expected) + " body bytes");
      }
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, end_ - pos_));
      sink(buffer_.data() + pos_, take);
      pos_ += take;
      n -= take;
      *delivered += take;
    }
  }

  /// Passes everything up to the end of the connection to `sink`.
  void to_end(const BodySink& sink) {
    while (pos_ < end_ || fill()) {
      sink(buffer_.data() + pos_, end_ - pos_);
      pos_ = end_;
    }
  }

 private:
  /// Reads more; false at the end of the connection.
  bool fill() {
    for (;;) {
      const ssize_t n = ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      if (n > 0) {
        pos_ = 0;
        end_ = static_cast<std::size_t>(n);
        return true;
      }
      if (n == 0) return false;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        throw minidl::IOError("GET " + url_ + ": timed out waiting for the server to send more data");
      }
      throw minidl::IOError("GET " + url_ + ": reading from the connection failed: " + reason(errno));
    }
  }

  int fd_;
  const std::string& url_;
  std::vector<char> buffer_;
  std::size_t pos_ = 0, end_ = 0, consumed_ = 0;
};

struct Response {
  int status = 0;
  std::string status_line;
  std::vector<std::pair<std::string, std::string>> headers;  // names lowercased, values trimmed

  std::vector<std::string> values(const std::string& name) const {
    std::vector<std::string> out;
    for (const auto& [n, v] : headers) {
      if (n == name) out.push_back(v);
    }
    return out;
  }
};

Response read_head(Reader& in, const std::string& url) {
  Response r;
  r.status_line = in.line("status line");
  const std::string& s = r.status_line;
  if (s.rfind("HTTP/1.", 0) != 0 || s.size() < 12 || s[8] != ' ' || !all_digits(s.substr(9, 3)) ||
      (s.size() > 12 && s[12] != ' ')) {
    throw minidl::IOError("GET " + url + ": malformed response: expected a status line \"HTTP/1.x NNN reason\", found \"" +
                          s.substr(0, 80) + "\"");
  }
  r.status = std::stoi(s.substr(9, 3));
  for (;;) {
    const std::string line = in.line("response headers");
    if (line.empty()) break;
    if (in.consumed() > kMaxHeaderBytes) {
      throw minidl::IOError("GET " + url + ": malformed response: headers longer than " +
                            std::to_string(kMaxHeaderBytes) + " bytes");
    }
    const auto colon = line.find(':');
    if (colon == std::string::npos || colon == 0) {
      throw minidl::IOError("GET " + url + ": malformed response: header line without a name and a colon: \"" +
                            line.substr(0, 80) + "\"");
    }
    r.headers.emplace_back(lowercase(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return r;
}

std::uint64_t parse_content_length(const Response& r, const std::string& url) {
  const std::vector<std::string> values = r.values("content-length");
  for (const std::string& v : values) {
    // 18 digits stay below 2^63; a file that large is not a dataset mirror's.
    if (!all_digits(v) || v.size() > 18 || v != values.front()) {
      throw minidl::IOError("GET " + url + ": malformed response: Content-Length \"" + v +
                            "\" is not one non-negative decimal number");
    }
  }
  return std::stoull(values.front());
}

void read_chunked(Reader& in, const std::string& url, const BodySink& sink) {
  std::uint64_t delivered = 0;
  for (;;) {
    const std::string line = in.line("chunk size line");
    const std::string hex = trim(line.substr(0, line.find(';')));  // chunk extensions are ignored
    if (hex.empty() || hex.size() > 15 ||
        !std::all_of(hex.begin(), hex.end(), [](unsigned char c) { return std::isxdigit(c) != 0; })) {
      throw minidl::IOError("GET " + url + ": malformed chunked body: expected a hexadecimal chunk size, found \"" +
                            line.substr(0, 80) + "\"");
    }
    const std::uint64_t size = std::stoull(hex, nullptr, 16);
    if (size == 0) break;
    in.exact(size, sink, &delivered, delivered + size);
    if (!in.line("chunk terminator").empty()) {
      throw minidl::IOError("GET " + url + ": malformed chunked body: chunk of " + std::to_string(size) +
                            " bytes not followed by CRLF");
    }
  }
  while (!in.line("chunked trailer").empty()) {
    if (in.consumed() > kMaxHeaderBytes) {
      throw minidl::IOError("GET " + url + ": malformed response: chunked trailer longer than " +
                            std::to_string(kMaxHeaderBytes) + " bytes");
    }
  }
}

/// Connects to the first address of the host that accepts within `timeout_s`.
int connect_to(const Url& u, const std::string& url, int timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(u.host.c_str(), u.port.c_str(), &hints, &found);
  if (rc != 0) {
    throw minidl::IOError("GET " + url + ": cannot resolve host \"" + u.host + "\": " +
                          (rc == EAI_SYSTEM ? reason(errno) : std::string(::gai_strerror(rc))));
  }
  const std::unique_ptr<addrinfo, void (*)(addrinfo*)> addresses(found, ::freeaddrinfo);
  std::string failures;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) {
      // Non-blocking connect + poll: a blocking connect to an unreachable host can hang for minutes.
      const int flags = ::fcntl(fd, F_GETFL);
      ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        int ready;
        while ((ready = ::poll(&p, 1, timeout_s * 1000)) < 0 && errno == EINTR) {
        }
        socklen_t len = sizeof err;
        if (ready == 0) {
          err = ETIMEDOUT;
        } else if (ready < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          err = errno;
        }
      }
      if (err == 0) {
        ::fcntl(fd, F_SETFL, flags);
        const timeval tv{timeout_s, 0};  // reads and writes that stall this long fail with EAGAIN
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        return fd;
      }
      ::close(fd);
    }
    char host[NI_MAXHOST] = "?";
    ::getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
    failures += std::string(failures.empty() ? "" : "; ") + host + ": " + reason(err);
  }
  throw minidl::IOError("GET " + url + ": cannot connect to " + u.host + " port " + u.port + " (" + failures + ")");
}

void send_all(int fd, const std::string& data, const std::string& url) {
  std::size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw minidl::IOError("GET " + url + ": sending the request failed: " + reason(errno));
    }
    sent += static_cast<std::size_t>(n);
  }
}

}  // namespace

Url parse_url(const std::string& url) {
  const auto fail = [&](const std::string& why) {
    return minidl::ValueError("URL \"" + url + "\": " + why);
  };
  const auto sep = url.find("://");
  if (sep == std::string::npos) throw fail("expected http://HOST[:PORT]/PATH or https://...");
  Url u;
  u.scheme = lowercase(url.substr(0, sep));
  if (u.scheme != "http" && u.scheme != "https") throw fail("unsupported scheme \"" + u.scheme + "\" (expected http or https)");
  if (url.find_first_of(" \t\r\n") != std::string::npos) throw fail("contains white space");
  const std::string rest = url.substr(sep + 3);
  const auto slash = rest.find_first_of("/?#");
  const std::string authority = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  if (u.target[0] == '?') u.target = "/" + u.target;
  if (u.target.find('#') != std::string::npos) throw fail("fragments (#...) are not supported");
  if (authority.find('@') != std::string::npos) throw fail("user names and passwords are not supported");
  std::string port;
  if (!authority.empty() && authority[0] == '[') {  // IPv6 literal: [addr]:port
    const auto close = authority.find(']');
    if (close == std::string::npos) throw fail("unterminated IPv6 address (missing ']')");
    u.host = authority.substr(1, close - 1);
    const std::string after = authority.substr(close + 1);
    if (!after.empty() && after[0] != ':') throw fail("unexpected text after the IPv6 address");
    if (!after.empty()) port = after.substr(1);
  } else {
    const auto colon = authority.find(':');
    u.host = authority.substr(0, colon);
    if (colon != std::string::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) throw fail("no host name");
  if (port.empty()) {
    u.port = u.scheme == "http" ? "80" : "443";
  } else {
    if (!all_digits(port) || port.size() > 5 || std::stoi(port) < 1 || std::stoi(port) > 65535) {
      throw fail("port \"" + port + "\" is not a number from 1 to 65535");
    }
    u.port = port;
  }
  return u;
}

void read_http_response(int fd, const std::string& url, const BodySink& sink) {
  Reader in(fd, url);
  Response r = read_head(in, url);
  while (r.status / 100 == 1) r = read_head(in, url);  // interim responses (100 Continue) precede the real one
  if (r.status != 200) {
    std::string message = "GET " + url + ": the server answered \"" + r.status_line.substr(9) + "\"";
    const std::vector<std::string> location = r.values("location");
    if (r.status / 100 == 3 && !location.empty()) message += " (a redirect to " + location.front() + ", not followed)";
    throw minidl::IOError(message);
  }
  for (const std::string& coding : r.values("content-encoding")) {
    if (lowercase(coding) != "identity") {
      throw minidl::IOError("GET " + url + ": unsupported Content-Encoding \"" + coding + "\" (requested identity)");
    }
  }
  const std::vector<std::string> transfer = r.values("transfer-encoding");
  if (!transfer.empty()) {
    if (transfer.size() != 1 || lowercase(transfer.front()) != "chunked") {
      throw minidl::IOError("GET " + url + ": unsupported Transfer-Encoding \"" + transfer.back() +
                            "\" (only chunked is understood)");
    }
    read_chunked(in, url, sink);
  } else if (!r.values("content-length").empty()) {
    const std::uint64_t length = parse_content_length(r, url);
    std::uint64_t delivered = 0;
    in.exact(length, sink, &delivered, length);
  } else {
    in.to_end(sink);  // HTTP/1.0 style: the body ends with the connection
  }
}

void http_get(const std::string& url, const BodySink& sink, int timeout_s) {
  const Url u = parse_url(url);
  if (u.scheme != "http") throw minidl::ValueError("http_get: URL \"" + url + "\": only http:// is supported");
  MINIDL_CHECK(timeout_s >= 1, minidl::ValueError, "http_get: timeout_s must be >= 1, found ", timeout_s);
  const Socket socket(connect_to(u, url, timeout_s));
  const bool default_port = u.port == "80";
  const std::string host = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
  send_all(socket.get(),
           "GET " + u.target + " HTTP/1.1\r\nHost: " + host + (default_port ? "" : ":" + u.port) +
               "\r\nUser-Agent: minidl-mnist\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n",
           url);
  read_http_response(socket.get(), url, sink);
}

}  // namespace mnist
