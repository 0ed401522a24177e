#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <minidl/errors.h>

#include <system_error>

extern char** environ;

namespace mnist {

namespace {

std::string reason(int err) { return std::error_code(err, std::generic_category()).message(); }

// The two ends of a pipe, closed on every exit path.
struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (::pipe2(fd, O_CLOEXEC) != 0) throw minidl::IOError("cannot create a pipe: " + reason(errno));
  }
  ~Pipe() {
    close_end(0);
    close_end(1);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

std::optional<ProcessResult> run_process(const std::vector<std::string>& argv, std::size_t max_out) {
  MINIDL_CHECK(!argv.empty(), minidl::ValueError, "run_process: argv is empty");
  Pipe out, err;
  FileActions fa;
  // dup2 clears close-on-exec on the child's copies; the pipes' own descriptors close at exec.
  posix_spawn_file_actions_addopen(&fa.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa.actions, out.fd[1], 1);
  posix_spawn_file_actions_adddup2(&fa.actions, err.fd[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, argv[0].c_str(), &fa.actions, nullptr, args.data(), environ);
  if (rc == ENOENT) return std::nullopt;
  if (rc != 0) throw minidl::IOError("cannot start " + argv[0] + ": " + reason(rc));
  out.close_end(1);
  err.close_end(1);

  ProcessResult result;
  pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  char buffer[65536];
  int open_streams = 2;
  while (open_streams > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::kill(pid, SIGKILL);
      wait_for(pid);
      throw minidl::IOError("reading the output of " + argv[0] + " failed: " + reason(e));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {  // end of stream (or an error, which ends it too)
        fds[i].fd = -1;
        --open_streams;
        continue;
      }
      sinks[i]->append(buffer, static_cast<std::size_t>(n));
      if (i == 0 && result.out.size() > max_out) {
        ::kill(pid, SIGKILL);
        wait_for(pid);
        throw minidl::IOError(argv[0] + " wrote more than " + std::to_string(max_out) +
                              " bytes to its standard output; stopped it");
      }
    }
  }
  const int status = wait_for(pid);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace mnist
