// TCPStore: a key-value server on rank 0 and one blocking client connection per TCPStore object. Requests are
// [u8 op][fields]; strings and blobs are [u32 length][bytes]; integers are little-endian as on every supported
// host (x86-64, aarch64). Replies to get/wait carry a status: found, timed out, or a rank died.
#include "minidl/distributed/store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "minidl/errors.h"

namespace minidl {
namespace distributed {

namespace {

enum Op : std::uint8_t { kHello = 1, kSet, kGet, kAdd, kDeadRank, kBye };
enum Status : std::uint8_t { kFound = 0, kTimedOut = 1, kRankDied = 2 };

using Clock = std::chrono::steady_clock;

/// False when the peer closed the connection or it failed.
bool send_all(int fd, const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);  // no SIGPIPE when the peer is gone
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

bool recv_all(int fd, void* data, std::size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

template <class T>
bool send_pod(int fd, T v) { return send_all(fd, &v, sizeof v); }
template <class T>
bool recv_pod(int fd, T& v) { return recv_all(fd, &v, sizeof v); }

bool send_blob(int fd, const void* data, std::size_t n) {
  return send_pod(fd, static_cast<std::uint32_t>(n)) && send_all(fd, data, n);
}

constexpr std::uint32_t kMaxBlob = 64u << 20;  // far above any key or value the library stores

bool recv_blob(int fd, std::vector<std::uint8_t>& out) {
  std::uint32_t n = 0;
  if (!recv_pod(fd, n) || n > kMaxBlob) return false;
  out.resize(n);
  return recv_all(fd, out.data(), n);
}

std::string as_string(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

}  // namespace

// ---- server -------------------------------------------------------------------------------------------------

struct TCPStore::Server {
  int listen_fd = -1;
  int port = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<std::uint8_t>> data;
  std::vector<int> dead;  // ranks whose connection closed without a goodbye, in that order
  int open_connections = 0;
  std::vector<int> fds;
  std::vector<std::thread> handlers;
  std::thread acceptor;
  std::atomic<bool> stopping{false};

  explicit Server(int requested_port) {
    listen_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    MINIDL_CHECK(listen_fd >= 0, IOError, "TCPStore: socket() failed: ", std::strerror(errno));
    const int one = 1;
    ::setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);  // other machines reach rank 0 through MASTER_ADDR
    addr.sin_port = htons(static_cast<std::uint16_t>(requested_port));
    if (::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd, 128) != 0) {
      const int err = errno;
      ::close(listen_fd);
      throw IOError(detail::str("TCPStore: cannot listen on port ", requested_port, ": ", std::strerror(err),
                                " (MASTER_PORT in use by another job? pick another one)"));
    }
    socklen_t len = sizeof addr;
    ::getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
    acceptor = std::thread([this] { accept_loop(); });
  }

  void accept_loop() {
    while (!stopping) {
      pollfd p{listen_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;  // wakes up regularly to notice stop()
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      std::lock_guard<std::mutex> lock(mu);
      fds.push_back(fd);
      ++open_connections;
      handlers.emplace_back([this, fd] { serve(fd); });
    }
  }

  // One client connection until it says goodbye or closes.
  void serve(int fd) {
    int rank = -1;
    bool bye = false;
    std::uint8_t op = 0;
    while (!bye && recv_pod(fd, op)) {
      bool ok = true;
      std::vector<std::uint8_t> key, value;
      switch (op) {
        case kHello:
          ok = recv_pod(fd, rank);
          break;
        case kSet:
          ok = recv_blob(fd, key) && recv_blob(fd, value);
          if (ok) {
            std::lock_guard<std::mutex> lock(mu);
            data[as_string(key)] = std::move(value);
            cv.notify_all();
          }
          ok = ok && send_pod(fd, std::uint8_t{kFound});
          break;
        case kGet: {
          std::int64_t timeout_ms = 0;
          ok = recv_blob(fd, key) && recv_pod(fd, timeout_ms);
          if (ok) ok = answer_get(fd, as_string(key), std::chrono::milliseconds(timeout_ms));
          break;
        }
        case kAdd: {
          std::int64_t delta = 0, now = 0;
          ok = recv_blob(fd, key) && recv_pod(fd, delta);
          if (ok) {
            std::lock_guard<std::mutex> lock(mu);
            auto& v = data[as_string(key)];
            if (v.size() == sizeof now) std::memcpy(&now, v.data(), sizeof now);
            now += delta;
            v.resize(sizeof now);
            std::memcpy(v.data(), &now, sizeof now);
            cv.notify_all();
          }
          ok = ok && send_pod(fd, now);
          break;
        }
        case kDeadRank: {
          std::int32_t r = -1;
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!dead.empty()) r = dead.front();
          }
          ok = send_pod(fd, r);
          break;
        }
        case kBye:
          bye = true;
          break;
        default:
          ok = false;  // not one of our clients: drop it
      }
      if (!ok) break;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!bye && rank >= 0 && !stopping) dead.push_back(rank);
    --open_connections;
    cv.notify_all();
  }

