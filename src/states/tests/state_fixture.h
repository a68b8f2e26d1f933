#pragma once

// A state module test's fixture: every built-in state and execution
// function registered, a state function called as the runner calls it,
// and a fresh temporary directory for the files it touches.

#include <gtest/gtest.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <fstream>
#include <sstream>

#include "modules/registry.h"
#include "states/registry.h"
#include "support/temp_dir.h"

namespace brine::states {

class state_fixture : public ::testing::Test {
 protected:
  state_fixture() {
    register_builtin_states(states_);
    modules::register_builtin_modules(functions_);
  }

  json call(const std::string& fun, json low, bool test = false) {
    const registry::entry* e = states_.find(fun);
    EXPECT_NE(e, nullptr) << fun;
    if (e == nullptr) return json();
    state_call c;
    c.low = std::move(low);
    c.test = test;
    c.functions = &functions_;
    asio::io_context io;
    json out;
    asio::co_spawn(io, e->fn(std::move(c)), [&](std::exception_ptr ex, json r) {
      if (ex) std::rethrow_exception(ex);
      out = std::move(r);
    });
    io.run();
    return out;
  }

  std::string path(const std::string& name) const { return dir_.file(name); }

  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
  }

  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }

  registry states_;
  modules::registry functions_;
  test::temp_dir dir_{"brine-file-states"};
};

}  // namespace brine::states
