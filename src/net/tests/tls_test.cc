#include "net/tls.h"

#include <openssl/ssl.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/use_future.hpp>
#include <gtest/gtest.h>

#include "net/connection.h"
#include "net/deadline.h"

namespace brine::net {
namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;

struct fixture : ::testing::Test {
  asio::io_context io;
  pki::keypair server_key = pki::keypair::generate();
  pki::keypair client_key = pki::keypair::generate();
  tls_context server_ctx{tls_context::role::server, server_key, "master"};
  tls_context client_ctx{tls_context::role::client, client_key, "minion"};
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)};

  tcp::endpoint endpoint() const { return acceptor.local_endpoint(); }
};

// Outside the coroutine: g++ 12 miscompiles json brace-init with literals there.
std::vector<uint8_t> pong_with(uint64_t id, const std::string& fp) {
  return proto::encode_frame({proto::msg_type::pong, id, {{"fp", fp}}});
}

// Reads one frame into `m`; an empty string on success, else what failed.
asio::awaitable<std::string> read_one(tls_stream& s, proto::message& m) {
  proto::frame_decoder d(1024);
  for (;;) {
    auto st = d.next(m);
    if (st == proto::frame_decoder::status::ready) co_return "";
    if (st == proto::frame_decoder::status::error) co_return "decode: " + d.error_detail();
    if (auto e = co_await s.read_into(d)) co_return "read: " + e.message();
  }
}

asio::awaitable<std::string> server_side(tcp::acceptor& acceptor, const tls_context& ctx) {
  auto socket = co_await acceptor.async_accept(asio::use_awaitable);
  tls_stream s(std::move(socket), ctx, tls_context::role::server);
  auto ec = co_await s.handshake();
  if (ec) co_return "handshake: " + s.last_error();
  proto::message m;
  if (std::string err = co_await read_one(s, m); !err.empty()) co_return err;
  std::string fp = pki::fingerprint(s.peer_key());
  co_await s.write_all(pong_with(m.id, fp));
  co_return "ok";
}

asio::awaitable<std::string> client_side(tcp::endpoint ep, const tls_context& ctx) {
  tcp::socket socket(co_await asio::this_coro::executor);
  co_await socket.async_connect(ep, asio::use_awaitable);
  tls_stream s(std::move(socket), ctx, tls_context::role::client);
  if (auto ec = co_await s.handshake()) co_return "handshake: " + s.last_error();
  std::string server_fp = pki::fingerprint(s.peer_key());
  co_await s.write_all(proto::encode_frame({proto::msg_type::ping, 7, {}}));
  proto::message m;
  if (std::string err = co_await read_one(s, m); !err.empty()) co_return err;
  co_return server_fp + "|" + m.body.value("fp", "");
}

TEST_F(fixture, mutual_tls13_exchanges_frames_and_fingerprints) {
  auto server = asio::co_spawn(io, server_side(acceptor, server_ctx), asio::use_future);
  auto client = asio::co_spawn(io, client_side(endpoint(), client_ctx), asio::use_future);
  io.run_for(10s);
  ASSERT_EQ(server.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(server.get(), "ok");
  EXPECT_EQ(client.get(), server_key.fingerprint() + "|" + client_key.fingerprint());
}

// A raw OpenSSL client on a blocking socket, to offer what brine never would.
std::string raw_client(tcp::endpoint ep, int max_version, bool with_cert,
                       const pki::keypair& key) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(ep);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_set_max_proto_version(ctx, max_version);
  if (with_cert) {
    auto cert = key.self_signed_cert("x");
    SSL_CTX_use_certificate(ctx, cert.get());
    SSL_CTX_use_PrivateKey(ctx, key.get());
  }
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, socket.native_handle());
  int r = SSL_connect(ssl);
  std::string result = r == 1 ? "connected" : "refused";
  if (r == 1) {
    // TLS 1.3: a missing client certificate is reported after the handshake.
    char buf[16];
    int n = SSL_read(ssl, buf, sizeof buf);
    if (n <= 0) result = "refused";
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return result;
}

TEST_F(fixture, tls12_client_is_refused) {
  auto server = asio::co_spawn(io, server_side(acceptor, server_ctx), asio::use_future);
  std::thread t([&] { EXPECT_EQ(raw_client(endpoint(), TLS1_2_VERSION, true, client_key), "refused"); });
  io.run_for(10s);
  t.join();
  std::string s = server.get();
  EXPECT_EQ(s.rfind("handshake:", 0), 0u) << s;
}

TEST_F(fixture, client_without_certificate_is_refused) {
  auto server = asio::co_spawn(io, server_side(acceptor, server_ctx), asio::use_future);
  std::thread t([&] { EXPECT_EQ(raw_client(endpoint(), TLS1_3_VERSION, false, client_key), "refused"); });
  io.run_for(10s);
  t.join();
  std::string s = server.get();
  EXPECT_EQ(s.rfind("handshake:", 0), 0u) << s;
}

}  // namespace
}  // namespace brine::net
