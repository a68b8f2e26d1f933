#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace brine::cli {

// Salt's state_output and state_verbose options, and whether to colour.
struct highstate_options {
  std::string state_output = "full";  // full, terse, mixed, changes (and *_id)
  bool state_verbose = true;          // false: hide successful states without changes
  bool color = false;
};

// Salt's "highstate" outputter for one minion's answer to a state function:
// each state (ID, Function, Name, Result, Comment, Started, Duration,
// Changes), then the summary (Succeeded with changed=N, Failed, Total states
// run, Total run time). A list is Salt's "Data failed to compile" errors;
// anything else is printed as the nested outputter would. Returns the text,
// ending in a newline.
std::string highstate_out(const std::string& host, const nlohmann::ordered_json& data,
                          const highstate_options& o);

// Whether a function's return is for the highstate outputter (Salt's state
// functions that apply states).
bool is_state_function(const std::string& fun);

}  // namespace brine::cli
