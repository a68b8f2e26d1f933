#include "base/python_truth.h"
#include "report/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace brine::report {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view k_tag_sep = "_|-";
constexpr double k_day_seconds = 86400;

std::string text_of(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  if (v.is_array()) {
    std::string out;
    for (const auto& item : v) {
      if (!out.empty()) out += "\n";
      out += text_of(item);
    }
    return out;
  }
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

double number_of(const ojson& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    double d = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
    if (ec == std::errc() && end == s.data() + s.size()) return d;
  }
  return 0;
}

// "state_|-id_|-name_|-fun" -> {state, id, name, fun}; a name holding the
// separator itself leaves the first and last parts right.
std::vector<std::string_view> split_tag(std::string_view tag) {
  std::vector<std::string_view> parts;
  for (;;) {
    auto at = tag.find(k_tag_sep);
    parts.push_back(tag.substr(0, at));
    if (at == std::string_view::npos) return parts;
    tag.remove_prefix(at + k_tag_sep.size());
  }
}

// Seconds since midnight of "HH:MM:SS[.ffffff]"; nullopt otherwise.
std::optional<double> seconds_of_day(const std::string& t) {
  int h = 0, m = 0;
  double s = 0;
  if (t.size() < 8 || t[2] != ':' || t[5] != ':') return std::nullopt;
  auto read_int = [&](size_t at, int& out) {
    auto [end, ec] = std::from_chars(t.data() + at, t.data() + at + 2, out);
    return ec == std::errc() && end == t.data() + at + 2;
  };
  if (!read_int(0, h) || !read_int(3, m)) return std::nullopt;
  auto [end, ec] = std::from_chars(t.data() + 6, t.data() + t.size(), s);
  if (ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  if (h > 23 || m > 59 || s >= 61) return std::nullopt;
  return h * 3600.0 + m * 60.0 + s;
}

}  // namespace

const char* to_string(run_status s) {
  switch (s) {
    case run_status::unchanged:
      return "unchanged";
    case run_status::changed:
      return "changed";
    case run_status::failed:
      return "failed";
  }
  return "unknown";
}

std::optional<run_status> parse_status(std::string_view s) {
  if (s == "unchanged") return run_status::unchanged;
  if (s == "changed") return run_status::changed;
  if (s == "failed") return run_status::failed;
  return std::nullopt;
}

bool is_state_run(std::string_view fun) {
  for (std::string_view f : {"state.apply", "state.highstate", "state.sls", "state.sls_id",
                             "state.single", "state.test"}) {
    if (fun == f) return true;
  }
  return false;
}

std::vector<state_line> states_of(const ojson& ret) {
  std::vector<state_line> out;
  if (!ret.is_object()) return out;
  for (const auto& [tag, value] : ret.items()) {
    state_line s;
    s.tag = tag;
    auto parts = split_tag(tag);
    std::string module(parts.front());
    std::string fun = parts.size() >= 4 ? std::string(parts.back()) : "";
    s.function = fun.empty() ? module : module + "." + fun;
    if (parts.size() >= 4) {
      s.id = std::string(parts[1]);
      s.name = std::string(parts[2]);
    }
    if (value.is_object()) {
      if (auto it = value.find("__id__"); it != value.end()) s.id = text_of(*it);
      if (auto it = value.find("name"); it != value.end()) s.name = text_of(*it);
      auto result = value.find("result");
      if (result == value.end() || result->is_null()) {
        s.result = std::nullopt;
      } else {
        s.result = base::python_truth(*result);
      }
      if (auto it = value.find("changes"); it != value.end()) s.changes = base::python_truth(*it);
      if (auto it = value.find("comment"); it != value.end()) s.comment = text_of(*it);
      if (auto it = value.find("__sls__"); it != value.end()) s.sls = text_of(*it);
      if (auto it = value.find("start_time"); it != value.end()) s.start_time = text_of(*it);
      if (auto it = value.find("duration"); it != value.end()) s.duration_ms = number_of(*it);
      if (auto it = value.find("__run_num__"); it != value.end() && it->is_number()) {
        s.run_num = it->get<int64_t>();
      }
    } else {
      // Not a state's return at all: it did not succeed.
      s.result = false;
      s.comment = text_of(value);
    }
    out.push_back(std::move(s));
  }
  // Salt's outputter orders by __run_num__; states without one go last, in
  // the order they came.
  std::stable_sort(out.begin(), out.end(), [](const state_line& a, const state_line& b) {
    if ((a.run_num < 0) != (b.run_num < 0)) return b.run_num < 0;
    return a.run_num < b.run_num;
  });
  return out;
}

