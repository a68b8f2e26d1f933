#include "cli/cmd_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <string_view>

namespace brine::cli {
namespace {

// Salt's target flags: at most one.
struct target_flag {
  const char* flags;
  const char* type;
  const char* help;
};
constexpr target_flag k_target_flags[] = {
    {"-E,--pcre", "pcre", "TARGET is a regular expression over minion ids"},
    {"-L,--list", "list", "TARGET is a comma-separated list of minion ids"},
    {"-G,--grain", "grain", "TARGET is GRAIN:GLOB (':' walks nested grains)"},
    {"-P,--grain-pcre", "grain_pcre", "TARGET is GRAIN:REGEX"},
    {"-I,--pillar", "pillar", "TARGET is PILLAR_KEY:GLOB"},
    {"-J,--pillar-pcre", "pillar_pcre", "TARGET is PILLAR_KEY:REGEX"},
    {"-S,--ipcidr", "ipcidr", "TARGET is an IP address or CIDR subnet"},
    {"-N,--nodegroup", "nodegroup", "TARGET is a nodegroup of the master config"},
    {"-C,--compound", "compound", "TARGET is a compound expression (G@os:Debian and web*)"},
};

constexpr const char* k_outputs[] = {"nested", "json", "yaml", "raw", "txt", "highstate"};

// Digits with at most one '.', as a number CLI11 reads the same way.
std::optional<double> plain_number(std::string_view s) {
  if (s.empty() || s.size() > 15 || s.front() == '.' || s.back() == '.') return std::nullopt;
  if (std::count(s.begin(), s.end(), '.') > 1) return std::nullopt;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; })) {
    return std::nullopt;
  }
  return std::stod(std::string(s));
}

}  // namespace

void declare_target_flags(CLI::App& sub, std::string& tgt_type) {
  std::vector<CLI::Option*> type_options;
  for (const auto& f : k_target_flags) {
    type_options.push_back(
        sub.add_flag_callback(f.flags, [&tgt_type, type = f.type] { tgt_type = type; }, f.help));
  }
  for (auto* a : type_options) {
    for (auto* b : type_options) {
      if (a != b) a->excludes(b);
    }
  }
}

void declare_cmd_options(CLI::App& sub, cmd_line& line) {
  cmd_options& cmd = line.cmd;
  sub.add_option("-c,--config", line.config, "Master config file (YAML)")
      ->default_val(k_master_config);
  sub.add_option("-t,--timeout", cmd.timeout, "Seconds to wait for returns")
      ->default_val(5)
      ->check(CLI::PositiveNumber);
  sub.add_option("--out", cmd.out,
                 "Output format: nested, json, yaml, raw, txt, highstate (default: highstate "
                 "for the state functions, nested for the rest)")
      ->check(CLI::IsMember({"nested", "json", "yaml", "raw", "txt", "highstate"}));
  sub.add_option("--state-output", cmd.state_output,
                 "The highstate outputter's form: full, terse, mixed, changes");
  sub.add_option("--state-verbose", cmd.state_verbose,
                 "false: leave out successful states that changed nothing");
  sub.add_flag("--no-color", cmd.no_color, "No colours, even on a terminal");
  sub.add_flag("--force-color", cmd.force_color, "Colours, even when not on a terminal");
  sub.add_flag("--static", cmd.static_out, "Print every return at the end, sorted by minion id");
  sub.add_flag("--hide-timeout", cmd.hide_timeout,
               "No lines for minions that did not return (the exit status still says so)");
  sub.add_flag("--show-jid", cmd.show_jid, "Print the job id first");
  sub.add_option("-b,--batch,--batch-size", cmd.batch,
                 "Run on N minions (or N%) at a time, a sliding window");
  sub.add_option("--batch-wait", cmd.batch_wait,
                 "Seconds to wait after a minion returns before its slot takes the next")
      ->check(CLI::NonNegativeNumber);
  declare_target_flags(sub, cmd.tgt_type);
  sub.add_option("--delimiter", cmd.delimiter,
                 "Separator of nested keys in grain and pillar targets")
      ->default_val(":");
  sub.add_flag("--async", cmd.async, "Print the job id and return without waiting");
  sub.add_flag("!--no-progress", cmd.progress, "No live progress line on a terminal");
  sub.add_option("TARGET FUN ARG", line.words,
                 "TARGET (a glob over minion ids by default; see the target flags), the function "
                 "(e.g. test.ping, cmd.run), then its arguments: ARG or KEY=VALUE (YAML)")
      ->required()
      ->expected(2, -1);
}

