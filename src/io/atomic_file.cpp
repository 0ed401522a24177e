#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "minidl/errors.h"

namespace minidl::io {
namespace {

// std::strerror may share a static buffer between threads; the error_code message does not.
std::string reason(int err) { return std::error_code(err, std::generic_category()).message(); }

std::string parent_directory(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes the descriptor on every exit path; close() errors matter only after writing and are checked there.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  /// Closes now and returns 0 or the errno of close().
  int close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

// Returns 0 or the errno of the failing write(); write() may store fewer bytes than asked.
int write_all(int fd, const std::uint8_t* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

// Returns 0 or the errno of the step that failed.
int write_synced(const std::string& tmp, const void* data, std::size_t size, const char** step) {
  *step = "creating";
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (fd.get() < 0) return errno;
  *step = "writing";
  if (const int err = write_all(fd.get(), static_cast<const std::uint8_t*>(data), size)) return err;
  *step = "syncing";
  if (::fsync(fd.get()) != 0) return errno;
  *step = "closing";
  return fd.close();
}

}  // namespace

void atomic_write_file(const std::string& path, const void* data, std::size_t size) {
  // pid + counter keep concurrent writers (threads or processes) of the same target off each other's file.
  static std::atomic<std::uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);

  const char* step = "";
  int err = write_synced(tmp, data, size, &step);
  if (err == 0 && ::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    step = "renaming";
  }
  if (err != 0) {
    ::unlink(tmp.c_str());  // may not exist (creation failed); nothing more to do either way
    throw IOError(detail::str("atomic_write_file: cannot write '", path, "' (", step, " temporary file '", tmp,
                              "'): ", reason(err)));
  }

  // Without this the rename may be lost on power failure even though the data blocks are on disk.
  const std::string dir = parent_directory(path);
  FileDescriptor dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  // Some filesystems cannot sync a directory and say EINVAL; the new file is complete and in place regardless.
  if (dir_fd.get() < 0 || (::fsync(dir_fd.get()) != 0 && errno != EINVAL)) {
    throw IOError(detail::str("atomic_write_file: wrote '", path, "' but cannot sync its directory '", dir,
                              "': ", reason(errno)));
  }
}

std::vector<std::uint8_t> read_whole_file(const std::string& path) {
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw IOError(detail::str("read_whole_file: cannot open '", path, "': ", reason(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw IOError(detail::str("read_whole_file: cannot stat '", path, "': ", reason(errno)));
  }
  // One byte beyond the reported size lets the end-of-file read happen without growing the buffer; the size
  // is only a hint (the file may change, or not be a regular file at all).
  std::vector<std::uint8_t> bytes(S_ISREG(st.st_mode) ? static_cast<std::size_t>(st.st_size) + 1 : 4096);
  std::size_t used = 0;
  for (;;) {
    if (used == bytes.size()) bytes.resize(bytes.size() * 2);
    const ssize_t n = ::read(fd.get(), bytes.data() + used, bytes.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw IOError(detail::str("read_whole_file: cannot read '", path, "': ", reason(errno)));
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  bytes.resize(used);
  return bytes;
}

}  // namespace minidl::io
