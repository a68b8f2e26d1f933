#pragma once

// A state module test's fixture: every built-in state and execution
// function registered, a state function called as the runner calls it,
// and a fresh temporary directory for the files it touches. Fixtures whose
// states need a minion (options, pillar, salt://) point context_ at
// minion_; those that need a run's shared data point per_run_ at run_.

#include <gtest/gtest.h>
#include <sys/types.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "fileserver/client.h"
#include "modules/context.h"
#include "modules/registry.h"
#include "states/registry.h"
#include "support/temp_dir.h"

namespace brine::states {

// The minion as state functions see it: the options, grains and pillar the
// test sets, and its file_roots (or the file client the test gives) for
// salt://.
class fake_minion : public modules::minion_context {
 public:
  explicit fake_minion(const modules::registry& reg) : reg_(reg) {}
  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override {
    return std::make_shared<nlohmann::json>(grains_);
  }
  std::shared_ptr<const nlohmann::json> pillar() const override {
    return std::make_shared<nlohmann::json>(pillar_);
  }
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override { return ""; }
  const modules::registry& functions() const override { return reg_; }
  fileserver::client& files() override {
    return files_ != nullptr ? *files_ : minion_context::files();
  }
  void refresh_grains() override {}
  bool refresh_pillar(std::string&) override { return false; }
  std::vector<modules::running_job> running() const override { return {}; }
  bool kill_job(const std::string&) override { return false; }

  nlohmann::json opts_ = nlohmann::json::object();
  nlohmann::json grains_ = nlohmann::json::object();
  nlohmann::json pillar_ = nlohmann::json::object();
  // Where salt:// is read; null: the file_roots of opts_.
  fileserver::client* files_ = nullptr;

 private:
  const modules::registry& reg_;
  std::string id_ = "m1";
};

class state_fixture : public ::testing::Test {
 protected:
  explicit state_fixture(const std::string& dir_prefix = "brine-file-states") : dir_(dir_prefix) {
    register_builtin_states(states_);
    modules::register_builtin_modules(functions_);
  }

  // Calls the state function `fun` with `low` and answers its return; one
  // that has not finished within timeout_ (and half a minute) fails the
  // test.
  json call(const std::string& fun, json low, bool test = false) {
    const registry::entry* e = states_.find(fun);
    EXPECT_NE(e, nullptr) << fun;
    if (e == nullptr) return json();
    state_call c;
    c.low = std::move(low);
    c.test = test;
    c.functions = table_;
    c.context = context_;
    c.per_run = per_run_;
    c.timeout = timeout_;
    asio::io_context io;
    json out;
    asio::co_spawn(io, e->fn(std::move(c)), [&](std::exception_ptr ex, json r) {
      if (ex) std::rethrow_exception(ex);
      out = std::move(r);
    });
    io.run_for(timeout_ + std::chrono::seconds(30));
    EXPECT_FALSE(out.is_null()) << fun << " did not finish in time";
    return out;
  }

  // What the execution function `fun` returns (a failure fails the test).
  json run_fn(const std::string& fun, json args = json::array(), json kwargs = json::object()) {
    modules::call c;
    c.fun = fun;
    c.args = std::move(args);
    c.kwargs = std::move(kwargs);
    asio::io_context io;
    std::optional<modules::outcome> out;
    asio::co_spawn(io, modules::execute(functions_, std::move(c)),
                   [&](std::exception_ptr ex, modules::outcome r) {
                     if (ex) std::rethrow_exception(ex);
                     out = std::move(r);
                   });
    io.run_for(std::chrono::seconds(60));
    EXPECT_TRUE(out && out->success) << fun << ": " << (out ? out->ret.dump() : "no answer");
    return out ? json(out->ret) : json();
  }

  std::string path(const std::string& name) const { return dir_.file(name); }

  // The file `name` in the test's directory.
  void write(const std::string& name, const std::string& text) const { put(path(name), text); }
  std::string read(const std::string& name) const { return get(path(name)); }

  // Any file, its directories made as needed.
  static void put(const std::string& file, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file, std::ios::binary) << text;
  }
  static std::string get(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  static bool have_tool(const std::string& tool) {
    return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
  }

  registry states_;
  modules::registry functions_;
  test::temp_dir dir_;
  fake_minion minion_{functions_};
  run_data run_;
  // What call() hands the state: by default the built-in functions and no
  // minion, no run, Salt's hour.
  const modules::registry* table_ = &functions_;
  modules::minion_context* context_ = nullptr;
  run_data* per_run_ = nullptr;
  std::chrono::seconds timeout_{3600};
};

}  // namespace brine::states
