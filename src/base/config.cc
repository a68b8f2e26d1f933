#include "base/config.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "base/log.h"

namespace brine::base {
namespace {

constexpr uint64_t k_u32_max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t k_min_frame_bytes = 1024;
constexpr uint64_t k_max_frame_bytes = 1024ull * 1024 * 1024;
constexpr size_t k_max_id_length = 255;
constexpr size_t k_finger_length = 32 * 3 - 1;  // 32 hex bytes joined by ':'
constexpr size_t k_max_shown = 100;             // a whole fingerprint fits

bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }

// A value as the user wrote it, on one line: quoted and escaped when it would
// otherwise be invisible or span lines.
std::string show(std::string_view text) {
  std::string_view cut = text.substr(0, k_max_shown);
  bool quote = text.empty() || std::any_of(text.begin(), text.end(), [](unsigned char c) {
                 return c == ' ' || c == '"' || c == '\\' || is_control(c);
               });
  std::string out = quote ? "\"" : "";
  for (unsigned char c : cut) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '"' || c == '\\') {
      out += {'\\', static_cast<char>(c)};
    } else if (is_control(c)) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (cut.size() < text.size()) out += "...";
  if (quote) out += '"';
  return out;
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return show(node.Scalar());
    case YAML::NodeType::Sequence:
      return fmt::format("a list of {}", node.size());
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "an empty value";
  }
}

[[noreturn]] void fail_at(const std::string& source, int line, const std::string& what) {
  throw error(fmt::format("config {}: line {}: {}", source, line, what));
}

// One `name: value` pair of the file being parsed.
struct option {
  const std::string& source;
  const std::string& name;
  int line;  // 1-based, of the option's name
  const YAML::Node& value;

  [[noreturn]] void fail(std::string_view expected) const { fail(expected, describe(value)); }
  [[noreturn]] void fail(std::string_view expected, std::string_view found) const {
    fail_at(source, line, fmt::format("{} must be {}, got {}", name, expected, found));
  }
};

std::string text(const option& opt, std::string_view expected) {
  if (!opt.value.IsScalar()) opt.fail(expected);
  return opt.value.Scalar();
}

uint64_t integer(const option& opt, uint64_t min, uint64_t max, std::string_view unit = {}) {
  std::string expected = max == k_u32_max ? fmt::format("an integer >= {}", min)
                                          : fmt::format("an integer {}..{}", min, max);
  if (!unit.empty()) expected += fmt::format(" ({})", unit);
  std::string s = text(opt, expected);
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || v < min || v > max) {
    opt.fail(expected);
  }
  return v;
}

bool boolean(const option& opt) {
  bool v = false;
  if (!YAML::convert<bool>::decode(opt.value, v)) opt.fail("true or false (or yes/no, on/off)");
  return v;
}

std::string resolve(const option& opt, const std::string& p) {
  namespace fs = std::filesystem;
  fs::path dir = fs::absolute(opt.source.empty() ? fs::path(".") : fs::path(opt.source));
  fs::path out = (dir.parent_path() / p).lexically_normal();
  if (!out.has_filename() && out.has_relative_path()) out = out.parent_path();
  return out.string();
}

// Relative paths are anchored at the config file's directory, so that an
// installation in one folder does not depend on the daemon's working directory.
std::string path(const option& opt, bool may_be_empty) {
  constexpr std::string_view expected = "a file system path";
  if (may_be_empty && opt.value.IsNull()) return {};
  std::string p = text(opt, expected);
  if (p.empty()) {
    if (may_be_empty) return {};
    opt.fail(expected);
  }
  if (std::any_of(p.begin(), p.end(), [](unsigned char c) { return is_control(c); })) {
    opt.fail("a file system path without control characters");
  }
  return resolve(opt, p);
}

std::string required_path(const option& opt) { return path(opt, false); }
std::string optional_path(const option& opt) { return path(opt, true); }

std::string log_file(const option& opt) {
  // Salt also takes syslog URLs here (udp://, file:///dev/log); brine writes files only.
  if (opt.value.IsScalar() && opt.value.Scalar().find("://") != std::string::npos) {
    opt.fail("a file path (syslog URLs are not supported)");
  }
  return optional_path(opt);
}

spdlog::level::level_enum log_level(const option& opt) {
  constexpr std::string_view expected =
      "one of garbage, trace, debug, info, warning, error, critical, quiet";
  std::string name = text(opt, expected);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto level = parse_log_level(name);
  if (!level) opt.fail(expected);
  return *level;
}

std::string ip_address(const option& opt) {
  constexpr std::string_view expected = "an IPv4 or IPv6 address (not a host name)";
  std::string s = text(opt, expected);
  unsigned char buf[16];
  if (::inet_pton(AF_INET, s.c_str(), buf) != 1 && ::inet_pton(AF_INET6, s.c_str(), buf) != 1) {
    opt.fail(expected);
  }
  return s;
}

