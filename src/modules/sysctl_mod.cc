// The sysctl module: Salt's linux_sysctl, sysctl.*. Values are read and set
// with the sysctl tool; persist keeps `name = value` in a configuration file
// (Salt's default: /etc/sysctl.d/99-salt.conf where systemd runs,
// /etc/sysctl.conf elsewhere).

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace sysctl_mod {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Salt's default_config: systemd (booted) reads /etc/sysctl.d.
std::string default_config() {
  std::error_code ec;
  return fs::is_directory("/run/systemd/system", ec) ? "/etc/sysctl.d/99-salt.conf"
                                                      : "/etc/sysctl.conf";
}

// A sysctl name: letters, digits and . / _ - *, as the kernel's names are.
std::string key_name(const arguments& a) {
  std::optional<std::string> name = a.text("name");
  if (!name || name->empty()) a.fail("needs the name: " + a.fun() + " NAME");
  for (char ch : *name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '/' && ch != '_' &&
        ch != '-' && ch != '*' && ch != ':') {
      a.fail("name must be a sysctl name, got '" + *name + "'");
    }
  }
  if (name->front() == '-') a.fail("name must not start with '-', got '" + *name + "'");
  return *name;
}

std::string value_text(const arguments& a) {
  const json* v = a.get("value");
  if (v == nullptr) a.fail("needs the value: " + a.fun() + " NAME VALUE");
  std::string text = v->is_boolean() ? (v->get<bool>() ? "True" : "False")
                                     : v->is_string() ? v->get<std::string>() : v->dump();
  if (text.find_first_of("\r\n") != std::string::npos) a.fail("value must be one line");
  return text;
}

asio::awaitable<process_result> run_sysctl(std::chrono::seconds limit,
                                           std::vector<std::string> argv) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

// Salt's get: `sysctl -n NAME`'s output (cmd.run: stdout and stderr, stripped).
asio::awaitable<std::string> current(std::chrono::seconds limit, std::string name) {
  std::vector<std::string> argv = {"sysctl", "-n", name};
  process_result r = co_await run_sysctl(limit, std::move(argv));
  std::string out = r.stdout_text;
  if (!r.stderr_text.empty()) out += (out.empty() ? "" : "\n") + r.stderr_text;
  co_return trim(out);
}

// Whitespace runs as one tab (Salt's _sanitize_sysctl_value).
std::string sanitize(const std::string& value) {
  std::string out;
  bool space = false;
  for (char ch : value) {
    if (std::isspace(static_cast<unsigned char>(ch))) {
      space = true;
      continue;
    }
    if (space) out += '\t';
    space = false;
    out += ch;
  }
  if (space) out += '\t';
  return out;
}

// Salt's assign: `sysctl -w NAME=VALUE`, checked by what sysctl echoes.
asio::awaitable<json> assign(std::chrono::seconds limit, std::string name, std::string value) {
  std::string path = "/proc/sys/";
  for (char ch : name) path += ch == '.' ? '/' : ch == '/' ? '.' : ch;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw tool_failure("sysctl " + name + " does not exist");
  std::vector<std::string> argv = {"sysctl", "-w", name + "=" + value};
  process_result r = co_await run_sysctl(limit, std::move(argv));
  std::string out = trim(r.stdout_text);
  std::string err = trim(r.stderr_text);
  // sysctl prints "NAME = VALUE"; Salt matches NAME\s+=\s+VALUE exactly.
  bool matched = false;
  if (out.starts_with(name)) {
    std::size_t i = name.size();
    std::size_t spaces = i;
    while (i < out.size() && std::isspace(static_cast<unsigned char>(out[i]))) ++i;
    if (i > spaces && i < out.size() && out[i] == '=') {
      std::size_t j = ++i;
      while (i < out.size() && std::isspace(static_cast<unsigned char>(out[i]))) ++i;
      matched = i > j && out.substr(i) == value;
    }
  }
  if (!matched || err.find("Invalid argument") != std::string::npos) {
    std::string error = r.retcode != 0 && !err.empty() ? err : out;
    throw tool_failure("sysctl -w failed: " + error);
  }
  json ret = json::object();
  auto eq = out.find(" = ");
  ret[out.substr(0, eq)] = eq == std::string::npos ? "" : out.substr(eq + 3);
  co_return ret;
}

asio::awaitable<outcome> get(call c) {
  arguments a("sysctl.get", c, {"name"});
  std::string name = key_name(a);
  std::string out = co_await current(c.timeout, name);
  co_return outcome{out};
}

