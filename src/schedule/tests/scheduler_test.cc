#include "schedule/scheduler.h"

#include <gtest/gtest.h>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <map>

namespace brine::schedule {
namespace {

using namespace std::chrono_literals;

struct fake_master {
  int refusals_left = 0;
  int asks = 0;
  int runs = 0;
  int running = 0;
  int most_running = 0;
  std::chrono::milliseconds run_time{0};
  std::vector<int64_t> slots;
};

asio::awaitable<grant> ask(fake_master* m, int64_t slot) {
  ++m->asks;
  grant g;
  if (m->refusals_left > 0) {
    --m->refusals_left;
    g.k = grant::kind::retry;
    g.retry_after = 100ms;
    g.detail = "max_concurrent_runs";
    co_return g;
  }
  m->slots.push_back(slot);
  g.k = grant::kind::run;
  g.jid = "2026" + std::to_string(m->asks);
  co_return g;
}

asio::awaitable<void> run(fake_master* m) {
  ++m->runs;
  m->most_running = std::max(m->most_running, ++m->running);
  asio::steady_timer t(co_await asio::this_coro::executor, m->run_time);
  co_await t.async_wait(asio::use_awaitable);
  --m->running;
}

scheduler::hooks hooks_for(fake_master& m) {
  return {[&m](const base::schedule_job&, int64_t slot) { return ask(&m, slot); },
          [&m](const base::schedule_job&, grant) { return run(&m); }};
}

base::schedule_job job(std::string name, uint64_t seconds) {
  base::schedule_job j;
  j.name = std::move(name);
  j.function = "test.ping";
  j.seconds = seconds;
  return j;
}

TEST(Scheduler, RunOnStartAsksAgainAfterRetryAndRunsOnce) {
  asio::io_context io;
  fake_master m;
  m.refusals_left = 2;
  auto j = job("ping", 3600);
  j.run_on_start = true;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{j}, hooks_for(m));
  s->start();
  io.run_for(2s);
  s->stop();
  io.run_for(100ms);
  EXPECT_EQ(m.runs, 1);
  EXPECT_EQ(m.asks, 3);
  EXPECT_EQ(s->runs_deferred(), 2u);
  EXPECT_EQ(s->runs_started(), 1u);
}

TEST(Scheduler, WithoutRunOnStartWaitsForTheSlot) {
  asio::io_context io;
  fake_master m;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{job("ping", 3600)},
                                       hooks_for(m));
  s->start();
  io.run_for(300ms);
  s->stop();
  io.run_for(100ms);
  // Its slot is fqdn_rand within the hour: almost surely not in 300 ms.
  auto t = s->timings()[0];
  int64_t slot = next_slot(unix_ms() - 400, t.period_ms, t.offset_ms);
  if (slot > unix_ms()) {
    EXPECT_EQ(m.runs, 0);
  }
}

TEST(Scheduler, SlotsAreTheSpreadOnes) {
  asio::io_context io;
  fake_master m;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{job("ping", 1)},
                                       hooks_for(m));
  s->start();
  io.run_for(3500ms);
  s->stop();
  io.run_for(100ms);
  ASSERT_GE(m.slots.size(), 2u);
  auto t = s->timings()[0];
  EXPECT_EQ(t.offset_ms, static_cast<int64_t>(fqdn_rand("web1", "ping", 1000)));
  for (size_t i = 0; i < m.slots.size(); ++i) {
    EXPECT_EQ(m.slots[i] % 1000, t.offset_ms);
    if (i > 0) {
      EXPECT_EQ(m.slots[i] - m.slots[i - 1], 1000);
    }
  }
}

TEST(Scheduler, MaxrunningSkipsRunsWhileOneIsUnderWay) {
  asio::io_context io;
  fake_master m;
  m.run_time = 2500ms;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{job("slow", 1)},
                                       hooks_for(m));
  s->start();
  io.run_for(4500ms);
  s->stop();
  io.run_for(3s);
  EXPECT_EQ(m.most_running, 1);
  EXPECT_GE(m.runs, 1);
  EXPECT_LE(m.runs, 2);
  EXPECT_GE(s->runs_skipped(), 2u);
}

TEST(Scheduler, MaxrunningTwoLetsTwoOverlap) {
  asio::io_context io;
  fake_master m;
  m.run_time = 2500ms;
  auto j = job("slow", 1);
  j.maxrunning = 2;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{j}, hooks_for(m));
  s->start();
  io.run_for(4500ms);
  s->stop();
  io.run_for(3s);
  EXPECT_EQ(m.most_running, 2);
}