// RFC 1123 labels (plus '_', which internal DNS often has); an all-numeric last
// label is a mistyped IPv4 address, not a name.
bool is_host_name(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::string_view label;
  for (size_t start = 0; start <= s.size();) {
    size_t dot = std::min(s.find('.', start), s.size());
    label = s.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (unsigned char c : label) {
      if (!std::isalnum(c) && c != '-' && c != '_') return false;
    }
    start = dot + 1;
  }
  return !std::all_of(label.begin(), label.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string master_address(const option& opt) {
  constexpr std::string_view expected =
      "a host name or an IP address (the port goes in master_port)";
  if (opt.value.IsSequence()) {
    opt.fail("one address; a list of masters (multi-master) is not supported yet");
  }
  std::string s = text(opt, expected);
  unsigned char buf[16];
  if (::inet_pton(AF_INET, s.c_str(), buf) != 1 && ::inet_pton(AF_INET6, s.c_str(), buf) != 1 &&
      !is_host_name(s)) {
    opt.fail(expected);
  }
  return s;
}

std::string minion_id(const option& opt) {
  std::string id = text(opt, "a name");
  // The id names files and directories on the master (pki_dir/minions/<id>).
  if (id.empty()) opt.fail("a non-empty name");
  if (id.size() > k_max_id_length) {
    opt.fail(fmt::format("at most {} characters", k_max_id_length),
             fmt::format("{} characters", id.size()));
  }
  if (id == "." || id == "..") opt.fail("a name other than . or ..");
  for (unsigned char c : id) {
    if (c == '/') opt.fail("a name without '/'");
    if (std::isspace(c) || is_control(c)) {
      opt.fail("a name without whitespace or control characters");
    }
  }
  return id;
}

std::string fingerprint(const option& opt) {
  constexpr std::string_view expected =
      "a SHA-256 fingerprint: 32 hex bytes separated by colons (aa:bb:...:ff)";
  if (opt.value.IsNull()) return {};
  std::string f = text(opt, expected);
  if (f.empty()) return f;
  bool ok = f.size() == k_finger_length;
  for (size_t i = 0; ok && i < f.size(); ++i) {
    ok = i % 3 == 2 ? f[i] == ':' : std::isxdigit(static_cast<unsigned char>(f[i])) != 0;
  }
  if (!ok) opt.fail(expected);
  std::transform(f.begin(), f.end(), f.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return f;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

template <class Config>
using setter = std::function<void(Config&, const option&)>;

template <class Config>
using option_table = std::map<std::string_view, setter<Config>>;

template <class Config>
void warn_unknown(const std::string& source, int line, const std::string& name,
                  const option_table<Config>& table) {
  std::string_view best;
  size_t best_distance = 3;  // suggest only names within two edits
  for (const auto& entry : table) {
    size_t d = edit_distance(name, entry.first);
    if (d < best_distance) {
      best = entry.first;
      best_distance = d;
    }
  }
  std::string hint = best.empty() ? "" : fmt::format(" (did you mean '{}'?)", best);
  spdlog::warn("config {}: line {}: unknown option '{}' ignored{}", source, line, show(name), hint);
}

// Applies every option of the file to `config`; returns the line of each option seen.
template <class Config>
std::map<std::string, int> apply(const std::string& yaml, const std::string& source,
                                 const option_table<Config>& table, Config& config) {
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(yaml);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) throw error(fmt::format("config {}: invalid YAML: {}", source, e.msg));
    fail_at(source, e.mark.line + 1,
            fmt::format("invalid YAML at column {}: {}", e.mark.column + 1, e.msg));
  }
  if (docs.size() > 1) {
    fail_at(source, docs[1].Mark().line + 1,
            "a second YAML document; put all options in one mapping");
  }
  std::map<std::string, int> seen;
  if (docs.empty() || docs[0].IsNull()) return seen;
  const YAML::Node& root = docs[0];
  if (!root.IsMap()) {
    fail_at(
        source, root.Mark().line + 1,
        fmt::format("the top level must be a mapping of option: value, got {}", describe(root)));
  }
  for (const auto& kv : root) {
    int line = kv.first.Mark().line + 1;
    if (!kv.first.IsScalar()) {
      fail_at(source, line,
              fmt::format("an option name must be a word, got {}", describe(kv.first)));
    }
    const std::string& name = kv.first.Scalar();
    // Salt's loader refuses duplicate keys too; silently taking one would hide a mistake.
    if (auto [it, fresh] = seen.emplace(name, line); !fresh) {
      fail_at(source, line,
              fmt::format("{} is set twice (first on line {}); keep one", show(name), it->second));
    }
    auto handler = table.find(name);
    if (handler == table.end()) {
      warn_unknown(source, line, name, table);
      continue;
    }
    handler->second(config, option{source, name, line, kv.second});
  }
  return seen;
}

template <class Config, class T>
setter<Config> set(T Config::*field, T (*parse)(const option&)) {
  return [=](Config& config, const option& opt) { config.*field = parse(opt); };
}

template <class Config, class T>
setter<Config> set_int(T Config::*field, uint64_t min, uint64_t max, std::string_view unit = {}) {
  return [=](Config& config, const option& opt) {
    config.*field = static_cast<T>(integer(opt, min, max, unit));
  };
}

const option_table<master_config>& master_options() {
  using c = master_config;
  static const option_table<c> table = {
      {"interface", set(&c::interface, ip_address)},
      {"port", set_int(&c::port, 1, 65535)},
      {"pki_dir", set(&c::pki_dir, required_path)},
      {"cachedir", set(&c::cachedir, required_path)},
      {"sock_dir", set(&c::sock_dir, required_path)},
      {"auto_accept", set(&c::auto_accept, boolean)},
      {"autosign_file", set(&c::autosign_file, optional_path)},
      {"autoreject_file", set(&c::autoreject_file, optional_path)},
      {"max_frame_bytes",
       set_int(&c::max_frame_bytes, k_min_frame_bytes, k_max_frame_bytes, "bytes")},
      {"log_file", set(&c::log_file, log_file)},
      {"log_level", set(&c::log_level, log_level)},
      {"keep_jobs", set_int(&c::keep_jobs, 1, k_u32_max, "hours")},
      {"worker_threads", set_int(&c::worker_threads, 0, 64)},
      {"max_concurrent_handshakes", set_int(&c::max_concurrent_handshakes, 1, k_u32_max)},
      {"handshake_timeout", set_int(&c::handshake_timeout, 1, k_u32_max, "seconds")},
      // Bounded so that idle + cnt * intvl, in milliseconds, fits TCP_USER_TIMEOUT.
      {"tcp_keepalive", set(&c::tcp_keepalive, boolean)},
      {"tcp_keepalive_idle", set_int(&c::tcp_keepalive_idle, 1, 86400, "seconds")},
      {"tcp_keepalive_cnt", set_int(&c::tcp_keepalive_cnt, 1, 127)},
      {"tcp_keepalive_intvl", set_int(&c::tcp_keepalive_intvl, 1, 3600, "seconds")},
  };
  return table;
}

const option_table<minion_config>& minion_options() {
  using c = minion_config;
  static const option_table<c> table = {
      {"id", set(&c::id, minion_id)},
      {"master", set(&c::master, master_address)},
      {"master_port", set_int(&c::master_port, 1, 65535)},
      {"master_finger", set(&c::master_finger, fingerprint)},
      {"pki_dir", set(&c::pki_dir, required_path)},
      {"cachedir", set(&c::cachedir, required_path)},
      {"acceptance_wait_time", set_int(&c::acceptance_wait_time, 1, k_u32_max, "seconds")},
      {"acceptance_wait_time_max", set_int(&c::acceptance_wait_time_max, 0, k_u32_max, "seconds")},
      {"master_alive_interval", set_int(&c::master_alive_interval, 1, k_u32_max, "seconds")},
      {"job_timeout", set_int(&c::job_timeout, 1, k_u32_max, "seconds")},
      {"max_frame_bytes",
       set_int(&c::max_frame_bytes, k_min_frame_bytes, k_max_frame_bytes, "bytes")},
      {"log_file", set(&c::log_file, log_file)},
      {"log_level", set(&c::log_level, log_level)},
  };
  return table;
}

std::string read_config(const std::string& path) {
  try {
    return read_file(path);
  } catch (const error& e) {
    throw error(std::string("config ") + e.what());
  }
}

}  // namespace

master_config parse_master_config(const std::string& yaml, const std::string& source) {
  master_config config;
  config.source = source;
  apply(yaml, source, master_options(), config);
  return config;
}

minion_config parse_minion_config(const std::string& yaml, const std::string& source) {
  minion_config config;
  config.source = source;
  auto seen = apply(yaml, source, minion_options(), config);
  if (!seen.contains("id")) config.id = host_name();
  if (config.acceptance_wait_time_max != 0 &&
      config.acceptance_wait_time_max < config.acceptance_wait_time) {
    fail_at(source, seen.at("acceptance_wait_time_max"),
            fmt::format("acceptance_wait_time_max must be 0 or at least acceptance_wait_time ({}), "
                        "got {}",
                        config.acceptance_wait_time, config.acceptance_wait_time_max));
  }
  return config;
}

master_config load_master_config(const std::string& path) {
  return parse_master_config(read_config(path), path);
}

minion_config load_minion_config(const std::string& path) {
  return parse_minion_config(read_config(path), path);
}

}  // namespace brine::base
