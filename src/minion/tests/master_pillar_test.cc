#include "minion/master_pillar.h"

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <chrono>

#include "minion/spool.h"
#include "net/tls.h"
#include "pki/keys.h"

namespace brine::minion {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using status = call_reply::status;

nlohmann::json pillar_of(size_t i) { return {{"from", i}}; }

// A try that ends with `st` after `after`, or as cancelled when cancelled.
asio::awaitable<call_reply> fake_try(size_t i, steady::duration after, status st) {
  asio::steady_timer t(co_await asio::this_coro::executor, after);
  std::error_code ec;
  co_await t.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  call_reply r;
  r.st = ec ? status::cancelled : st;
  if (r.st == status::answered) r.pillar = pillar_of(i);
  co_return r;
}

struct fake_master {
  steady::duration after;
  status st;
};

// Runs first_answer over fake masters; `ended` counts the tries that finished.
race_result race(const std::vector<fake_master>& masters, steady::duration stagger,
                 steady::duration deadline, steady::duration* took = nullptr) {
  asio::io_context io;
  std::optional<race_result> out;
  pillar_try start = [&masters](size_t i) { return fake_try(i, masters[i].after, masters[i].st); };
  auto t0 = steady::now();
  asio::co_spawn(io, first_answer(masters.size(), start, stagger, t0 + deadline),
                 [&](std::exception_ptr e, race_result r) {
                   if (e) std::rethrow_exception(e);
                   out = std::move(r);
                 });
  io.run();  // also waits for the cancelled tries
  if (took) *took = steady::now() - t0;
  EXPECT_TRUE(out.has_value());
  return out.value_or(race_result{});
}

TEST(FirstAnswer, TheFirstMasterAnsweringWithinTheStaggerIsTheOnlyOneAsked) {
  steady::duration took;
  auto r = race({{10ms, status::answered}, {10ms, status::answered}}, 5s, 10s, &took);
  ASSERT_EQ(r.winner, 0u);
  EXPECT_EQ(r.replies[0]->pillar, pillar_of(0));
  EXPECT_FALSE(r.replies[1].has_value());  // never asked
  EXPECT_LT(took, 2s);
}

TEST(FirstAnswer, AMasterThatIsDownIsSkippedAtOnce) {
  steady::duration took;
  auto r = race({{0ms, status::unreachable}, {0ms, status::not_accepted}, {20ms, status::answered}},
                10s, 20s, &took);
  ASSERT_EQ(r.winner, 2u);
  EXPECT_EQ(r.replies[0]->st, status::unreachable);
  EXPECT_EQ(r.replies[1]->st, status::not_accepted);
  EXPECT_EQ(r.replies[2]->pillar, pillar_of(2));
  EXPECT_LT(took, 5s);  // far below one stagger
}

TEST(FirstAnswer, AHangingMasterDoesNotHoldUpTheNextAndIsCancelled) {
  steady::duration took;
  auto r = race({{1h, status::answered}, {10ms, status::answered}}, 100ms, 1h, &took);
  ASSERT_EQ(r.winner, 1u);
  EXPECT_EQ(r.replies[1]->pillar, pillar_of(1));
  EXPECT_EQ(r.replies[0]->st, status::cancelled);
  EXPECT_GE(took, 100ms);
  EXPECT_LT(took, 5s);  // the hanging try ended when cancelled, not after an hour
}

TEST(FirstAnswer, NoAnswerByTheDeadlineCancelsEveryTry) {
  steady::duration took;
  auto r = race({{1h, status::answered}, {1h, status::answered}, {1h, status::answered}}, 100ms,
                300ms, &took);
  EXPECT_FALSE(r.winner.has_value());
  EXPECT_EQ(r.replies[0]->st, status::timed_out);
  EXPECT_EQ(r.replies[1]->st, status::timed_out);
  EXPECT_EQ(r.replies[2]->st, status::timed_out);
  EXPECT_GE(took, 300ms);
  EXPECT_LT(took, 5s);
}

TEST(FirstAnswer, EveryMasterFailingEndsAtOnce) {
  steady::duration took;
  auto r = race({{0ms, status::unreachable}, {5ms, status::failed}}, 10s, 20s, &took);
  EXPECT_FALSE(r.winner.has_value());
  EXPECT_EQ(r.replies[0]->st, status::unreachable);
  EXPECT_EQ(r.replies[1]->st, status::failed);
  EXPECT_LT(took, 5s);
}

// A real call link against a "master" that takes the TCP connection and
// never answers the TLS handshake.
class SilentMaster : public ::testing::Test {
 protected:
  void SetUp() override {
    acceptor_.open(asio::ip::tcp::v4());
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    acceptor_.async_accept([this](std::error_code ec, asio::ip::tcp::socket s) {
      if (!ec) held_ = std::move(s);
    });
  }

