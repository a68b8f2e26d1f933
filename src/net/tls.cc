#include "net/tls.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>

#include <asio/redirect_error.hpp>
#include <asio/use_awaitable.hpp>

#include "base/error.h"

namespace brine::net {
namespace {

// Identity is checked after the handshake by fingerprint; the chain itself
// carries no trust, so every certificate passes here.
int accept_any_certificate(int, X509_STORE_CTX*) { return 1; }

// One scratch buffer per thread: read bytes go straight into the connection's
// frame decoder, so idle connections hold no read buffer of their own.
constexpr size_t k_scratch = 16 * 1024;
uint8_t* scratch() {
  thread_local uint8_t buf[k_scratch];
  return buf;
}

}  // namespace

tls_context::tls_context(role r)
    : ctx_(SSL_CTX_new(r == role::server ? TLS_server_method() : TLS_client_method())) {
  if (!ctx_) throw base::error("cannot create TLS context: " + pki::openssl_error());
  SSL_CTX* c = ctx_.get();
  SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION);
  SSL_CTX_set_mode(c, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                          SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // One read(2) takes whatever has arrived, instead of one for each record's
  // 5-byte header and one for its body. Reads drain until WANT_READ, so
  // nothing read ahead waits unseen.
  SSL_CTX_set_read_ahead(c, 1);
  // A peer that vanishes without close_notify is a disconnect, not an attack:
  // frames carry their own lengths, so truncation is still detected.
  SSL_CTX_set_options(c, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(c, 0);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                     accept_any_certificate);
}

tls_context::tls_context(role r, const pki::keypair& identity, const std::string& name)
    : tls_context(r) {
  auto cert = identity.self_signed_cert(name);
  if (SSL_CTX_use_certificate(ctx_.get(), cert.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx_.get(), identity.get()) != 1) {
    throw base::error("cannot load identity into TLS context: " + pki::openssl_error());
  }
}

tls_stream::tls_stream(asio::ip::tcp::socket socket, const tls_context& ctx,
                       tls_context::role role, const tls_identity* identity)
    : socket_(std::move(socket)), ssl_(SSL_new(ctx.get())), peer_(endpoint_string(socket_)) {
  if (!ssl_) throw base::error("cannot create TLS session: " + pki::openssl_error());
  if (identity && (SSL_use_certificate(ssl_, identity->cert.get()) != 1 ||
                   SSL_use_PrivateKey(ssl_, identity->key->get()) != 1)) {
    SSL_free(ssl_);
    throw base::error("cannot use identity for a TLS session: " + pki::openssl_error());
  }
  std::error_code ec;
  socket_.non_blocking(true, ec);
  SSL_set_fd(ssl_, static_cast<int>(socket_.native_handle()));
  if (role == tls_context::role::server) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

tls_stream::~tls_stream() { SSL_free(ssl_); }

asio::awaitable<size_t> tls_stream::drive(op o, const uint8_t* out, size_t out_len,
                                          proto::frame_decoder* decoder, std::error_code& ec) {
  for (;;) {
    if (!socket_.is_open()) {
      ec = asio::error::operation_aborted;
      co_return 0;
    }
    ERR_clear_error();
    errno = 0;
    int r = 0;
    size_t n = 0;
    switch (o) {
      case op::handshake:
        r = SSL_do_handshake(ssl_);
        n = 1;
        break;
      case op::read:
        r = SSL_read_ex(ssl_, scratch(), k_scratch, &n);
        if (r > 0) decoder->feed({scratch(), n});
        break;
      case op::write:
        r = SSL_write_ex(ssl_, out, out_len, &n);
        break;
    }
    if (r > 0) co_return n;
    int want = 0;
    if (failed(o, r, ec, &want)) co_return 0;
    co_await socket_.async_wait(want == SSL_ERROR_WANT_READ ? asio::ip::tcp::socket::wait_read
                                                            : asio::ip::tcp::socket::wait_write,
                                asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      error_ = ec.message();
      co_return 0;
    }
  }
}

bool tls_stream::failed(op o, int ret, std::error_code& ec, int* want) {
  int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    *want = err;
    return false;
  }
  if (err == SSL_ERROR_ZERO_RETURN) {
    // Its close_notify: said, so that a handshake's failure has a reason.
    error_ = o == op::handshake ? "the peer closed the connection during the handshake"
                                : "the peer closed the connection";
    ec = base::errc::peer_closed;
  } else if (err == SSL_ERROR_SYSCALL) {
    int sys = errno;
    std::string ossl = ERR_peek_error() ? pki::openssl_error() : "";
    error_ = !ossl.empty() ? ossl : sys != 0 ? std::strerror(sys) : "connection closed by peer";
    // A peer that went away (even mid-handshake, as a client that gave up
    // waiting in an auth storm does) is not a peer that misbehaved.
    bool gone = ossl.empty() && (sys == 0 || sys == ECONNRESET || sys == EPIPE);
    ec = o == op::handshake && !gone ? std::error_code(base::errc::tls_handshake_failed)
                                     : std::error_code(base::errc::peer_closed);
  } else {
    error_ = pki::openssl_error();
    ec = o == op::handshake ? base::errc::tls_handshake_failed : base::errc::protocol_violation;
  }
  return true;
}

size_t tls_stream::try_write(std::span<const uint8_t> bytes, std::error_code& ec) {
  size_t done = 0;
  while (done < bytes.size() && socket_.is_open()) {
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int r = SSL_write_ex(ssl_, bytes.data() + done, bytes.size() - done, &n);
    if (r <= 0) {
      int want = 0;
      failed(op::write, r, ec, &want);
      return done;
    }
    done += n;
  }
  return done;
}

asio::awaitable<std::error_code> tls_stream::handshake() {
  std::error_code ec;
  co_await drive(op::handshake, nullptr, 0, nullptr, ec);
  co_return ec;
}

EVP_PKEY* tls_stream::peer_key() const {
  X509* cert = SSL_get0_peer_certificate(ssl_);
  return cert ? X509_get0_pubkey(cert) : nullptr;
}

asio::awaitable<std::error_code> tls_stream::read_into(proto::frame_decoder& decoder) {
  std::error_code ec;
  co_await drive(op::read, nullptr, 0, &decoder, ec);
  co_return ec;
}

asio::awaitable<std::error_code> tls_stream::write_all(std::span<const uint8_t> bytes) {
  std::error_code ec;
  size_t done = 0;
  while (done < bytes.size()) {
    size_t n = co_await drive(op::write, bytes.data() + done, bytes.size() - done, nullptr, ec);
    if (ec) co_return ec;
    done += n;
  }
  co_return ec;
}

void tls_stream::close() {
  if (!socket_.is_open()) return;
  // Best effort close_notify; never waits.
  if (SSL_is_init_finished(ssl_)) {
    ERR_clear_error();
    SSL_shutdown(ssl_);
    ERR_clear_error();
  }
  // Bytes the peer sent that nobody read make close() send a reset, and a
  // reset can destroy what we sent last (the error telling the peer why)
  // before the peer reads it: read them away first (without waiting).
  int fd = static_cast<int>(socket_.native_handle());
  char sink[16384];
  for (int i = 0; i < 64 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; ++i) {
  }
  std::error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
}

void tune_socket(asio::ip::tcp::socket& socket, const keepalive& k) {
  int fd = static_cast<int>(socket.native_handle());
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!k.enabled) return;
  unsigned user_timeout_ms = static_cast<unsigned>(k.dead_after()) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &k.idle, sizeof k.idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &k.interval, sizeof k.interval);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &k.count, sizeof k.count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

std::string endpoint_string(const asio::ip::tcp::socket& socket) {
  std::error_code ec;
  auto ep = socket.remote_endpoint(ec);
  if (ec) return "unknown peer";
  // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "[" + s + "]:".
  auto addr = ep.address();
  std::string out;
  if (addr.is_v6()) out += '[';
  out += addr.to_string();
  if (addr.is_v6()) out += ']';
  out += ':';
  out += std::to_string(ep.port());
  return out;
}

}  // namespace brine::net