TEST(Scheduler, AssignedPeriodsReplaceTheJobsOwn) {
  asio::io_context io;
  fake_master m;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1",
                                       std::vector{job("a", 1500), job("b", 3600)}, hooks_for(m));
  s->set_periods({{"a", 1800}, {"b", 3600}}, true);
  io.run_for(50ms);
  auto t = s->timings();
  EXPECT_EQ(t[0].period_ms, 1800000);
  EXPECT_EQ(t[1].period_ms, 3600000);
  EXPECT_NE(t[0].offset_ms % 1800000, t[1].offset_ms % 1800000);
}

TEST(Scheduler, SetJobsStartsNewOnesKeepsUnchangedOnesAndStopsRemovedOnes) {
  asio::io_context io;
  std::map<std::string, int> runs;
  scheduler::hooks h{[](const base::schedule_job&, int64_t) -> asio::awaitable<grant> {
                       grant g;
                       g.k = grant::kind::run;
                       g.jid = "1";
                       co_return g;
                     },
                     [&runs](const base::schedule_job& j, grant) -> asio::awaitable<void> {
                       ++runs[j.name];
                       co_return;
                     }};
  auto once = job("once", 3600);
  once.run_on_start = true;
  auto often = job("often", 1);  // a run every second
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{once, often}, h);
  s->start();
  io.run_for(2500ms);
  EXPECT_EQ(runs["once"], 1);
  EXPECT_GE(runs["often"], 2);
  // "once" unchanged keeps its place (no second start-up run), "often"
  // removed stops, "later" is new and runs on start.
  auto later = job("later", 3600);
  later.run_on_start = true;
  s->set_jobs({once, later});
  io.run_for(100ms);
  int often_then = runs["often"];
  io.run_for(2500ms);
  EXPECT_EQ(runs["once"], 1);
  EXPECT_EQ(runs["later"], 1);
  EXPECT_EQ(runs["often"], often_then);
  ASSERT_EQ(s->jobs().size(), 2u);
  EXPECT_EQ(s->jobs()[1].name, "later");
  EXPECT_EQ(s->timings()[1].period_ms, 3600000);
  // A changed definition is a new job: run_on_start runs it again.
  once.args = nlohmann::json::array({"changed"});
  s->set_jobs({once});
  io.run_for(500ms);
  EXPECT_EQ(runs["once"], 2);
  s->stop();
  io.run_for(100ms);
}

TEST(Scheduler, ARunGrantedWhileItsJobWasRemovedStillRuns) {
  // The master recorded the run when it granted it: the record is to end
  // with a return, so the run goes ahead although set_jobs removed the job.
  asio::io_context io;
  int runs = 0;
  scheduler::hooks h{[](const base::schedule_job&, int64_t) -> asio::awaitable<grant> {
                       asio::steady_timer t(co_await asio::this_coro::executor, 300ms);
                       co_await t.async_wait(asio::use_awaitable);
                       grant g;
                       g.k = grant::kind::run;
                       g.jid = "1";
                       co_return g;
                     },
                     [&runs](const base::schedule_job&, grant) -> asio::awaitable<void> {
                       ++runs;
                       co_return;
                     }};
  auto j = job("once", 3600);
  j.run_on_start = true;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{j}, h);
  s->start();
  io.run_for(100ms);  // asking
  s->set_jobs({});
  io.run_for(1s);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(s->jobs().empty());
  s->stop();
  io.run_for(100ms);
}

TEST(Scheduler, MaxrunningCountsTheRunsOfAChangedDefinitionOfItsName) {
  // Salt counts a schedule's running jobs by its name: a definition changed
  // (the pillar's schedule moved) while a run of the old one is under way
  // does not start a second run beside it.
  asio::io_context io;
  fake_master m;
  m.run_time = 1500ms;
  auto j = job("slow", 3600);
  j.run_on_start = true;
  auto s = std::make_shared<scheduler>(io.get_executor(), "web1", std::vector{j}, hooks_for(m));
  s->start();
  io.run_for(200ms);
  ASSERT_EQ(m.running, 1);
  j.args = nlohmann::json::array({"changed"});
  s->set_jobs({j});  // run_on_start again: due at once, but one is under way
  io.run_for(2s);
  EXPECT_EQ(m.runs, 1);
  EXPECT_EQ(m.most_running, 1);
  EXPECT_EQ(s->runs_skipped(), 1u);
  EXPECT_EQ(m.running, 0);
  s->stop();
  io.run_for(100ms);
}

}  // namespace
}  // namespace brine::schedule
