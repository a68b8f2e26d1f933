#pragma once

#include <map>
#include <memory>
#include <string>

#include "render/ast.h"
#include "render/render.h"

// The tree-walking evaluator behind render(), and the built-in filters,
// tests, methods and globals it calls. One interpreter per render call.
namespace brine::render::detail {

struct frame : std::enable_shared_from_this<frame> {
  std::map<std::string, value> vars;
  std::shared_ptr<frame> parent;
};

class interpreter {
 public:
  interpreter(const context& ctx, const environment& env, std::string name)
      : ctx_(ctx), env_(env), name_(std::move(name)), current_(std::make_shared<frame>()) {}

  // Runs the template. Afterwards, containers the template made into cycles
  // are emptied, since values have no cycle collector.
  void run(const body& b, std::string& out);
  void exec(const body& b, std::string& out);
  value eval(const expr& e);

  value call(const value& callee, call_args& args);
  value filter(const std::string& name, const value& input, call_args& args);
  bool test(const std::string& name, const value& input, call_args& args);
  value getattr(const value& obj, const std::string& name);
  value getitem(const value& obj, const value& key);
  value lookup(const std::string& name);

 private:
  enum class flow { normal, break_, continue_ };

  value eval_inner(const expr& e);
  void exec_one(const stmt& s, std::string& out);
  void exec_for(const stmt& s, std::string& out);
  void run_loop(const stmt& s, const value& seq, std::int64_t depth, std::shared_ptr<frame> outer,
                std::string& out);
  void assign(const expr& target, const value& v);
  value make_macro(const stmt& s, const std::string& name, const std::shared_ptr<frame>& closure);
  value eval_call(const expr& e, const value* caller);
  void eval_args(const expr& e, call_args& args, std::size_t first);
  std::string located(int line, int column) const;

  const context& ctx_;
  const environment& env_;
  std::string name_;
  std::shared_ptr<frame> current_;
  flow flow_ = flow::normal;
  const value* filter_input_ = nullptr;
  int depth_ = 0;
  std::vector<std::shared_ptr<frame>> closures_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

// Python's binary operators, `in` and the `%` string format.
value binary_op(const std::string& op, const value& a, const value& b);
bool contains(const value& container, const value& item);
std::string percent_format(const std::string& fmt, const value& args);
// str.format / the `format` filter's helper for one field: format(v, spec).
std::string format_field(const value& v, const std::string& spec);
std::string str_format(const std::string& fmt, const call_args& args);

// While a render runs on this thread: the lists and dicts it changed in place,
// the only ones that can have become cycles (a list that holds itself).
extern thread_local std::vector<value>* mutation_log;

// The bound method `name` of obj, or an undefined value when it has none.
value method(const value& obj, const std::string& name);
// A value's elements as Python's iter() gives them (dict keys, string chars).
std::vector<value> iterate(const value& v);
std::int64_t to_int(const value& v, const char* what);
// Decimal digits as a number; throws template_error when larger than `limit`.
std::int64_t parse_digits(const std::string& digits, std::int64_t limit, const char* what);
value argument(call_args& args, std::size_t pos, const char* name,
               value dflt = value::undefined(""));
bool has_argument(const call_args& args, std::size_t pos, const char* name);

using filter_fn = value (*)(interpreter&, const value&, call_args&);
using test_fn = bool (*)(interpreter&, const value&, call_args&);
const std::map<std::string, filter_fn>& builtin_filters();
const std::map<std::string, test_fn>& builtin_tests();
value builtin_global(const std::string& name);

}  // namespace brine::render::detail
