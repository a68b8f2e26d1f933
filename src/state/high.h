#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

// Salt 3006's state compiler on data: the high data of rendered SLS files
// (an ordered dict of ID -> {state: [fun, {arg: value}, ...], __sls__,
// __env__}, plus __extend__ and __exclude__) turned into the ordered list of
// low chunks, with Salt's error texts. Pure functions on values; no I/O.
namespace brine::state {

using json = nlohmann::ordered_json;
using errors = std::vector<std::string>;

// Python's == on decoded JSON (dicts compare without regard to key order).
bool py_equal(const json& a, const json& b);
// Python's str() of a scalar (True, None, 1.5, text as is); repr-ish for
// containers.
std::string py_str(const json& v);
// Python's json.dumps(v, indent=indent) (ensure_ascii, Infinity/NaN):
// what salt-call --out=json prints.
std::string python_json_dump(const json& v, int indent = 4);
// The first key of a dict, "" when empty.
std::string first_key(const json& dict);

// The steps of State.call_high / HighState.compile_low_chunks, each as Salt
// has it.
errors reconcile_extend(json& high, bool strict = false);  // pops __extend__
errors verify_high(const json& high);
// `disabled`: the disabled_requisites option.
errors requisite_in(json& high, const std::vector<std::string>& disabled = {});
void apply_exclude(json& high);  // pops __exclude__
json compile_high_data(const json& high);  // chunks, ordered
void order_chunks(json& chunks);

// reconcile_extend, verify_high, requisite_in, apply_exclude and
// compile_high_data in compile_low_chunks's order: the chunks, or the errors.
struct low_result {
  json chunks = json::array();
  errors errs;
};
low_result compile_low(json high, const std::vector<std::string>& disabled = {});

// The per-file steps of BaseHighState.render_state on one rendered SLS
// (`state`, an object): extend and exclude taken out into __extend__ and
// __exclude__, short and dotted declarations padded, __sls__/__env__ added.
void handle_extend(json& state, const std::string& sls, const std::string& saltenv,
                   errors& errs);
void handle_exclude(json& state, const std::string& sls, const std::string& saltenv,
                    errors& errs);
void handle_state_decls(json& state, const std::string& sls, const std::string& saltenv,
                        errors& errs);
// Salt's iorder: an {order: n} appended to each state declaration without
// one, n counting up from `next` (10000 for a new HighState).
void handle_iorder(json& state, int& next);
// Salt's merge_included_states: `state`'s IDs into `highstate`, with the
// duplicate-ID error.
void merge_included_states(json& highstate, json& state, errors& errs);
void clean_duplicate_extends(json& highstate);

}  // namespace brine::state