  bool answer_get(int fd, const std::string& key, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    const bool done = cv.wait_for(lock, timeout, [&] { return data.count(key) || !dead.empty() || stopping; });
    if (done && data.count(key)) {
      const std::vector<std::uint8_t> value = data[key];
      lock.unlock();
      return send_pod(fd, std::uint8_t{kFound}) && send_blob(fd, value.data(), value.size());
    }
    if (!dead.empty()) {
      const std::int32_t r = dead.front();
      lock.unlock();
      return send_pod(fd, std::uint8_t{kRankDied}) && send_pod(fd, r);
    }
    lock.unlock();
    return send_pod(fd, std::uint8_t{kTimedOut});
  }

  /// Waits up to `timeout` for all clients to leave, then closes everything.
  void stop(std::chrono::milliseconds timeout) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, timeout, [&] { return open_connections == 0; });
    }
    stopping = true;
    acceptor.join();
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu);
      for (int fd : fds) ::shutdown(fd, SHUT_RDWR);  // wakes handlers blocked in recv
      cv.notify_all();                                // and those waiting in a get
      threads.swap(handlers);
    }
    for (auto& t : threads) t.join();
    for (int fd : fds) ::close(fd);
    ::close(listen_fd);
  }
};

// ---- client -------------------------------------------------------------------------------------------------

struct TCPStore::Client {
  int fd = -1;
  std::string where;  // "host:port", for messages
  std::mutex mu;      // one request at a time on this connection

  Client(const TCPStoreOptions& o) : where(o.host + ":" + std::to_string(o.port)) {
    const auto deadline = Clock::now() + o.timeout;
    std::string last_error = "no attempt";
    auto pause = std::chrono::milliseconds(20);
    while (true) {
      fd = try_connect(o.host, o.port, last_error);
      if (fd >= 0) break;
      MINIDL_CHECK(Clock::now() < deadline, IOError, "TCPStore: rank ", o.rank, " could not reach the rendezvous "
                   "store at ", where, " within ", o.timeout.count(), " ms (last error: ", last_error,
                   "); is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?");
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(500));
    }
    const std::int32_t rank = o.rank;
    check(send_pod(fd, kHello) && send_pod(fd, rank), "hello");
  }

  /// Closes the connection; with `goodbye` as a clean exit, without as a failure of this rank.
  void leave(bool goodbye) {
    std::lock_guard<std::mutex> lock(mu);
    if (goodbye) (void)send_pod(fd, kBye);
    ::close(fd);
  }

  static int try_connect(const std::string& host, int port, std::string& error) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0) {
      error = std::string("cannot resolve host: ") + ::gai_strerror(rc);
      return -1;
    }
    int fd = -1;
    for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        error = std::strerror(errno);
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(res);
    if (fd >= 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return fd;
  }

  void check(bool ok, const char* what) const {
    MINIDL_CHECK(ok, IOError, "TCPStore: lost the connection to the rendezvous store at ", where, " during ", what,
                 ": rank 0 (which runs the store) has exited or died");
  }
};

// ---- TCPStore -----------------------------------------------------------------------------------------------