asio::awaitable<outcome> show(call c) {
  arguments a("sysctl.show", c, {"config_file"});
  const json* file = a.get("config_file");
  json ret = json::object();
  if (file != nullptr && !(file->is_boolean() && !file->get<bool>())) {
    std::string path = a.text_of("config_file", *file);
    std::error_code ec;
    if (!fs::exists(path, ec)) co_return outcome{json::array()};  // Salt's []
    std::ifstream in(path);
    if (!in) co_return outcome{nullptr};  // Salt's None: unreadable
    std::string line;
    while (std::getline(in, line)) {
      line = trim(line);
      if (line.starts_with("#")) continue;
      auto eq = line.find('=');
      if (eq == std::string::npos) continue;
      std::string key = line.substr(0, eq);
      key.erase(key.find_last_not_of(" \t") + 1);
      std::string value = line.substr(eq + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      ret[key] = value;
    }
    co_return outcome{ret};
  }
  std::vector<std::string> argv = {"sysctl", "-a"};
  process_result r = co_await run_sysctl(c.timeout, std::move(argv));
  std::istringstream lines(r.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    auto eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    ret[line.substr(0, eq)] = line.substr(eq + 3);
  }
  co_return outcome{ret};
}

asio::awaitable<outcome> assign_fn(call c) {
  arguments a("sysctl.assign", c, {"name", "value"});
  std::string name = key_name(a);
  std::string value = value_text(a);
  json ret = co_await assign(c.timeout, name, value);
  co_return outcome{ret};
}

asio::awaitable<outcome> default_config_fn(call c) {
  arguments a("sysctl.default_config", c, {});
  co_return outcome{default_config()};
}

// Salt's persist: the configuration file holds `name = value` (the line of
// the name edited in place, or appended), and the running value is set.
// "Updated", or "Already set" when both were so.
asio::awaitable<outcome> persist(call c) {
  arguments a("sysctl.persist", c, {"name", "value", "config"});
  std::string name = key_name(a);
  std::string value = value_text(a);
  std::string config = a.text("config").value_or("");
  if (config.empty()) config = default_config();
  std::error_code ec;
  if (!fs::is_regular_file(config, ec)) {
    fs::path dir = fs::path(config).parent_path();
    if (!dir.empty() && !fs::exists(dir, ec)) fs::create_directories(dir, ec);
    std::ofstream out(config, std::ios::trunc);
    out << "#\n# Kernel sysctl configuration\n#\n";
    if (!out) throw tool_failure("Could not write to file: " + config);
  }
  std::vector<std::string> lines;
  {
    std::ifstream in(config, std::ios::binary);
    if (!in) throw tool_failure("Could not read from file: " + config);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line + "\n");
    // A last line without its newline stays without it.
    in.clear();
    in.seekg(0, std::ios::end);
    if (!lines.empty() && in.tellg() > 0) {
      in.seekg(-1, std::ios::end);
      char last = 0;
      in.get(last);
      if (last != '\n') lines.back().pop_back();
    }
  }
  std::vector<std::string> out;
  bool edited = false;
  for (const auto& line : lines) {
    auto eq = line.find('=');
    if (eq == std::string::npos) {
      out.push_back(line);
      continue;
    }
    std::string key = trim(line.substr(0, eq));
    if (key.starts_with("#") || key != name) {
      out.push_back(line);
      continue;
    }
    std::string have = trim(line.substr(eq + 1));
    if (sanitize(have) == sanitize(value)) {
      // Right in the file: is it right in the kernel?
      std::string running = co_await current(c.timeout, name);
      if (sanitize(running) != sanitize(value)) {
        co_await assign(c.timeout, name, value);
        co_return outcome{"Updated"};
      }
      co_return outcome{"Already set"};
    }
    out.push_back(name + " = " + value + "\n");
    edited = true;
  }
  if (!edited) out.push_back(name + " = " + value + "\n");
  {
    std::ofstream file(config, std::ios::binary | std::ios::trunc);
    for (const auto& line : out) file << line;
    if (!file) throw tool_failure("Could not write to file: " + config);
  }
  co_await assign(c.timeout, name, value);
  co_return outcome{"Updated"};
}

}  // namespace
}  // namespace sysctl_mod

void register_sysctl_module(registry& reg) {
  using namespace sysctl_mod;
  reg.add("sysctl.get", failures_as_outcomes<get>,
          "sysctl.get NAME: returns the running value (sysctl -n NAME's output; its error text "
          "when there is no such key, as Salt's).\n"
          "CLI Example: brine cmd '*' sysctl.get net.ipv4.ip_forward");
  reg.add("sysctl.show", failures_as_outcomes<show>,
          "sysctl.show [config_file]: returns every running value (sysctl -a) as {name: value}, "
          "or the values a configuration file sets ([] when it does not exist).\n"
          "CLI Example: brine cmd '*' sysctl.show config_file=/etc/sysctl.d/99-salt.conf");
  reg.add("sysctl.assign", failures_as_outcomes<assign_fn>,
          "sysctl.assign NAME VALUE: sets the running value with sysctl -w, returns {name: "
          "value}; fails when the key does not exist or sysctl refuses the value.\n"
          "CLI Example: brine cmd '*' sysctl.assign net.ipv4.ip_forward 1");
  reg.add("sysctl.persist", failures_as_outcomes<persist>,
          "sysctl.persist NAME VALUE [config]: writes 'NAME = VALUE' to the configuration file "
          "(sysctl.default_config's by default) and sets the running value; returns 'Updated' "
          "or 'Already set'.\n"
          "CLI Example: brine cmd '*' sysctl.persist net.ipv4.ip_forward 1");
  reg.add("sysctl.default_config", failures_as_outcomes<default_config_fn>,
          "sysctl.default_config: returns the file sysctl.persist writes by default: "
          "/etc/sysctl.d/99-salt.conf where systemd runs, /etc/sysctl.conf elsewhere.\n"
          "CLI Example: brine cmd '*' sysctl.default_config");
}

}  // namespace brine::modules