void finish(cmd_line& line) {
  line.cmd.target = line.words.at(0);
  line.cmd.fun = line.words.at(1);
  line.cmd.words.assign(line.words.begin() + 2, line.words.end());
}

std::optional<cmd_line> read_plain_cmd_line(int argc, char** argv) {
  if (argc < 2 || std::string_view(argv[1]) != "cmd") return std::nullopt;
  cmd_line line;
  line.config = k_master_config;
  cmd_options& cmd = line.cmd;
  std::vector<std::string_view> seen;  // options given, by their long name
  auto once = [&seen](std::string_view name) {
    if (std::find(seen.begin(), seen.end(), name) != seen.end()) return false;
    seen.push_back(name);
    return true;
  };
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.empty() || arg.front() != '-') {
      line.words.emplace_back(arg);
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> attached;  // --name=value
    if (arg.starts_with("--")) {
      if (size_t eq = arg.find('='); eq != std::string_view::npos) {
        name = arg.substr(0, eq);
        attached = arg.substr(eq + 1);
      }
    } else if (arg.size() != 2) {
      return std::nullopt;  // -t5, -EG, a negative number: CLI11's
    }
    // The value of an option that takes one.
    auto value = [&]() -> std::optional<std::string_view> {
      if (attached) return attached->empty() || attached->front() == '-' ? std::nullopt : attached;
      if (i + 1 >= argc) return std::nullopt;
      std::string_view v = argv[i + 1];
      if (v.empty() || v.front() == '-') return std::nullopt;
      ++i;
      return v;
    };
    auto flag = [&](std::string_view long_name, bool& field, bool set) {
      if (attached || !once(long_name)) return false;
      field = set;
      return true;
    };
    bool ok = true;
    if (name == "-c" || name == "--config") {
      auto v = once("--config") ? value() : std::nullopt;
      ok = v.has_value();
      if (ok) line.config = *v;
    } else if (name == "-t" || name == "--timeout") {
      auto v = once("--timeout") ? value() : std::nullopt;
      auto n = v ? plain_number(*v) : std::nullopt;
      ok = n && *n > 0;
      if (ok) cmd.timeout = *n;
    } else if (name == "--out") {
      auto v = once("--out") ? value() : std::nullopt;
      ok = v && std::find(std::begin(k_outputs), std::end(k_outputs), *v) != std::end(k_outputs);
      if (ok) cmd.out = *v;
    } else if (name == "-b" || name == "--batch" || name == "--batch-size") {
      auto v = once("--batch") ? value() : std::nullopt;
      ok = v.has_value();
      if (ok) cmd.batch = *v;
    } else if (name == "--batch-wait") {
      auto v = once("--batch-wait") ? value() : std::nullopt;
      auto n = v ? plain_number(*v) : std::nullopt;
      ok = n.has_value();
      if (ok) cmd.batch_wait = *n;
    } else if (name == "--delimiter") {
      auto v = once("--delimiter") ? value() : std::nullopt;
      ok = v.has_value();
      if (ok) cmd.delimiter = *v;
    } else if (name == "--static") {
      ok = flag(name, cmd.static_out, true);
    } else if (name == "--hide-timeout") {
      ok = flag(name, cmd.hide_timeout, true);
    } else if (name == "--show-jid") {
      ok = flag(name, cmd.show_jid, true);
    } else if (name == "--async") {
      ok = flag(name, cmd.async, true);
    } else if (name == "--no-progress") {
      ok = flag(name, cmd.progress, false);
    } else {
      const target_flag* found = nullptr;
      for (const auto& f : k_target_flags) {
        std::string_view names = f.flags;  // "-E,--pcre"
        size_t comma = names.find(',');
        if (name == names.substr(0, comma) || name == names.substr(comma + 1)) found = &f;
      }
      // At most one target flag: a second is CLI11's error to give.
      ok = found != nullptr && !attached && once("target type");
      if (ok) cmd.tgt_type = found->type;
    }
    if (!ok) return std::nullopt;
  }
  if (line.words.size() < 2) return std::nullopt;
  finish(line);
  return line;
}

}  // namespace brine::cli