report summarise(const run_facts& facts, ojson ret) {
  report r;
  r.jid = facts.jid;
  r.minion = facts.minion;
  r.fun = facts.fun;
  r.retcode = facts.retcode;

  if (ret.is_array()) {
    // Salt's compile errors (or a state run refused: another was running).
    for (const auto& e : ret) r.errors.push_back(text_of(e));
    if (r.errors.empty()) r.errors.push_back("the run returned an empty list of errors");
  } else if (!ret.is_object()) {
    // A string: the function missing on the minion, the job killed, a
    // return too large for a frame.
    r.errors.push_back(ret.is_null() ? "the run returned nothing" : text_of(ret));
  }

  auto states = states_of(ret);
  bool any_none = false;
  std::optional<double> reference;  // the first state's start, seconds of day
  double earliest = 0, latest = 0;
  for (const auto& s : states) {
    ++r.counts.total;
    if (!s.result) {
      ++r.counts.succeeded;
      ++r.counts.pending;
      any_none = true;
    } else if (*s.result) {
      ++r.counts.succeeded;
    } else {
      ++r.counts.failed;
    }
    if (s.changes) ++r.counts.changed;
    r.run_time_ms += s.duration_ms;
    auto module = s.function.substr(0, s.function.find('.'));
    auto& t = r.timings[module];
    ++t.states;
    t.ms += s.duration_ms;

    // Start times are times of day: a run that crosses midnight is read
    // relative to its first state (no run lasts 12 hours).
    if (auto at = seconds_of_day(s.start_time)) {
      if (!reference) {
        reference = *at;
        earliest = 0;
        latest = s.duration_ms / 1000.0;
      }
      double offset = *at - *reference;
      if (offset >= k_day_seconds / 2) offset -= k_day_seconds;
      if (offset < -k_day_seconds / 2) offset += k_day_seconds;
      earliest = std::min(earliest, offset);
      latest = std::max(latest, offset + s.duration_ms / 1000.0);
    }
  }
  // To the microsecond, as the minion measured: sums and differences of
  // doubles leave noise below it.
  auto micros = [](double ms) { return std::round(ms * 1000.0) / 1000.0; };
  r.duration_ms = micros(reference ? (latest - earliest) * 1000.0 : r.run_time_ms);
  r.run_time_ms = micros(r.run_time_ms);
  for (auto& [module, t] : r.timings) t.ms = micros(t.ms);
  r.started_ms = facts.received_ms - static_cast<int64_t>(std::llround(r.duration_ms));
  r.test = facts.test.value_or(any_none);

  if (!r.errors.empty() || r.counts.failed > 0 || r.retcode != 0) {
    r.status = run_status::failed;
  } else if (r.counts.changed > 0 || r.counts.pending > 0) {
    r.status = run_status::changed;
  } else {
    r.status = run_status::unchanged;
  }
  r.ret = std::move(ret);
  return r;
}

nlohmann::ordered_json to_json(const report& r) {
  ojson timings = ojson::object();
  for (const auto& [module, t] : r.timings) {
    timings[module] = {{"states", t.states}, {"ms", t.ms}};
  }
  ojson out = {{"jid", r.jid},
               {"minion", r.minion},
               {"fun", r.fun},
               {"started_ms", r.started_ms},
               {"duration_ms", r.duration_ms},
               {"run_time_ms", r.run_time_ms},
               {"status", to_string(r.status)},
               {"test", r.test},
               {"retcode", r.retcode},
               {"counts",
                {{"succeeded", r.counts.succeeded},
                 {"failed", r.counts.failed},
                 {"changed", r.counts.changed},
                 {"pending", r.counts.pending},
                 {"total", r.counts.total}}},
               {"timings", std::move(timings)},
               {"errors", r.errors}};
  if (!r.ret.is_null()) out["return"] = r.ret;
  return out;
}

std::string timings_text(const std::map<std::string, module_timing>& timings) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [module, t] : timings) out[module] = {{"states", t.states}, {"ms", t.ms}};
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<std::map<std::string, module_timing>> parse_timings(const std::string& text) {
  auto v = nlohmann::json::parse(text, nullptr, false);
  if (v.is_discarded() || !v.is_object()) return std::nullopt;
  std::map<std::string, module_timing> out;
  for (const auto& [module, t] : v.items()) {
    if (!t.is_object() || !t.contains("states") || !t.contains("ms") ||
        !t["states"].is_number_unsigned() || !t["ms"].is_number()) {
      return std::nullopt;
    }
    out[module] = {t["states"].get<size_t>(), t["ms"].get<double>()};
  }
  return out;
}

}  // namespace brine::report
