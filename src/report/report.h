#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// State-run reports (see README.md): what the master keeps of each state run
// that a minion returns, and the pure summary of a return into one.
namespace brine::report {

// How a run ended. Failed wins over changed: a run with one failed state
// and ten changed ones is failed. A test run (test=True) whose states would
// change something (result None) is `changed`: the report's `test` flag says
// the changes are pending, not made.
enum class run_status { unchanged, changed, failed };

// "unchanged", "changed", "failed": stored in the database and typed on the
// command line, so never renamed.
const char* to_string(run_status s);
std::optional<run_status> parse_status(std::string_view s);

// One state of a run, in compact form.
struct state_line {
  std::string tag;       // state_|-id_|-name_|-fun, the key of the return
  std::string id;        // __id__
  std::string function;  // "file.managed"
  std::string name;
  std::optional<bool> result;  // nullopt: None (test=True: it would change)
  bool changes = false;        // its `changes` is not empty
  std::string comment;         // lists joined by newlines, as Salt prints them
  std::string sls;             // __sls__
  std::string start_time;      // as the minion gave it: local HH:MM:SS.ffffff
  double duration_ms = 0;
  int64_t run_num = -1;  // __run_num__; -1 when absent
};

// The states of one state module in a run and their durations summed.
struct module_timing {
  size_t states = 0;
  double ms = 0;
  bool operator==(const module_timing&) const = default;
};

// As Salt's highstate summary counts them: succeeded is result True or None.
struct tally {
  size_t succeeded = 0;
  size_t failed = 0;
  size_t changed = 0;  // states whose `changes` is not empty
  size_t pending = 0;  // result None: would change (test=True)
  size_t total = 0;
  bool operator==(const tally&) const = default;
};

struct report {
  std::string jid;
  std::string minion;
  std::string fun;
  // Unix milliseconds: when the run began, by the master's clock (when its
  // return arrived, less the run's wall duration).
  int64_t started_ms = 0;
  // Wall clock from the first state's start to the last state's end.
  double duration_ms = 0;
  // Salt's "Total run time": the states' durations summed (more than the
  // wall duration when states ran in parallel).
  double run_time_ms = 0;
  run_status status = run_status::unchanged;
  bool test = false;
  int retcode = 0;
  tally counts;
  std::map<std::string, module_timing> timings;  // state module -> its states
  // A run that never ran its states: Salt's compile errors (the return is a
  // list of strings), or any other return that is not a map of states.
  std::vector<std::string> errors;
  // The return as the minion sent it (Salt's key order). Empty (null) in
  // the rows of a list.
  nlohmann::ordered_json ret;
};

// Whether a function's return is a state run that the master keeps as a
// report: state.apply, highstate, sls, sls_id, single and test. (state.low
// answers with one bare state return, state.show_* compile without running.)
bool is_state_run(std::string_view fun);

// What the master knows of a run beside its return.
struct run_facts {
  std::string jid;
  std::string minion;
  std::string fun;
  int retcode = 0;
  int64_t received_ms = 0;  // unix milliseconds, when the return arrived
  // The job's test= (true for state.test); nullopt when the job gave none,
  // and then a run with any result None counts as a test run (the minion's
  // own `test: True` option).
  std::optional<bool> test;
};

// The report of one state run. Pure: never throws on any return shape.
report summarise(const run_facts& facts, nlohmann::ordered_json ret);

// The states of a state run's return in the order they ran (__run_num__);
// empty for a return that is not a map of states.
std::vector<state_line> states_of(const nlohmann::ordered_json& ret);

// The report as JSON (`brine report list/show --out json`): every field,
// `return` only when it is set.
nlohmann::ordered_json to_json(const report& r);

// Timings as stored: {"file": {"states": 2, "ms": 1.5}, ...}, and back
// (nullopt when the text is not such a map).
std::string timings_text(const std::map<std::string, module_timing>& timings);
std::optional<std::map<std::string, module_timing>> parse_timings(const std::string& text);

}  // namespace brine::report
