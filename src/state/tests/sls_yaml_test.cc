// The data of an sls's YAML is shared between compiles (highstate.cc's
// yaml cache): a compile changing its data (an include taken out) leaves
// the next compile's intact, and an edited file is read afresh.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "modules/registry.h"
#include "state/bridge.h"
#include "state/highstate.h"

namespace brine::state {
namespace {

namespace fs = std::filesystem;

std::string lowstate(const fs::path& root, const modules::registry& reg) {
  options o;
  o.file_roots = {{"base", {root.string()}}};
  minion m;
  m.id = "minion1";
  m.grains = json::object();
  m.pillar = json::object();
  m.opts = json::object();
  compiler c(o, m);
  c.set_salt(make_salt(c, reg, nullptr));
  auto r = c.show_lowstate();
  EXPECT_EQ(r.retcode, 0) << r.ret.dump();
  return r.ret.dump();
}

TEST(SlsYaml, CompilesOfTheSameTextEachGetTheirOwnData) {
  fs::path root = fs::temp_directory_path() / ("brine-sls-yaml-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "top.sls") << "base:\n  '*':\n    - a\n";
  std::ofstream(root / "a.sls") << "include:\n  - b\n/etc/a:\n  file.managed: []\n";
  std::ofstream(root / "b.sls") << "/etc/b:\n  file.managed: []\n";
  modules::registry reg;
  modules::register_builtin_modules(reg);
  std::string first = lowstate(root, reg);
  EXPECT_NE(first.find("/etc/b"), std::string::npos) << first;
  EXPECT_EQ(lowstate(root, reg), first);
  std::ofstream(root / "b.sls") << "/etc/c:\n  file.managed: []\n";
  std::string edited = lowstate(root, reg);
  fs::remove_all(root);
  EXPECT_EQ(edited.find("/etc/b"), std::string::npos) << edited;
  EXPECT_NE(edited.find("/etc/c"), std::string::npos) << edited;
}

}  // namespace
}  // namespace brine::state
