#include "cli/api_client.h"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/error.h"

namespace brine::cli {

std::optional<api_client> api_client::connect(const std::string& sock_dir) {
  std::string path = sock_dir + "/master.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    throw base::error("sock_dir " + sock_dir + " is too long for a Unix socket path; shorten it");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw base::error(std::string("cannot create a socket: ") + std::strerror(errno));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    ::close(fd);
    if (err == ENOENT || err == ECONNREFUSED) return std::nullopt;
    if (err == EACCES) {
      throw base::error("permission denied on " + path +
                        ": run as the user the master runs as (or root)");
    }
    throw base::error("cannot connect to " + path + ": " + std::strerror(err));
  }
  return api_client(fd, path);
}

api_client::api_client(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

api_client::api_client(api_client&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      next_id_(other.next_id_),
      last_id_(other.last_id_),
      decoder_(std::move(other.decoder_)) {}

api_client::~api_client() {
  if (fd_ >= 0) ::close(fd_);
}

void api_client::send(const proto::message& m) {
  auto bytes = proto::encode_frame(m);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw base::error("lost the master at " + path_ + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
}

nlohmann::json api_client::request(const std::string& op, nlohmann::json body,
                                   std::chrono::milliseconds timeout) {
  body["op"] = op;
  last_id_ = next_id_++;
  send({proto::msg_type::api_request, last_id_, std::move(body)});
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto m = read(deadline);  // not next(): what is pending is not the reply
    if (!m) {
      throw base::error("the master did not answer '" + op + "' within " +
                        std::to_string(std::chrono::ceil<std::chrono::seconds>(timeout).count()) +
                        " s");
    }
    if (m->type == proto::msg_type::api_reply && m->id == last_id_) return std::move(m->body);
    if (m->type == proto::msg_type::error) {
      throw base::error("the master refused the request: " + m->body.value("message", "?"));
    }
    // An event of an earlier request (a job's returns while the next batch
    // is published): kept for next().
    pending_.push_back(std::move(*m));
  }
}

std::optional<proto::message> api_client::next(std::chrono::steady_clock::time_point deadline) {
  if (!pending_.empty()) {
    proto::message first = std::move(pending_.front());
    pending_.pop_front();
    return first;
  }
  return read(deadline);
}

std::optional<proto::message> api_client::read(std::chrono::steady_clock::time_point deadline) {
  proto::message m;
  for (;;) {
    auto st = decoder_.next(m);
    if (st == proto::frame_decoder::status::ready) return m;
    if (st == proto::frame_decoder::status::error) {
      throw base::error("bad reply from the master: " + decoder_.error_detail());
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(std::min<long>(left.count(), 1000000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    uint8_t buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw base::error("the master closed the connection (" + path_ + ")");
    decoder_.feed({buf, static_cast<size_t>(n)});
  }
}

}  // namespace brine::cli
