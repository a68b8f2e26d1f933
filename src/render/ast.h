#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "render/value.h"

// The parsed form of a template: expression and statement trees, immutable
// once parse() returns. Positions are 1-based lines and columns of the source.
namespace brine::render::detail {

struct expr;
using expr_ptr = std::unique_ptr<expr>;

struct expr {
  enum class kind {
    literal,
    name,
    list,
    tuple,
    dict,  // args alternate key, value
    getattr,
    getitem,
    slice,   // args: object, start, stop, step (null when absent)
    call,    // args[0] the callee, then positional arguments
    filter,  // args[0] the input (null in a filter block), then arguments
    test,
    binary,
    unary,
    compare,  // args: operands; ops: operators between them
    logic_and,
    logic_or,
    logic_not,
    cond,  // args: value, condition, else (null when absent)
    concat,
  };
  kind k;
  int line = 0;
  int column = 0;
  std::string name;  // name, attribute, filter, test, operator
  value literal;
  std::vector<expr_ptr> args;
  std::vector<std::pair<std::string, expr_ptr>> kwargs;
  expr_ptr dyn_args;    // f(*args)
  expr_ptr dyn_kwargs;  // f(**kwargs)
  std::vector<std::string> ops;
  bool negated = false;
};

struct stmt;
using stmt_ptr = std::unique_ptr<stmt>;
using body = std::vector<stmt_ptr>;

struct macro_param {
  std::string name;
  expr_ptr default_value;
};

struct stmt {
  enum class kind {
    text,
    output,
    if_,
    for_,
    set,
    set_block,
    macro,
    call_block,
    filter_block,
    with,
    do_,
    break_,
    continue_,
    include,      // value: the template name(s)
    import_,      // value: the template; name: the target
    from_import,  // value: the template; imports: (name, alias)
    extends,      // value: the parent template
    block,        // name; children
    load,         // format; target; children (Salt's load_yaml/load_json/load_text)
    import_data,  // format; value: the template; name: the target (Salt's import_yaml, ...)
    profile,      // value: the label; children (Salt's profile block)
  };
  kind k;
  int line = 0;
  int column = 0;
  std::string text;
  std::string name;    // macro name
  expr_ptr target;     // for/set target
  expr_ptr value;      // output, set, for iterable, do, call expression, filter chain
  expr_ptr condition;  // for ... if
  std::vector<std::pair<expr_ptr, body>> branches;  // if/elif (condition, body)
  body children;                    // for, macro, set_block, call_block, filter_block, with
  body else_children;               // for/else, if/else
  std::vector<macro_param> params;  // macro, call_block caller params
  std::vector<std::pair<expr_ptr, expr_ptr>> assigns;  // with
  // Whether a macro's (or call block's) body names varargs, kwargs or caller:
  // as in Jinja, only then does it accept extra arguments or a caller.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
  bool recursive = false;  // for ... recursive
  // include/import/from/import_*: `ignore missing`, `with context`.
  bool ignore_missing = false;
  bool with_context = false;
  // block: `scoped`, `required`.
  bool scoped = false;
  bool required = false;
  std::vector<std::pair<std::string, std::string>> imports;  // from ... import name as alias
  std::string format;                                        // load/import_data: yaml, json, text
};

struct parse_options {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  bool keep_trailing_newline = false;
};

// Throws template_error naming the template, line and column.
body parse(const std::string& source, const std::string& name, const parse_options& opts);

// A parsed template and its blocks by name (for extends), as a render
// caches it.
struct template_tree {
  std::string name;
  body root;
  std::map<std::string, const stmt*> blocks;
};
std::shared_ptr<const template_tree> parse_template(const std::string& source,
                                                   const std::string& name,
                                                   const parse_options& opts);

}  // namespace brine::render::detail
