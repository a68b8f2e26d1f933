// Salt's cmd_json and cmd_yaml ext_pillar: a command's output, run on the
// host for each minion ("%s" in it is the minion's id), as JSON or YAML.
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "base/python.h"
#include "base/run_here.h"
#include "ext_pillar/arguments.h"
#include "ext_pillar/ext_pillar.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "render/yaml.h"

namespace brine::ext_pillar {

using nlohmann::ordered_json;

namespace cmd {
namespace {

std::string rstrip(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

// The command of the entry, with the minion's id for "%s".
std::string command_of(const pillar::options::ext_call& call) {
  auto args = detail::bind(call.config, {{"command", std::nullopt}});
  if (!args[0].is_string()) {
    throw base::error("the command must be a string, got " + args[0].dump());
  }
  return base::python_replace(args[0].get<std::string>(), "%s", call.id);
}

// Salt's cmd.run as another module calls it: no shell (the command split as
// shlex splits it), stderr into stdout, in the home directory, output
// without trailing white space. `shell`: cmd.run_stdout(python_shell=True),
// through /bin/sh, stdout only.
std::string run(const std::string& command, bool shell) {
  modules::process_options o;
  if (shell) {
    o.shell_command = command;
  } else {
    o.argv = modules::shlex_split("cmd_json", command);
    if (o.argv.empty()) throw base::error("the command is empty");
    o.merge_stderr = true;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') o.cwd = home;
  auto r = base::run_here<modules::process_result>(
      [&o] { return modules::run_process(std::move(o)); });
  return rstrip(std::move(r.stdout_text));
}

}  // namespace
}  // namespace cmd

pillar::options::ext_function cmd_json() {
  return [](const pillar::options::ext_call& call) -> ordered_json {
    std::string command = cmd::command_of(call);
    try {
      return ordered_json::parse(cmd::run(command, false));
    } catch (const std::exception&) {
      // Salt's words; its data, the output, is not logged.
      spdlog::critical("JSON data from {} failed to parse", command);
      return ordered_json::object();
    }
  };
}

pillar::options::ext_function cmd_yaml() {
  return [](const pillar::options::ext_call& call) -> ordered_json {
    std::string command = cmd::command_of(call);
    try {
      return render::load_yaml<ordered_json>(cmd::run(command, true), "cmd_yaml");
    } catch (const std::exception& e) {
      // Salt logs the output too; it may hold secrets, so brine names the
      // reason instead.
      spdlog::critical("YAML data from '{}' failed to parse ({})", command, e.what());
      return ordered_json::object();
    }
  };
}

}  // namespace brine::ext_pillar
