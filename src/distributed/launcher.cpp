// The local launcher: fork + execvpe per rank, a polling wait that notices the first failure, and signal
// forwarding. Each rank runs in its own process group, so a Ctrl-C at the terminal reaches the launcher only
// and is forwarded once, and stopping a rank also stops the processes it started.
#include "minidl/distributed/launcher.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "minidl/errors.h"

extern char** environ;

namespace minidl {
namespace distributed {

namespace {

constexpr int kMaxRanks = 1024;
// What the signal handler needs: plain data only (it may run at any moment).
pid_t g_children[kMaxRanks];
volatile std::sig_atomic_t g_num_children = 0;

void forward_signal(int sig) {
  for (int i = 0; i < g_num_children; ++i) {
    if (g_children[i] > 0) ::kill(-g_children[i], sig);
  }
}

/// Installs the forwarding handler for SIGINT and SIGTERM for its lifetime.
class SignalForwarding {
 public:
  SignalForwarding() {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalForwarding() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_num_children = 0;
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

std::vector<std::string> child_environment(const LaunchOptions& o, int rank, int port) {
  const std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(rank)},           {"LOCAL_RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(o.nproc)},  {"LOCAL_WORLD_SIZE", std::to_string(o.nproc)},
      {"MASTER_ADDR", o.master_addr},           {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    bool replaced = false;
    for (const auto& [k, v] : ours) replaced = replaced || kv.compare(0, k.size() + 1, k + "=") == 0;
    if (!replaced) env.push_back(kv);
  }
  for (const auto& [k, v] : ours) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int exit_status(int wstatus) {
  if (WIFEXITED(wstatus)) return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus)) return 128 + WTERMSIG(wstatus);
  return 1;
}

}  // namespace

int find_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MINIDL_CHECK(fd >= 0, IOError, "find_free_port: socket() failed: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  MINIDL_CHECK(ok, IOError, "find_free_port: cannot bind a port on 127.0.0.1: ", std::strerror(err));
  return ntohs(addr.sin_port);
}

std::string self_executable() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

int launch(const LaunchOptions& o) {
  MINIDL_CHECK(o.nproc >= 1 && o.nproc <= kMaxRanks, ValueError, "launch: nproc must be in [1, ", kMaxRanks,
               "], found ", o.nproc);
  MINIDL_CHECK(!o.argv.empty() && !o.argv[0].empty(), ValueError, "launch: no program to run");
  MINIDL_CHECK(o.master_port >= 0 && o.master_port <= 65535, ValueError, "launch: master_port must be in [0, 65535], "
               "found ", o.master_port);
  const int port = o.master_port > 0 ? o.master_port : find_free_port();
  const pid_t launcher = ::getpid();

  SignalForwarding forwarding;
  std::vector<pid_t> pids(static_cast<std::size_t>(o.nproc), -1);
  std::vector<bool> running(pids.size(), false);
  int failed_rank = -1, failed_status = 0;
  std::chrono::steady_clock::time_point kill_at{};

  const auto stop_all = [&](int sig) {
    for (std::size_t r = 0; r < pids.size(); ++r) {
      if (running[r]) ::kill(-pids[r], sig);
    }
  };

  for (int rank = 0; rank < o.nproc; ++rank) {
    // Everything the child needs is built before fork(): only async-signal-safe calls happen in between.
    std::vector<std::string> env = child_environment(o, rank, port), args = o.argv;
    std::vector<char*> envp = c_strings(env), argvp = c_strings(args);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int err = errno;
      stop_all(SIGKILL);
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (running[r]) ::waitpid(pids[r], nullptr, 0);
      }
      throw IOError(detail::str("launch: cannot start rank ", rank, ": fork failed: ", std::strerror(err)));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the ranks do not outlive a killed launcher
      if (::getppid() != launcher) ::_exit(1);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigaction(SIGINT, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      ::execvpe(argvp[0], argvp.data(), envp.data());
      const char* msg = "minidl run: cannot execute the program: ";
      (void)!::write(2, msg, std::strlen(msg));
      (void)!::write(2, argvp[0], std::strlen(argvp[0]));
      (void)!::write(2, "\n", 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here, so the group exists before any signal is forwarded to it
    pids[static_cast<std::size_t>(rank)] = pid;
    running[static_cast<std::size_t>(rank)] = true;
    g_children[rank] = pid;
    g_num_children = rank + 1;
  }

  int alive = o.nproc;
  while (alive > 0) {
    int wstatus = 0;
    const pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
    if (pid < 0 && errno != EINTR) break;  // no children left
    if (pid <= 0) {
      if (failed_rank >= 0 && std::chrono::steady_clock::now() >= kill_at) {
        stop_all(SIGKILL);
        kill_at = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    for (std::size_t r = 0; r < pids.size(); ++r) {
      if (pids[r] != pid || !running[r]) continue;
      running[r] = false;
      g_children[r] = -1;
      --alive;
      const int status = exit_status(wstatus);
      if (status != 0 && failed_rank < 0) {
        failed_rank = static_cast<int>(r);
        failed_status = status;
        std::fprintf(stderr, "minidl run: rank %d (pid %d) exited with status %d%s\n", failed_rank,
                     static_cast<int>(pid), status, alive > 0 ? "; stopping the other ranks" : "");
        std::fflush(stderr);
        stop_all(SIGTERM);
        kill_at = std::chrono::steady_clock::now() + o.grace;
      }
    }
  }
  return failed_rank >= 0 ? failed_status : 0;
}

}  // namespace distributed
}  // namespace minidl
