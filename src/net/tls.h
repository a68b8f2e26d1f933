#pragma once

#include <memory>
#include <string>

#include <asio/ip/tcp.hpp>
#include <openssl/ssl.h>

#include "net/stream.h"
#include "pki/keys.h"

namespace brine::net {

struct ssl_ctx_free {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// An OpenSSL context for mutual TLS 1.3 with an Ed25519 identity. Peers must
// present a certificate; any self-signed one passes the handshake, because
// trust is decided afterwards from the peer key's fingerprint (the key store
// on a master, the pinned master_finger on a minion).
class tls_context {
 public:
  enum class role { server, client };
  tls_context(role r, const pki::keypair& identity, const std::string& name);
  // A client context without an identity of its own: each connection brings
  // one (tls_identity), so that thousands of simulated minions share a context.
  explicit tls_context(role r);
  SSL_CTX* get() const { return ctx_.get(); }

 private:
  std::unique_ptr<SSL_CTX, ssl_ctx_free> ctx_;
};

// A certificate and key for one connection, overriding the context's.
struct tls_identity {
  tls_identity(const pki::keypair& key, const std::string& name)
      : key(&key), cert(key.self_signed_cert(name)) {}
  const pki::keypair* key;
  pki::x509_ptr cert;
};

// TLS driven by OpenSSL directly on the non-blocking socket (SSL_set_fd), with
// readiness from asio's async_wait: no BIO pair, no stream-side buffers, and
// SSL_MODE_RELEASE_BUFFERS so an idle connection holds no record buffers.
//
// Lifecycle: construct with a connected socket, handshake(), then read/write;
// close() at any time. Threading: one strand (the socket's executor).
class tls_stream final : public byte_stream {
 public:
  tls_stream(asio::ip::tcp::socket socket, const tls_context& ctx, tls_context::role role,
             const tls_identity* identity = nullptr);
  ~tls_stream() override;

  asio::awaitable<std::error_code> handshake();
  // The peer's public key after the handshake (owned by the SSL object).
  EVP_PKEY* peer_key() const;

  asio::awaitable<std::error_code> read_into(proto::frame_decoder& decoder) override;
  asio::awaitable<std::error_code> write_all(std::span<const uint8_t> bytes) override;
  size_t try_write(std::span<const uint8_t> bytes, std::error_code& ec) override;
  void close() override;
  const std::string& peer() const override { return peer_; }
  const std::string& last_error() const override { return error_; }

  asio::ip::tcp::socket& socket() { return socket_; }

 private:
  enum class op { handshake, read, write };
  // Runs `o` until it makes progress, waiting for socket readiness as OpenSSL
  // asks. Returns the byte count (or 1 for the handshake), 0 with `ec` set.
  asio::awaitable<size_t> drive(op o, const uint8_t* out, size_t out_len,
                                proto::frame_decoder* decoder, std::error_code& ec);
  // Turns a failed OpenSSL call into `ec` (and error_); false when it only
  // has to wait for the socket (want_read/want_write).
  bool failed(op o, int ret, std::error_code& ec, int* want);

  asio::ip::tcp::socket socket_;
  SSL* ssl_ = nullptr;
  std::string peer_;
  std::string error_;
};

// TCP keepalive: after `idle` seconds without anything received, a probe every
// `interval` seconds; `count` unanswered probes and the kernel drops the
// connection. TCP_USER_TIMEOUT is set to the same bound (idle + count *
// interval), so data the peer does not acknowledge ends the connection no
// sooner than a silent peer does: a peer that is merely slow (a loaded host)
// is not cut off by a shorter timer.
struct keepalive {
  bool enabled = true;
  int idle = 60;      // seconds
  int interval = 20;  // seconds
  int count = 3;
  int dead_after() const { return idle + interval * count; }
};

// Keepalive as above, without waking the process for idle connections, and
// TCP_NODELAY for small frames.
void tune_socket(asio::ip::tcp::socket& socket, const keepalive& k);

std::string endpoint_string(const asio::ip::tcp::socket& socket);

}  // namespace brine::net
