#include "render/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "base/python.h"

namespace brine::render {

value value::undefined(std::string message) {
  value v;
  v.v_ = undefined_t{std::move(message)};
  return v;
}

value value::lenient_undefined(std::string message) {
  value v;
  v.v_ = undefined_t{std::move(message), true};
  return v;
}

bool value::is_lenient_undefined() const {
  return is_undefined() && std::get<undefined_t>(v_).lenient;
}

value value::make_list(std::vector<value> items) {
  value v;
  v.v_ = seq_t{std::make_shared<list_data>(list_data{std::move(items), false})};
  return v;
}

value value::make_tuple(std::vector<value> items) {
  value v;
  v.v_ = seq_t{std::make_shared<list_data>(list_data{std::move(items), true})};
  return v;
}

value value::make_dict() {
  value v;
  v.v_ = std::make_shared<dict_data>();
  return v;
}

value value::make_namespace() {
  value v = make_dict();
  v.dict().is_namespace = true;
  return v;
}

value value::make_callable(std::string name, function fn) {
  value v;
  v.v_ = std::make_shared<callable_data>(callable_data{std::move(name), std::move(fn)});
  return v;
}

value value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return nullptr;
    case nlohmann::ordered_json::value_t::boolean:
      return j.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer:
      return j.get<std::int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned:
      return static_cast<std::int64_t>(j.get<std::uint64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return j.get<double>();
    case nlohmann::ordered_json::value_t::string:
      return j.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      std::vector<value> items;
      for (const auto& e : j) items.push_back(from_json(e));
      return make_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      value d = make_dict();
      for (const auto& [k, e] : j.items()) d.dict().entries.emplace_back(value(k), from_json(e));
      return d;
    }
    default:
      return nullptr;
  }
}

value::kind value::type() const {
  switch (v_.index()) {
    case 0:
      return kind::undefined;
    case 1:
      return kind::none;
    case 2:
      return kind::boolean;
    case 3:
      return kind::integer;
    case 4:
      return kind::floating;
    case 5:
      return kind::string;
    case 6:
      return std::get<seq_t>(v_).p->tuple ? kind::tuple : kind::list;
    case 7:
      return kind::dict;
    default:
      return kind::callable;
  }
}

bool value::is_namespace() const { return is_dict() && dict().is_namespace; }

const value& value::defined() const {
  if (is_undefined()) {
    const auto& u = std::get<undefined_t>(v_);
    if (!u.where.empty()) throw detail::located_error(u.where + u.message);
    throw template_error(u.message);
  }
  return *this;
}

void value::locate_undefined(const std::string& where) {
  auto& u = std::get<undefined_t>(v_);
  if (u.where.empty()) u.where = where;
}

const std::string& value::undefined_message() const { return std::get<undefined_t>(v_).message; }

std::vector<value>& value::items() const { return std::get<seq_t>(v_).p->items; }
list_data& value::list() const { return *std::get<seq_t>(v_).p; }
dict_data& value::dict() const { return *std::get<std::shared_ptr<dict_data>>(v_); }
const callable_data& value::callable() const {
  return *std::get<std::shared_ptr<callable_data>>(v_);
}

const void* value::identity() const {
  switch (v_.index()) {
    case 6:
      return std::get<seq_t>(v_).p.get();
    case 7:
      return std::get<std::shared_ptr<dict_data>>(v_).get();
    case 8:
      return std::get<std::shared_ptr<callable_data>>(v_).get();
    default:
      return nullptr;
  }
}

bool value::truthy() const {
  switch (type()) {
    case kind::undefined:
      if (is_lenient_undefined()) return false;
      defined();
      return false;
    case kind::none:
      return false;
    case kind::boolean:
      return as_bool();
    case kind::integer:
      return as_int() != 0;
    case kind::floating:
      return as_float() != 0.0;
    case kind::string:
      return !as_string().empty();
    case kind::list:
    case kind::tuple:
      return !items().empty();
    case kind::dict:
      return !dict().entries.empty();
    default:
      return true;
  }
}

double value::to_double() const {
  if (is_bool()) return as_bool() ? 1.0 : 0.0;
  if (is_int()) return static_cast<double>(as_int());
  return as_float();
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  // sci is d.ddde[+-]XX: Python picks fixed notation for -4 <= exp < 16.
  auto epos = sci.find('e');
  int exp = std::atoi(sci.c_str() + epos + 1);
  std::string mant = sci.substr(0, epos);
  bool neg = mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  std::string out;
  if (exp >= -5 && exp < 16) {
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else {
      auto ip = static_cast<size_t>(exp) + 1;
      if (digits.size() <= ip) {
        out = digits + std::string(ip - digits.size(), '0') + ".0";
      } else {
        out = digits.substr(0, ip) + "." + digits.substr(ip);
      }
    }
    if (exp == -5) {
      // Python switches to exponent notation below 1e-4.
      out.clear();
    }
  }
  if (out.empty()) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  }
  return neg ? "-" + out : out;
}

std::string string_repr(std::string_view s) { return base::python_repr(s); }

std::string value::str() const {
  switch (type()) {
    case kind::undefined:
      if (is_lenient_undefined()) return "";
      defined();
      return "";
    case kind::string:
      return as_string();
    case kind::dict:
      if (dict().module) return dict().module_text;
      return repr();
    default:
      return repr();
  }
}

