#pragma once

#include <asio/awaitable.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "states/registry.h"

namespace brine::modules {
class minion_context;
class registry;
}  // namespace brine::modules

// The state runner: Salt 3006's State.call_chunks, call_chunk, call and
// call_listen over a minion's ordered low chunks (what src/state compiles).
// It runs each chunk's state function once its requisites allow (require,
// watch with mod_watch, onchanges, onfail, prereq with its test run first,
// listen at the end), with the global arguments (unless, onlyif, creates,
// check_cmd, retry, parallel, failhard), and returns Salt's `running` dict:
// tag -> the state's return with __sls__, __run_num__, start_time,
// duration and __id__, in the order the states ran.
namespace brine::apply {

using json = nlohmann::ordered_json;

struct settings {
  const states::registry* states = nullptr;
  // The minion's execution functions and the minion itself: state modules
  // call them (cmd.run runs cmd.run_all), and so do unless/onlyif.
  const modules::registry* functions = nullptr;
  modules::minion_context* context = nullptr;
  bool test = false;      // test=True: nothing changes, result None where it would
  bool failhard = false;  // the minion's failhard option
  std::string jid;
  std::chrono::seconds timeout{3600};
  // The compiler that compiled the run's chunks: the run's templates render
  // with it (states::run_data). Null: they make their own.
  std::shared_ptr<state::compiler> compiler;
};

// One run over one list of chunks. Lifecycle: made, run() once, dropped.
// Threading: run() and the state functions it awaits run on the caller's
// executor; parallel states run as coroutines of their own on it.
class runner {
 public:
  explicit runner(settings s);
  ~runner();
  runner(const runner&) = delete;
  runner& operator=(const runner&) = delete;

  // Salt's call_chunks followed by call_listen.
  asio::awaitable<json> run(json chunks);
  // state.sls_id: call_chunk for each chunk whose __id__ is `id` (with its
  // requisites), each from an empty running dict; empty when none matched.
  asio::awaitable<json> run_id(json chunks, std::string id);
  // state.single and state.low: State.call on one chunk, keyed by its tag;
  // Salt's verify_data errors (a list) when the chunk cannot be called.
  asio::awaitable<json> run_single(json low);

  struct impl;

 private:
  std::unique_ptr<impl> p_;
};

// Salt's tag of a low chunk: state_|-id_|-name_|-fun.
std::string tag_of(const json& low);

// What makes a run's result a failure for the retcode: any state whose
// result is False (Salt's check_result on a highstate return).
bool any_failed(const json& running);

}  // namespace brine::apply
