#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "cli/api_client.h"
#include "cli/commands.h"
#include "cli/output.h"

namespace brine::cli {

using nlohmann::json;

namespace {

std::string hh_mm(int64_t unix_s) { return utc_time(unix_s * 1000, time_unit::minutes); }

std::string duration(uint64_t s) {
  if (s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

}  // namespace

int schedule_command(const base::master_config& cfg, const schedule_options& o) {
  auto client = api_client::connect(cfg.sock_dir);
  if (!client) {
    throw base::error("no master answers on " + cfg.sock_dir +
                      "/master.sock; `brine schedule plan` asks a running master, which knows "
                      "its minions' schedules (start it, or check sock_dir in " +
                      cfg.source + ")");
  }
  json reply = client->request(
      "schedule_plan", {{"target", o.target}, {"tgt_type", o.tgt_type}, {"minutes", o.minutes}},
      std::chrono::seconds(60));
  if (!reply.value("ok", false)) {
    std::cerr << "brine: " << reply.value("error", std::string("schedule plan failed")) << "\n";
    return reply.value("bad_target", false) ? 3 : 1;
  }
  if (o.out == "json") {
    std::cout << reply.dump(2) << "\n";
    return 0;
  }
  const int64_t start = reply.value("start", int64_t{0});
  std::cout << "schedules of " << reply.value("minions", 0) << " of " << reply.value("targeted", 0)
            << " targeted minions (the others reported none)";
  if (reply.value("harmonic", false)) {
    std::cout << "; harmonic periods from " << duration(reply.value("harmonic_base", 0));
  }
  std::cout << "\n\n";
  std::printf("%-20s %-20s %-8s %-8s %s\n", "JOB", "FUNCTION", "EVERY", "PERIOD", "MINIONS");
  for (const auto& j : reply.value("jobs", json::array())) {
    std::printf("%-20s %-20s %-8s %-8s %llu\n", j.value("name", "").c_str(),
                j.value("fun", "").c_str(), duration(j.value("seconds", uint64_t{0})).c_str(),
                duration(j.value("period", uint64_t{0})).c_str(),
                static_cast<unsigned long long>(j.value("minions", uint64_t{0})));
  }
  auto runs = reply.value("runs", std::vector<uint64_t>{});
  uint64_t peak = reply.value("peak", uint64_t{0});
  std::cout << "\nruns expected per minute (UTC), from " << hh_mm(start) << ":\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    size_t bar = peak > 0 ? static_cast<size_t>(runs[i] * 50 / peak) : 0;
    std::printf("%s  %6llu  %s\n", hh_mm(start + static_cast<int64_t>(i) * 60).c_str() + 11,
                static_cast<unsigned long long>(runs[i]), std::string(bar, '#').c_str());
  }
  std::printf(
      "\npeak %llu runs/min at %s, mean %.1f, peak/mean %.2f; max_concurrent_runs %s, "
      "%llu in flight now\n",
      static_cast<unsigned long long>(peak),
      hh_mm(start + reply.value("peak_at", int64_t{0}) * 60).c_str() + 11, reply.value("mean", 0.0),
      reply.value("peak_over_mean", 0.0),
      reply.value("max_concurrent_runs", 0) == 0
          ? "none"
          : std::to_string(reply.value("max_concurrent_runs", 0)).c_str(),
      static_cast<unsigned long long>(reply.value("in_flight", uint64_t{0})));
  return 0;
}

}  // namespace brine::cli
