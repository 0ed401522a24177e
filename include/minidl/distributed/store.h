#pragma once
// TCPStore: the rendezvous of a distributed job, as in torch.distributed. Rank 0 runs a small key-value server
// (POSIX sockets, one thread per connection); every rank, rank 0 included, talks to it as a client. Ranks use
// it to share the NCCL unique id, for barriers, and to learn that a rank has died: a client connection that
// closes without saying goodbye (the process crashed or was killed) marks its rank dead, and every wait then
// fails naming that rank instead of hanging.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minidl {
namespace distributed {

struct TCPStoreOptions {
  std::string host = "127.0.0.1";  ///< where the server is (clients connect here)
  int port = 0;                    ///< server: 0 picks a free port (see TCPStore::port())
  bool is_server = false;          ///< this process runs the server (rank 0)
  int rank = 0;                    ///< this client's rank, reported to the server
  int world_size = 1;
  /// Connecting (with retries while the server is not up yet), get() and wait(): how long before IOError.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
};

class TCPStore {
 public:
  /// Starts the server (is_server) and connects to it. Throws IOError when the port cannot be bound or the
  /// server is not reachable within the timeout, ValueError for a bad rank / world size / port.
  explicit TCPStore(TCPStoreOptions options);
  /// Says goodbye (a clean exit, not a failure). The server first waits, up to the timeout, for every other
  /// client to leave, so that ranks still finishing do not lose it. Destroyed during exception unwinding, it
  /// leaves without a goodbye, which the others see as this rank dying.
  ~TCPStore();
  TCPStore(const TCPStore&) = delete;
  TCPStore& operator=(const TCPStore&) = delete;

  void set(const std::string& key, const std::vector<std::uint8_t>& value);
  void set(const std::string& key, const std::string& value);
  /// Waits until `key` is set, then returns its value. Throws IOError on timeout or when a rank has died.
  std::vector<std::uint8_t> get(const std::string& key);
  std::string get_string(const std::string& key);
  /// Waits until every key is set (same errors as get()).
  void wait(const std::vector<std::string>& keys);
  /// Adds `delta` to the integer stored at `key` (0 when unset) and returns the new value.
  std::int64_t add(const std::string& key, std::int64_t delta);
  /// Blocks until all world_size clients have called barrier() the same number of times.
  void barrier();
  /// The first rank whose connection closed without a goodbye, or -1. Throws IOError when the server itself
  /// is gone (rank 0 died).
  int dead_rank();

  int port() const;
  const TCPStoreOptions& options() const;

 private:
  struct Server;
  struct Client;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
  TCPStoreOptions options_;
  std::int64_t barrier_count_ = 0;
};

}  // namespace distributed
}  // namespace minidl