TCPStore::TCPStore(TCPStoreOptions options) : options_(std::move(options)) {
  MINIDL_CHECK(options_.world_size >= 1, ValueError, "TCPStore: world_size must be >= 1, found ", options_.world_size);
  MINIDL_CHECK(options_.rank >= 0 && options_.rank < options_.world_size, ValueError, "TCPStore: rank must be in [0, ",
               options_.world_size, "), found ", options_.rank);
  MINIDL_CHECK(options_.port >= 0 && options_.port <= 65535, ValueError, "TCPStore: port must be in [0, 65535], "
               "found ", options_.port);
  MINIDL_CHECK(options_.is_server || options_.port > 0, ValueError, "TCPStore: a client needs the server's port "
               "(found 0)");
  if (options_.is_server) {
    server_ = std::make_unique<Server>(options_.port);
    options_.port = server_->port;
  }
  try {
    client_ = std::make_unique<Client>(options_);
  } catch (...) {
    if (server_) server_->stop(std::chrono::milliseconds(0));
    throw;
  }
}

TCPStore::~TCPStore() {
  // Destroyed while an exception unwinds: this rank is failing, so it leaves without a goodbye (the other ranks
  // then stop instead of waiting for it in a collective), and the server does not wait for them.
  const bool failing = std::uncaught_exceptions() > 0;
  client_->leave(!failing);
  if (server_) server_->stop(failing ? std::chrono::milliseconds(0) : options_.timeout);
}

int TCPStore::port() const { return options_.port; }
const TCPStoreOptions& TCPStore::options() const { return options_; }

void TCPStore::set(const std::string& key, const std::vector<std::uint8_t>& value) {
  Client& c = *client_;
  std::lock_guard<std::mutex> lock(c.mu);
  std::uint8_t status = 0;
  c.check(send_pod(c.fd, kSet) && send_blob(c.fd, key.data(), key.size()) &&
              send_blob(c.fd, value.data(), value.size()) && recv_pod(c.fd, status),
          "set");
}

void TCPStore::set(const std::string& key, const std::string& value) {
  set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
}

std::vector<std::uint8_t> TCPStore::get(const std::string& key) {
  Client& c = *client_;
  std::lock_guard<std::mutex> lock(c.mu);
  const std::int64_t timeout_ms = options_.timeout.count();
  std::uint8_t status = 0;
  c.check(send_pod(c.fd, kGet) && send_blob(c.fd, key.data(), key.size()) && send_pod(c.fd, timeout_ms) &&
              recv_pod(c.fd, status),
          "get");
  if (status == kRankDied) {
    std::int32_t r = -1;
    c.check(recv_pod(c.fd, r), "get");
    throw IOError(detail::str("TCPStore: rank ", r, " died (its connection to the store closed without a goodbye) "
                              "while rank ", options_.rank, " waited for key \"", key, "\""));
  }
  MINIDL_CHECK(status == kFound, IOError, "TCPStore: rank ", options_.rank, " timed out after ", timeout_ms,
               " ms waiting for key \"", key, "\" (a rank did not arrive; raise the timeout or check the other ranks)");
  std::vector<std::uint8_t> value;
  c.check(recv_blob(c.fd, value), "get");
  return value;
}

std::string TCPStore::get_string(const std::string& key) { return as_string(get(key)); }

void TCPStore::wait(const std::vector<std::string>& keys) {
  for (const auto& k : keys) (void)get(k);
}

std::int64_t TCPStore::add(const std::string& key, std::int64_t delta) {
  Client& c = *client_;
  std::lock_guard<std::mutex> lock(c.mu);
  std::int64_t now = 0;
  c.check(send_pod(c.fd, kAdd) && send_blob(c.fd, key.data(), key.size()) && send_pod(c.fd, delta) &&
              recv_pod(c.fd, now),
          "add");
  return now;
}

void TCPStore::barrier() {
  const std::string key = "minidl/barrier/" + std::to_string(++barrier_count_);
  if (add(key, 1) == options_.world_size) set(key + "/done", std::string("1"));
  (void)get(key + "/done");
}

int TCPStore::dead_rank() {
  Client& c = *client_;
  std::lock_guard<std::mutex> lock(c.mu);
  std::int32_t r = -1;
  c.check(send_pod(c.fd, kDeadRank) && recv_pod(c.fd, r), "a health check");
  return r;
}

}  // namespace distributed
}  // namespace minidl
