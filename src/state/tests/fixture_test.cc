// Compiles every state tree of tests/fixtures/states for every platform
// recorded there and compares with Salt 3006.26's own output (see that
// README): the data of `salt-call --local ... --out=json` under "local",
// byte for byte after parsing (same values, same key order), and the exit
// status. Calls of functions that are not the state compiler's
// (pillar.items, state.sls) are left out.
//
// The minion is configured as the fixtures were recorded: id minion1,
// file_roots base (and dev where the tree has salt-dev/), pillar_roots
// base, grains from the shared fixture grains with grains_blacklist ['*'].

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>
#include <fstream>
#include <sstream>

#include "modules/registry.h"
#include "pillar/pillar.h"
#include "render/yaml.h"
#include "state/bridge.h"
#include "state/highstate.h"

namespace brine::state {
namespace {

namespace fs = std::filesystem;

// Cases that fail today, each with the reason; `*` matches any platform or
// call. A case listed here that passes fails the test too, so the list is
// kept honest.
struct expected_failure {
  const char* tree;
  const char* platform;
  const char* call;
  const char* reason;
};
const std::vector<expected_failure> k_expected_failures = {
#include "fixture_xfail.inc"
};

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const expected_failure* xfail(const std::string& tree, const std::string& platform,
                              const std::string& call) {
  for (const auto& x : k_expected_failures) {
    auto match = [](const char* pattern, const std::string& s) {
      return std::string(pattern) == "*" || s == pattern;
    };
    if (match(x.tree, tree) && match(x.platform, platform) && match(x.call, call)) return &x;
  }
  return nullptr;
}

struct parsed_call {
  std::string fun;
  std::vector<std::string> args;
  json kwargs = json::object();
};

parsed_call parse_call(const std::string& line) {
  parsed_call c;
  std::istringstream words(line);
  std::string w;
  words >> c.fun;
  while (words >> w) {
    auto eq = w.find('=');
    if (eq != std::string::npos) {
      c.kwargs[w.substr(0, eq)] = w.substr(eq + 1);
    } else {
      c.args.push_back(w);
    }
  }
  return c;
}

struct outcome_text {
  json data;
  int exit = 0;
};

fs::path fixtures_root() { return fs::path(BRINE_SOURCE_DIR) / "tests/fixtures/states"; }
fs::path grains_root() { return fs::path(BRINE_FIXTURE_GRAINS_DIR); }

outcome_text run(const fs::path& tree, const json& grains, const parsed_call& call) {
  options o;
  o.file_roots = {{"base", {(tree / "salt").string()}}};
  if (fs::exists(tree / "salt-dev")) o.file_roots.push_back({"dev", {(tree / "salt-dev").string()}});
  if (call.kwargs.contains("saltenv")) o.saltenv = call.kwargs["saltenv"].get<std::string>();

  pillar::options po;
  po.roots = {{"base", {(tree / "pillar").string()}}};
  auto pc = pillar::compiler::load(po);
  nlohmann::json plain_grains = nlohmann::json(grains);
  auto pr = pc.compile("minion1", &plain_grains);
  nlohmann::ordered_json pillar = std::move(pr.ordered);
  if (!pr.errors.empty()) pillar["_errors"] = pr.errors;

  minion m;
  m.id = "minion1";
  m.grains = grains;
  m.pillar = std::move(pillar);
  m.pillar_ordered_dicts = true;  // salt-call --local compiled it
  nlohmann::json opts = {{"id", "minion1"}, {"file_client", "local"}};
  for (const auto& [env, dirs] : o.file_roots) opts["file_roots"][env] = dirs;
  opts["pillar_roots"]["base"] = {(tree / "pillar").string()};
  m.opts = json(opts);

  static modules::registry reg = [] {
    modules::registry r;
    modules::register_builtin_modules(r);
    return r;
  }();
  compiler c(o, std::move(m));
  c.set_salt(make_salt(c, reg, nullptr));
  result r;
  std::optional<std::string> env;
  if (call.kwargs.contains("saltenv")) env = call.kwargs["saltenv"].get<std::string>();
  if (call.fun == "state.show_top") {
    r = c.show_top();
  } else if (call.fun == "state.show_highstate") {
    r = c.show_highstate();
  } else if (call.fun == "state.show_lowstate") {
    r = c.show_lowstate();
  } else if (call.fun == "state.show_sls") {
    r = c.show_sls(call.args.at(0), env);
  } else if (call.fun == "state.show_low_sls") {
    r = c.show_low_sls(call.args.at(0), env);
  } else {
    json kwargs = call.kwargs;
    std::string def = "jinja|yaml";
    if (kwargs.contains("default_renderer")) {
      def = kwargs["default_renderer"].get<std::string>();
      kwargs.erase("default_renderer");
    }
    r = c.renderer(call.args.at(0), def, kwargs);
  }
  return {r.ret, r.retcode == 0 ? 0 : 1};
}

bool compiler_call(const std::string& fun) {
  return fun == "state.show_top" || fun == "state.show_highstate" ||
         fun == "state.show_lowstate" || fun == "state.show_sls" ||
         fun == "state.show_low_sls" || fun == "slsutil.renderer";
}

TEST(Fixtures, MatchSalt) {
  ASSERT_TRUE(fs::exists(fixtures_root())) << "no fixtures at " << fixtures_root();
  ASSERT_TRUE(fs::exists(grains_root())) << "no fixture grains at " << grains_root();
  std::vector<std::string> trees;
  for (const auto& e : fs::directory_iterator(fixtures_root())) {
    if (e.is_directory() && fs::exists(e.path() / "calls.txt")) {
      trees.push_back(e.path().filename().string());
    }
  }
  std::sort(trees.begin(), trees.end());
  int passed = 0, failed = 0, expected_failed = 0;
  std::string summary;
  for (const auto& tree : trees) {
    fs::path dir = fixtures_root() / tree;
    std::vector<std::pair<std::string, parsed_call>> calls;
    std::istringstream lines(read(dir / "calls.txt"));
    for (std::string line; std::getline(lines, line);) {
      auto tab = line.find('\t');
      if (tab == std::string::npos) continue;
      auto c = parse_call(line.substr(tab + 1));
      if (compiler_call(c.fun)) calls.emplace_back(line.substr(0, tab), c);
    }
    std::vector<std::string> platforms;
    for (const auto& e : fs::directory_iterator(dir / "expected")) {
      platforms.push_back(e.path().filename().string());
    }
    std::sort(platforms.begin(), platforms.end());
    for (const auto& platform : platforms) {
      fs::path exp_dir = dir / "expected" / platform;
      json grains = render::load_yaml<json>(read(grains_root() / (platform + ".yaml")), platform);
      json exits = json::object();
      if (fs::exists(exp_dir / "exit_codes.json")) exits = json::parse(read(exp_dir / "exit_codes.json"));
      for (const auto& [name, call] : calls) {
        fs::path file = exp_dir / (name + ".json");
        if (!fs::exists(file)) continue;
        std::string label = tree + "/" + platform + "/" + name;
        std::string text = read(file);
        // Salt printed nothing on stdout (an exception went to stderr): only
        // the exit status is compared.
        bool no_output = text.find_first_not_of(" \n") == std::string::npos;
        while (!text.empty() && text.back() == '\n') text.pop_back();
        outcome_text got;
        std::string problem;
        try {
          got = run(dir, grains, call);
          json doc = json::object();
          doc["local"] = got.data;
          std::string mine = python_json_dump(doc, 4);
          if (!no_output && mine != text) {
            problem = "output differs:\n--- salt\n" + text + "\n--- brine\n" + mine;
          } else if (exits.contains(name) && exits[name].get<int>() != got.exit) {
            problem = "exit " + std::to_string(got.exit) + ", salt " + exits[name].dump();
          }
        } catch (const std::exception& e) {
          problem = std::string("exception: ") + e.what();
        }
        const expected_failure* x = xfail(tree, platform, name);
        if (problem.empty() && !x) {
          ++passed;
        } else if (problem.empty() && x) {
          ++failed;
          ADD_FAILURE() << label << " passes but is listed as expected to fail (" << x->reason
                        << "): take it off fixture_xfail.inc";
        } else if (x) {
          ++expected_failed;
        } else {
          ++failed;
          ADD_FAILURE() << label << ": " << problem.substr(0, 6000);
        }
        summary += (problem.empty() ? "pass  " : x ? "xfail " : "FAIL  ") + label + "\n";
      }
    }
  }
  std::cout << summary << passed << " pass, " << expected_failed << " expected to fail, " << failed
            << " fail\n";
}

}  // namespace
}  // namespace brine::state
