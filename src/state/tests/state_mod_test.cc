// state.* through the registry, as a minion runs them: the compile runs on
// the compile pool and the caller's io_context gets the outcome, with the
// data in Salt's key order beside the sorted copy.

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <filesystem>
#include <fstream>

#include "modules/context.h"
#include "modules/registry.h"
#include "state/state_mod.h"

namespace brine::state {
namespace {

namespace fs = std::filesystem;

class fake_context : public modules::minion_context {
 public:
  fake_context(const modules::registry& r, nlohmann::json opts) : reg_(r), opts_(std::move(opts)) {}
  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override {
    return std::make_shared<const nlohmann::json>(nlohmann::json{{"os_family", "Debian"}});
  }
  std::shared_ptr<const nlohmann::json> pillar() const override {
    return std::make_shared<const nlohmann::json>(nlohmann::json{{"pkg", "vim"}});
  }
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override { return "/nonexistent"; }
  const modules::registry& functions() const override { return reg_; }
  void refresh_grains() override {}
  bool refresh_pillar(std::string&) override { return false; }
  std::vector<modules::running_job> running() const override { return {}; }
  bool kill_job(const std::string&) override { return false; }

 private:
  std::string id_ = "minion1";
  const modules::registry& reg_;
  nlohmann::json opts_;
};

// Runs the call as a minion's job runs it, to its outcome.
modules::outcome run_call(const modules::registry& reg, const modules::call& c) {
  asio::io_context io;
  modules::outcome out;
  asio::co_spawn(io, modules::execute(reg, c),
                 [&](std::exception_ptr, modules::outcome r) { out = std::move(r); });
  io.run();
  return out;
}

TEST(StateModule, ShowLowstateRunsOnThePoolInSaltsOrder) {
  fs::path root = fs::temp_directory_path() / ("brine-state-mod-" + std::to_string(::getpid()));
  fs::create_directories(root / "edit");
  std::ofstream(root / "top.sls") << "base:\n  'os_family:Debian':\n    - match: grain\n    - edit\n";
  std::ofstream(root / "edit/init.sls")
      << "{{ salt['pillar.get']('pkg') }}:\n  pkg.installed:\n    - require:\n      - file: /etc/x\n"
         "/etc/x:\n  file.managed: []\n";
  modules::registry reg;
  modules::register_builtin_modules(reg);
  register_state_module(reg);
  fake_context ctx(reg, {{"file_roots", {{"base", {root.string()}}}}});

  modules::call c;
  c.fun = "state.show_lowstate";
  c.context = &ctx;
  modules::outcome out = run_call(reg, c);
  fs::remove_all(root);
  ASSERT_TRUE(out.success) << out.ret.dump();
  ASSERT_TRUE(out.ordered_ret);
  EXPECT_EQ(out.ordered_ret->dump(),
            R"([{"state":"pkg","name":"vim","__sls__":"edit","__env__":"base","__id__":"vim",)"
            R"("require":[{"file":"/etc/x"}],"order":10000,"fun":"installed"},)"
            R"({"state":"file","name":"/etc/x","__sls__":"edit","__env__":"base","__id__":"/etc/x",)"
            R"("order":10001,"fun":"managed"}])");
  EXPECT_EQ(out.ret, nlohmann::json::parse(out.ordered_ret->dump()));
}

TEST(StateModule, ShowSlsErrorsFailTheJob) {
  modules::registry reg;
  register_state_module(reg);
  fake_context ctx(reg, {{"file_roots", {{"base", {"/nonexistent-brine-root"}}}}});
  modules::call c;
  c.fun = "state.show_sls";
  c.args = {"nope"};
  c.context = &ctx;
  modules::outcome out = run_call(reg, c);
  EXPECT_FALSE(out.success);
  EXPECT_EQ(out.retcode, 1);
  EXPECT_EQ(out.ret, nlohmann::json::array({"No matching sls found for 'nope' in env 'base'"}));
}

// A #!py or #!pyobjects file runs Python, which brine never runs: the
// refusal names the renderer, the file and what to write instead.
TEST(StateModule, PythonRenderersAreRefusedByName) {
  fs::path root = fs::temp_directory_path() / ("brine-state-py-" + std::to_string(::getpid()));
  fs::create_directories(root);
  std::ofstream(root / "web.sls") << "#!pyobjects\nPkg.installed('nginx')\n";
  modules::registry reg;
  register_state_module(reg);
  fake_context ctx(reg, {{"file_roots", {{"base", {root.string()}}}}});
  modules::call c;
  c.fun = "state.show_sls";
  c.args = {"web"};
  c.context = &ctx;
  modules::outcome out = run_call(reg, c);
  fs::remove_all(root);
  EXPECT_FALSE(out.success);
  std::string text = out.ret.dump();
  EXPECT_NE(text.find("renderer 'pyobjects' (in " + (root / "web.sls").string() +
                      ") runs Python code, which brine does not run: write the file as "
                      "#!jinja|yaml"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace brine::state
