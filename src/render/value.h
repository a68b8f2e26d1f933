#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"

// The values a template computes with, with Python's semantics: integers
// apart from floats, tuples apart from lists, None, insertion-ordered dicts,
// and lists and dicts shared by reference (so `{% do x.append(1) %}` changes
// every name bound to x). A callable is a host function (later `salt[...]`),
// a macro or a bound method. Values are not thread-safe; one render owns them.
namespace brine::render {

class value;

// An error while rendering. The renderer adds the template name, line and
// column before it leaves render().
class template_error : public base::error {
 public:
  using base::error::error;
};

namespace detail {
// A template_error whose message already starts with the template name,
// line and column.
class located_error : public template_error {
 public:
  using template_error::template_error;
};
}  // namespace detail

struct call_args {
  std::vector<value> positional;
  std::vector<std::pair<std::string, value>> keyword;
};

using function = std::function<value(call_args&)>;

struct list_data;
struct dict_data;
struct callable_data {
  std::string name;
  function fn;
};

class value {
 public:
  enum class kind {
    undefined,
    none,
    boolean,
    integer,
    floating,
    string,
    list,
    tuple,
    dict,
    callable
  };

  value() : v_(nullptr) {}
  value(std::nullptr_t) : v_(nullptr) {}
  value(bool b) : v_(b) {}
  value(int i) : v_(static_cast<std::int64_t>(i)) {}
  value(std::int64_t i) : v_(i) {}
  value(double d) : v_(d) {}
  value(std::string s) : v_(std::move(s)) {}
  value(const char* s) : v_(std::string(s)) {}
  value(std::string_view s) : v_(std::string(s)) {}

  static value undefined(std::string message);
  // Jinja's plain Undefined (an inline if without else): prints as "", is
  // false and empty; any other use raises `message`.
  static value lenient_undefined(std::string message);
  static value make_list(std::vector<value> items = {});
  static value make_tuple(std::vector<value> items);
  static value make_dict();
  static value make_namespace();
  static value make_callable(std::string name, function fn);
  static value from_json(const nlohmann::ordered_json& j);

  kind type() const;
  bool is_undefined() const { return type() == kind::undefined; }
  bool is_none() const { return type() == kind::none; }
  bool is_bool() const { return type() == kind::boolean; }
  bool is_int() const { return type() == kind::integer; }
  bool is_float() const { return type() == kind::floating; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return type() == kind::string; }
  bool is_list() const { return type() == kind::list; }
  bool is_tuple() const { return type() == kind::tuple; }
  bool is_sequence_like() const { return is_list() || is_tuple(); }
  bool is_dict() const { return type() == kind::dict; }
  bool is_callable() const { return type() == kind::callable; }
  bool is_namespace() const;

  // Throws template_error with the undefined message when this is undefined.
  const value& defined() const;
  const std::string& undefined_message() const;
  bool is_lenient_undefined() const;
  // Where an undefined value came from ("template 'x' line 1 column 4: "),
  // set once by the evaluator so that its error points at the name.
  void locate_undefined(const std::string& where);

  bool as_bool() const { return std::get<bool>(v_); }
  std::int64_t as_int() const { return std::get<std::int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  std::vector<value>& items() const;
  list_data& list() const;
  dict_data& dict() const;
  const callable_data& callable() const;
  const void* identity() const;

  // Python's bool(), str(), repr(), float(); int() of a number.
  bool truthy() const;
  std::string str() const;
  std::string repr() const;
  double to_double() const;
  nlohmann::ordered_json to_json() const;

 private:
  struct undefined_t {
    std::string message;
    bool lenient = false;
    std::string where;
  };
  struct seq_t {
    std::shared_ptr<list_data> p;
  };
  std::variant<undefined_t, std::nullptr_t, bool, std::int64_t, double, std::string, seq_t,
               std::shared_ptr<dict_data>, std::shared_ptr<callable_data>>
      v_;
};

struct list_data {
  std::vector<value> items;
  bool tuple = false;
  // Python's repr of a range or a dict view, which are lists here:
  // "range(0, 3)", or "dict_items(" ... ")" around the list.
  std::string repr_override;
  std::string view;
  // A named tuple's field names (groupby's grouper and list).
  std::vector<std::string> fields;
};

// Keys in insertion order, found by a linear scan: template dicts are small.
struct dict_data {
  std::vector<std::pair<value, value>> entries;
  bool is_namespace = false;
  // A collections.OrderedDict: what Salt's YAML renderer makes of a mapping
  // (mark_ordered_dicts in salt_filters.h), and Salt's odict().
  // Only its type name differs (Jinja's "'collections.OrderedDict object'
  // has no attribute 'x'"); its repr stays dict's.
  bool ordered_dict = false;
  // An imported template (a namespace of its exports): its name, and its
  // output, which is what str() of it gives.
  bool module = false;
  std::string module_name;
  std::string module_text;

  value* find(const value& key);
  void set(const value& key, value v);
  bool erase(const value& key);
};

// Python's ==, and < for values of comparable kinds (throws otherwise).
bool equal(const value& a, const value& b);
bool less(const value& a, const value& b);
// Python's hash-free key equality for dict keys (1 == 1.0 == True).
std::string type_name(const value& v);

// Python float repr: shortest digits that read back the same value.
std::string float_repr(double d);
std::string string_repr(std::string_view s);

}  // namespace brine::render
