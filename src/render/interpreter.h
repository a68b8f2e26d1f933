#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "render/ast.h"
#include "render/render.h"

// The tree-walking evaluator behind render(), and the built-in filters,
// tests, methods and globals it calls. One interpreter per render call.
namespace brine::render::detail {

struct frame : std::enable_shared_from_this<frame> {
  std::map<std::string, value> vars;
  std::shared_ptr<frame> parent;
  // A macro's frame, whose varargs/kwargs/caller an include does not see.
  bool macro = false;
};

class interpreter;

// What the templates of one render share: the templates loaded (parsed
// once), the modules imported without context (run once, as Jinja caches
// them), the interpreters of included and imported templates (kept until
// the render ends, since their macros may still be called), the chain of
// templates being loaded (to stop a template that includes itself without
// end) and the step count.
struct render_state {
  const environment& env;
  parse_options opts;
  std::map<std::string, std::shared_ptr<const template_tree>> templates;
  std::map<std::string, value> modules;
  std::vector<std::unique_ptr<context>> contexts;
  std::vector<std::unique_ptr<interpreter>> children;
  std::vector<std::string> chain;
  std::uint64_t steps = 0;
  int depth = 0;  // calls in progress, across all the render's templates
};

// parse_template through a cache that all renders of the process share.
// A tree is immutable once parsed, and a master compiling a state tree for
// many minions renders the same sls files again and again, each importing
// the same map.jinja and macro files: each distinct (name, options, source)
// is lexed and parsed once. Keyed by the source itself, not a path and
// mtime, so an edited file is parsed afresh. The least recently used trees
// go once the sources held pass a bound. Thread-safe; a parse error is not
// cached.
std::shared_ptr<const template_tree> shared_template(const std::string& source,
                                                    const std::string& name,
                                                    const parse_options& opts);

// An error in a template another one loaded: `what` is the innermost
// message, `trail` the tags that led there, innermost first.
class nested_error : public located_error {
 public:
  nested_error(std::string head, std::string trail)
      : located_error(head + " (" + trail + ")"), head_(std::move(head)), trail_(std::move(trail)) {}
  const std::string& head() const { return head_; }
  const std::string& trail() const { return trail_; }

 private:
  std::string head_;
  std::string trail_;
};

class interpreter {
 public:
  interpreter(const context& ctx, const environment& env, std::string name,
              render_state* state = nullptr)
      : ctx_(ctx),
        env_(env),
        name_(std::move(name)),
        current_(std::make_shared<frame>()),
        root_(current_),
        state_(state) {}

  // Runs a whole template: registers its blocks, executes its body and,
  // when it extends another, that one with the same variables. `tpldir` is
  // the directory its relative names resolve against.
  void run_template(const template_tree& t, const std::string& tpldir, std::string& out,
                    bool register_blocks = true);
  // Salt's per-template tplfile/tpldir/tpldot, seen in place of the globals'.
  void set_template_globals(context g) { template_globals_ = std::move(g); }

  // Runs the template. Afterwards, containers the template made into cycles
  // are emptied, since values have no cycle collector.
  void run(const template_tree& t, const std::string& tpldir, std::string& out);
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

  struct block_ref {
    const stmt* s;
    std::string template_name;
  };
  // A template found by the loader, with the tpldir it resolves against and
  // Salt's tplfile/tpldir/tpldot for it.
  struct found_template {
    std::shared_ptr<const template_tree> tree;
    std::string tpldir;
    context globals;
  };
  std::optional<found_template> find_template(const value& names, bool ignore_missing,
                                              const stmt& at, const char* how);
  std::optional<found_template> load(const std::string& name, const stmt& at, const char* how);
  context visible() const;
  interpreter& child(context ctx, const found_template& t);
  void run_nested(interpreter& in, const found_template& t, const stmt& at, const char* how,
                  std::string& out, bool register_blocks = true);
  std::string trail(const stmt& at, const char* how) const;
  value import_module(const stmt& s);
  std::string render_block(const std::string& name, std::size_t index);
  value template_reference();
  void step();
  void exec_loader_tag(const stmt& s, std::string& out);
  value parse_data(const std::string& format, const std::string& text);

  const context& ctx_;
  const environment& env_;
  std::string name_;
  std::shared_ptr<frame> current_;
  flow flow_ = flow::normal;
  const value* filter_input_ = nullptr;
  int depth_ = 0;
  std::vector<std::shared_ptr<frame>> closures_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  std::shared_ptr<frame> root_;
  render_state* state_;
  std::string tpldir_ = ".";
  context template_globals_;
  std::map<std::string, std::vector<block_ref>> blocks_;
  std::shared_ptr<const template_tree> parent_;
  std::string parent_tpldir_;
  context parent_globals_;
  const stmt* extends_at_ = nullptr;
  int own_output_ = 0;  // macros and blocks being run, which write even after extends
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

// While a render with a step budget (environment::max_steps) runs on this
// thread, building a string or list of n elements costs n steps: charges
// them, throwing template_error past the budget. Without a budget, nothing.
void charge_steps(std::uint64_t n);

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
