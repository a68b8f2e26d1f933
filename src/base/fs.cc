#include "base/fs.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

namespace brine::base {

void ensure_dir(const std::string& path, mode_t mode, const std::string& option) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      throw error(option + " " + path + " exists but is not a directory; point " + option +
                  " at a directory");
    }
    return;
  }
  if (::mkdir(path.c_str(), mode) != 0) {
    int err = errno;
    // Another process created it between our stat and mkdir.
    if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
    if (err == ENOENT) {
      throw error(option + " " + path + ": parent directory does not exist; create it or set " +
                  option + " to a path whose parent exists");
    }
    throw error(option + " " + path + ": cannot create directory: " + std::strerror(err));
  }
}

void write_file_atomic(const std::string& path, const std::string& data, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw error(path + ": cannot write: " + std::strerror(errno));
  ::fchmod(fd, mode);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw error(path + ": cannot write: " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // A failed fsync or close means the data may not be on disk: report it
  // rather than rename a damaged file over a good one.
  int err = ::fsync(fd) != 0 ? errno : 0;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw error(path + ": cannot write: " + std::strerror(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw error(path + ": cannot rename into place: " + std::strerror(err));
  }
}

std::string read_file(const std::string& path) {
  // Not std::ifstream: it opens a directory without complaint and then reads
  // nothing, and it does not promise errno.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw error(path + ": cannot read: " + std::strerror(errno));
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw error(path + ": cannot read: " + std::strerror(err));
    }
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void require_private(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw error(path + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    throw error(path + " has mode " + mode +
                ", readable by group or others; a private key must be 0600: chmod 600 " + path);
  }
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace brine::base
