#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/highstate_output.h"
#include "cli/inventory.h"
#include "cli/output.h"
#include "report/report.h"
#include "store/store.h"

namespace brine::cli {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string utc_ms(int64_t ms) { return utc_time(ms, time_unit::milliseconds); }

// --since as unix milliseconds, from now; nullopt when not given.
std::optional<int64_t> since_option(const std::string& since) {
  if (since.empty()) return std::nullopt;
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  return since_ms(since, now);
}

// "0.3 ms", "850 ms", "12.4 s", "3 min 5 s".
std::string duration_text(double ms) {
  char buf[48];
  if (ms < 100) {
    std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  } else if (ms < 1000) {
    std::snprintf(buf, sizeof buf, "%.0f ms", ms);
  } else if (ms < 60000) {
    std::snprintf(buf, sizeof buf, "%.1f s", ms / 1000);
  } else {
    auto s = static_cast<long long>(ms / 1000);
    std::snprintf(buf, sizeof buf, "%lld min %lld s", s / 60, s % 60);
  }
  return buf;
}

std::string status_text(const report::report& r) {
  std::string s = report::to_string(r.status);
  return r.test ? s + " (test)" : s;
}

void print_table(const std::vector<report::report>& reports) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"JID", "MINION", "STATUS", "STARTED (UTC)", "DURATION", "SUCCEEDED", "FAILED",
                  "CHANGED", "TOTAL", "FUNCTION"});
  for (const auto& r : reports) {
    rows.push_back({r.jid, r.minion, status_text(r), utc_ms(r.started_ms),
                    duration_text(r.duration_ms), std::to_string(r.counts.succeeded),
                    std::to_string(r.counts.failed), std::to_string(r.counts.changed),
                    std::to_string(r.counts.total), r.fun});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

int list(store::store& db, const report_options& o) {
  store::report_query q;
  q.minion = o.minion_glob;
  if (!o.status.empty()) {
    auto s = report::parse_status(o.status);
    if (!s) {
      throw base::error("--status must be failed, changed or unchanged, got '" + o.status + "'");
    }
    q.status = s;
  }
  q.since_ms = since_option(o.since);
  q.limit = o.limit;
  q.last = o.last;
  auto reports = db.list_reports(q);
  if (o.out == "json" || o.out == "yaml") {
    ojson out = ojson::array();
    for (const auto& r : reports) {
      ojson row = report::to_json(r);
      row["started"] = utc_ms(r.started_ms);
      out.push_back(std::move(row));
    }
    if (o.out == "json") {
      std::cout << out.dump(4, ' ', false, ojson::error_handler_t::replace) << "\n";
    } else {
      std::cout << yaml_out("reports", plain_json(out));
    }
    return 0;
  }
  if (reports.empty()) {
    std::cout << "no reports" << (q.minion.empty() && !q.status && !q.since_ms ? "" : " match")
              << "\n";
    return 0;
  }
  print_table(reports);
  return 0;
}

int show(store::store& db, const report_options& o) {
  auto r = db.get_report(o.jid, o.minion);
  if (!r) {
    throw base::error("no report of minion " + o.minion + " for job " + o.jid + " in " + db.name() +
                      "; `brine report list --minion " + o.minion + "` lists its runs");
  }
  if (o.out == "json" || o.out == "yaml") {
    ojson out = report::to_json(*r);
    out["started"] = utc_ms(r->started_ms);
    if (o.out == "json") {
      std::cout << out.dump(4, ' ', false, ojson::error_handler_t::replace) << "\n";
    } else {
      std::cout << yaml_out(r->minion, plain_json(out));
    }
    return 0;
  }
  std::cout << "jid: " << r->jid << "\nminion: " << r->minion << "\nfunction: " << r->fun
            << "\nstatus: " << status_text(*r) << "\nstarted: " << utc_ms(r->started_ms)
            << " UTC\nduration: " << duration_text(r->duration_ms) << "\ntimings:";
  if (r->timings.empty()) std::cout << " none";
  for (const auto& [module, t] : r->timings) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.3f", t.ms);
    std::cout << "\n    " << module << ": " << t.states
              << (t.states == 1 ? " state, " : " states, ") << ms << " ms";
  }
  std::cout << "\n\n";
  highstate_options h;
  h.state_output = o.state_output.empty() ? "full" : o.state_output;
  h.state_verbose = o.state_verbose.value_or(true);
  h.color = !o.no_color && (o.force_color || ::isatty(STDOUT_FILENO));
  std::cout << highstate_out(r->minion, r->ret, h);
  return 0;
}

std::string result_text(const std::optional<bool>& result) {
  return result ? (*result ? "True" : "False") : "None";
}