  std::shared_ptr<agent> link() {
    agent_settings s;
    s.id = "m1";
    s.master = "127.0.0.1";
    s.master_port = acceptor_.local_endpoint().port();
    agent::deps d{
        tls_, nullptr, functions_, spool_, history_, nullptr, [](EVP_PKEY*, const std::string&) {
          return true;
        }};
    return std::make_shared<agent>(io_.get_executor(), s, d);
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_{io_};
  asio::ip::tcp::socket held_{io_};
  pki::keypair key_ = pki::keypair::generate();
  net::tls_context tls_{net::tls_context::role::client, key_, "m1"};
  modules::registry functions_;
  memory_spool spool_;
  jid_history history_{"", 1, 1};
};

TEST_F(SilentMaster, FetchPillarEndsAtItsDeadline) {
  auto a = link();
  std::optional<call_reply> got;
  auto t0 = steady::now();
  asio::co_spawn(io_, a->fetch_pillar(nlohmann::json::object(), t0 + 300ms),
                 [&](std::exception_ptr e, call_reply r) {
                   if (e) std::rethrow_exception(e);
                   got = std::move(r);
                   held_.close();
                   acceptor_.close();
                 });
  io_.run();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->st, status::unreachable);
  EXPECT_NE(got->detail.find("TLS handshake failed: timed out"), std::string::npos) << got->detail;
  EXPECT_GE(steady::now() - t0, 300ms);
  EXPECT_LT(steady::now() - t0, 5s);
}

TEST_F(SilentMaster, AnotherMastersAnswerCancelsTheHandshakeAtOnce) {
  auto a = link();
  std::optional<race_result> out;
  auto t0 = steady::now();
  const auto deadline = t0 + 1h;
  pillar_try start = [&a, deadline](size_t i) {
    return i == 0 ? a->fetch_pillar(nlohmann::json::object(), deadline)
                  : fake_try(i, 50ms, status::answered);
  };
  asio::co_spawn(io_, first_answer(2, start, 20ms, deadline),
                 [&](std::exception_ptr e, race_result r) {
                   if (e) std::rethrow_exception(e);
                   out = std::move(r);
                   held_.close();
                   acceptor_.close();
                 });
  io_.run();
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->winner, 1u);
  EXPECT_EQ(out->replies[0]->st, status::cancelled);
  EXPECT_LT(steady::now() - t0, 5s);  // io_context::run returned: the link ended too
}

call_reply failure(status st, std::string detail) {
  call_reply r;
  r.st = st;
  r.detail = std::move(detail);
  return r;
}

TEST(NoPillarMessage, NamesEachMasterAndTheFix) {
  base::minion_config cfg;
  cfg.id = "web1";
  cfg.source = "/etc/brine/minion";
  cfg.auth_timeout = 7;
  master_pillar r;
  r.failed.emplace_back("m1:4506",
                        failure(status::unreachable, "cannot connect: Connection refused"));
  r.failed.emplace_back("m2:4506", failure(status::timed_out, "no answer in time"));
  EXPECT_FALSE(key_not_accepted(r));
  EXPECT_EQ(no_pillar_message(cfg, r),
            "no master answered the pillar request of minion web1 within auth_timeout (7 s)\n"
            "  master m1:4506: cannot connect: Connection refused\n"
            "  master m2:4506: no answer in time\n"
            "start the master or fix 'master' in /etc/brine/minion, raise auth_timeout there, or "
            "run masterless with --local");
}

TEST(NoPillarMessage, AKeyNotAcceptedSaysSoAndHowToAcceptIt) {
  base::minion_config cfg;
  cfg.id = "web1";
  master_pillar r;
  r.failed.emplace_back(
      "m1:4506",
      failure(status::not_accepted,
              "pending: key pending: accept it on the master with 'brine key accept ID'"));
  r.failed.emplace_back("m2:4506", failure(status::not_accepted, "denied: key denied"));
  EXPECT_TRUE(key_not_accepted(r));
  std::string text = no_pillar_message(cfg, r);
  EXPECT_EQ(text.rfind("minion key not accepted: ", 0), 0u) << text;
  EXPECT_NE(text.find("master m1:4506: the key is pending: accept it on the master with 'brine "
                      "key accept web1'"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("master m2:4506: the key is denied: the master holds another key for web1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--local"), std::string::npos);
}

}  // namespace
}  // namespace brine::minion