namespace {

// The containers whose repr is being built on this thread: a list that holds
// itself prints as [[...]], as in Python.
thread_local std::vector<const void*> repr_active;

struct repr_guard {
  explicit repr_guard(const void* p) { repr_active.push_back(p); }
  ~repr_guard() { repr_active.pop_back(); }
  repr_guard(const repr_guard&) = delete;
  repr_guard& operator=(const repr_guard&) = delete;
};

bool repr_running(const void* p) {
  return std::find(repr_active.begin(), repr_active.end(), p) != repr_active.end();
}

}  // namespace

std::string value::repr() const {
  if (identity() && repr_running(identity())) return is_dict() ? "{...}" : "[...]";
  std::optional<repr_guard> guard;
  if (identity()) guard.emplace(identity());
  switch (type()) {
    case kind::undefined:
      defined();
      return "";
    case kind::none:
      return "None";
    case kind::boolean:
      return as_bool() ? "True" : "False";
    case kind::integer:
      return std::to_string(as_int());
    case kind::floating:
      return float_repr(as_float());
    case kind::string:
      return string_repr(as_string());
    case kind::list:
    case kind::tuple: {
      const auto& data = *std::get<seq_t>(v_).p;
      if (!data.repr_override.empty()) return data.repr_override;
      std::string out = data.view.empty() ? "" : data.view + "(";
      out += is_tuple() ? "(" : "[";
      const auto& it = items();
      for (size_t i = 0; i < it.size(); ++i) {
        if (i) out += ", ";
        out += it[i].repr();
      }
      if (is_tuple() && it.size() == 1) out += ",";
      out += is_tuple() ? ")" : "]";
      if (!data.view.empty()) out += ")";
      return out;
    }
    case kind::dict: {
      if (dict().module) return "<TemplateModule " + string_repr(dict().module_name) + ">";
      std::string out = is_namespace() ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (is_namespace() ? "}>" : "}");
    }
    case kind::callable:
      return "<function " + callable().name + ">";
  }
  return "";
}

nlohmann::ordered_json value::to_json() const {
  switch (type()) {
    case kind::undefined:
      defined();
      return nullptr;
    case kind::none:
      return nullptr;
    case kind::boolean:
      return as_bool();
    case kind::integer:
      return as_int();
    case kind::floating:
      return as_float();
    case kind::string:
      return as_string();
    case kind::list:
    case kind::tuple: {
      auto out = nlohmann::ordered_json::array();
      for (const auto& e : items()) out.push_back(e.to_json());
      return out;
    }
    case kind::dict: {
      auto out = nlohmann::ordered_json::object();
      for (const auto& [k, v] : dict().entries)
        out[k.is_string() ? k.as_string() : k.str()] = v.to_json();
      return out;
    }
    case kind::callable:
      throw template_error("Object of type function is not JSON serializable");
  }
  return nullptr;
}

std::string type_name(const value& v) {
  switch (v.type()) {
    case value::kind::undefined:
      return "Undefined";
    case value::kind::none:
      return "NoneType";
    case value::kind::boolean:
      return "bool";
    case value::kind::integer:
      return "int";
    case value::kind::floating:
      return "float";
    case value::kind::string:
      return "str";
    case value::kind::list:
      return "list";
    case value::kind::tuple:
      return "tuple";
    case value::kind::dict:
      if (v.dict().module) return "TemplateModule";
      if (v.dict().ordered_dict) return "collections.OrderedDict";
      return v.is_namespace() ? "Namespace" : "dict";
    case value::kind::callable:
      return "function";
  }
  return "object";
}

bool equal(const value& a, const value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    a.defined();
    b.defined();
  }
  if (a.is_number() && b.is_number()) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
      auto ai = a.is_bool() ? std::int64_t{a.as_bool()} : a.as_int();
      auto bi = b.is_bool() ? std::int64_t{b.as_bool()} : b.as_int();
      return ai == bi;
    }
    return a.to_double() == b.to_double();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case value::kind::none:
      return true;
    case value::kind::string:
      return a.as_string() == b.as_string();
    case value::kind::list:
    case value::kind::tuple: {
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case value::kind::dict: {
      auto& x = a.dict();
      auto& y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (auto& [k, v] : x.entries) {
        value* o = y.find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

bool less(const value& a, const value& b) {
  a.defined();
  b.defined();
  if (a.is_number() && b.is_number()) {
    if ((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool())) {
      auto ai = a.is_bool() ? std::int64_t{a.as_bool()} : a.as_int();
      auto bi = b.is_bool() ? std::int64_t{b.as_bool()} : b.as_int();
      return ai < bi;
    }
    return a.to_double() < b.to_double();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.type() == b.type() && a.is_sequence_like()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw template_error("'<' not supported between instances of '" + type_name(a) + "' and '" +
                       type_name(b) + "'");
}

value* dict_data::find(const value& key) {
  for (auto& [k, v] : entries)
    if (equal(k, key)) return &v;
  return nullptr;
}

void dict_data::set(const value& key, value v) {
  if (value* e = find(key)) {
    *e = std::move(v);
  } else {
    entries.emplace_back(key, std::move(v));
  }
}

bool dict_data::erase(const value& key) {
  for (auto it = entries.begin(); it != entries.end(); ++it) {
    if (equal(it->first, key)) {
      entries.erase(it);
      return true;
    }
  }
  return false;
}

}  // namespace brine::render