int states(store::store& db, const report_options& o) {
  store::state_query q;
  q.id = o.state_id;
  q.minion = o.minion_glob;
  q.since_ms = since_option(o.since);
  q.limit = o.limit;
  q.last = o.last;
  auto rows = db.list_state_results(q);
  if (o.out == "json" || o.out == "yaml") {
    ojson out = ojson::array();
    for (const auto& r : rows) {
      ojson row;
      row["jid"] = r.jid;
      row["minion"] = r.minion;
      row["fun"] = r.fun;
      row["started_ms"] = r.started_ms;
      row["started"] = utc_ms(r.started_ms);
      row["test"] = r.test;
      row["id"] = r.state_id;
      row["function"] = r.function;
      row["name"] = r.name;
      row["sls"] = r.sls;
      row["result"] = r.result ? ojson(*r.result) : ojson(nullptr);
      row["changes"] = r.changes;
      out.push_back(std::move(row));
    }
    if (o.out == "json") {
      std::cout << out.dump(4, ' ', false, ojson::error_handler_t::replace) << "\n";
    } else {
      std::cout << yaml_out("states", plain_json(out));
    }
    return 0;
  }
  if (rows.empty()) {
    std::cout << "no run of state " << o.state_id << " in " << db.name()
              << (q.minion.empty() && !q.since_ms ? "" : " matches") << "\n";
    return 0;
  }
  std::vector<std::vector<std::string>> cells;
  cells.push_back({"JID", "MINION", "STARTED (UTC)", "FUNCTION", "NAME", "RESULT", "CHANGES",
                   "SLS"});
  for (const auto& r : rows) {
    cells.push_back({r.jid, r.minion, utc_ms(r.started_ms), r.function, r.name,
                     result_text(r.result) + (r.test ? " (test)" : ""),
                     r.changes ? "yes" : "no", r.sls});
  }
  std::cout << inventory::table(cells);
  return 0;
}

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

}  // namespace

int64_t since_ms(const std::string& text, int64_t now_ms) {
  const std::string fix =
      "--since takes a duration back from now (30m, 2h, 7d, 1w, 1h30m) or a UTC time "
      "(2025-01-31, 2025-01-31T14:00, 2025-01-31 14:00:05), got '" +
      text + "'";
  // A duration: numbers each followed by s, m, h, d or w.
  if (!text.empty() && std::isdigit(static_cast<unsigned char>(text[0])) &&
      text.find('-') == std::string::npos) {
    int64_t total = 0;
    size_t i = 0;
    while (i < text.size()) {
      size_t start = i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
      if (i == start || i == text.size()) throw base::error(fix);
      int64_t n = 0;
      auto [end, ec] = std::from_chars(text.data() + start, text.data() + i, n);
      if (ec != std::errc() || n > 1'000'000'000) throw base::error(fix);
      int64_t unit = 0;
      switch (text[i]) {
        case 's':
          unit = 1;
          break;
        case 'm':
          unit = 60;
          break;
        case 'h':
          unit = 3600;
          break;
        case 'd':
          unit = 86400;
          break;
        case 'w':
          unit = 7 * 86400;
          break;
        default:
          throw base::error(fix);
      }
      total += n * unit;
      ++i;
    }
    return now_ms - total * 1000;
  }
  // A UTC time: YYYY-MM-DD, then optionally T or a space and HH:MM[:SS].
  std::string_view t = text;
  if (t.size() < 10 || t[4] != '-' || t[7] != '-' || !all_digits(t.substr(0, 4)) ||
      !all_digits(t.substr(5, 2)) || !all_digits(t.substr(8, 2))) {
    throw base::error(fix);
  }
  struct tm tm {};
  tm.tm_year = std::stoi(std::string(t.substr(0, 4))) - 1900;
  tm.tm_mon = std::stoi(std::string(t.substr(5, 2))) - 1;
  tm.tm_mday = std::stoi(std::string(t.substr(8, 2)));
  if (t.size() > 10) {
    if ((t[10] != 'T' && t[10] != ' ') || (t.size() != 16 && t.size() != 19) || t[13] != ':' ||
        !all_digits(t.substr(11, 2)) || !all_digits(t.substr(14, 2)) ||
        (t.size() == 19 && (t[16] != ':' || !all_digits(t.substr(17, 2))))) {
      throw base::error(fix);
    }
    tm.tm_hour = std::stoi(std::string(t.substr(11, 2)));
    tm.tm_min = std::stoi(std::string(t.substr(14, 2)));
    if (t.size() == 19) tm.tm_sec = std::stoi(std::string(t.substr(17, 2)));
  }
  if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 60) {
    throw base::error(fix);
  }
  return static_cast<int64_t>(::timegm(&tm)) * 1000;
}

int report_command(const base::master_config& cfg, const report_options& o) {
  auto db = open_store(cfg, true);
  if (o.action == "show") return show(*db, o);
  if (o.action == "states") return states(*db, o);
  return list(*db, o);
}

}  // namespace brine::cli
