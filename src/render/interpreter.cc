#include "render/interpreter.h"

#include <cmath>
#include <set>
#include <unordered_map>
#include <variant>

namespace brine::render::detail {
namespace {

// Jinja's object_type_repr, as its undefined messages name objects.
std::string object_type_repr(const value& v) {
  if (v.is_none()) return "None";
  if (v.is_dict() && v.dict().module) return "jinja2.environment.TemplateModule object";
  if (v.is_namespace()) return "jinja2.utils.Namespace object";
  return type_name(v) + " object";
}

// Deep enough for real templates, shallow enough for a sanitized stack.
constexpr int k_max_depth = 200;

std::int64_t as_integer(const value& v) {
  return v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
}
bool integral(const value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void unsupported(const std::string& op, const value& a, const value& b) {
  throw template_error("unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                       type_name(b) + "'");
}

struct step_budget {
  std::uint64_t* steps = nullptr;
  std::uint64_t max = 0;
};
thread_local step_budget budget;

value repeat(const value& seq, std::int64_t n) {
  std::uint64_t len = seq.is_string() ? seq.as_string().size() : seq.items().size();
  if (n > 0) {
    std::uint64_t total = 0;
    if (__builtin_mul_overflow(len, static_cast<std::uint64_t>(n), &total))
      total = UINT64_MAX;
    charge_steps(total);
  }
  if (seq.is_string()) {
    std::string out;
    for (std::int64_t i = 0; i < n; ++i) out += seq.as_string();
    return out;
  }
  std::vector<value> out;
  for (std::int64_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.items().begin(), seq.items().end());
  return seq.is_tuple() ? value::make_tuple(std::move(out)) : value::make_list(std::move(out));
}

}  // namespace

void charge_steps(std::uint64_t n) {
  if (!budget.steps) return;
  if (n > budget.max || *budget.steps > budget.max - n) {
    *budget.steps = budget.max;
    throw template_error("the render took more than " + std::to_string(budget.max) + " steps");
  }
  *budget.steps += n;
}

value binary_op(const std::string& op, const value& a, const value& b) {
  a.defined();
  b.defined();
  if (a.is_number() && b.is_number()) {
    if (integral(a) && integral(b)) {
      std::int64_t x = as_integer(a);
      std::int64_t y = as_integer(b);
      std::int64_t r = 0;
      if (op == "+") {
        if (__builtin_add_overflow(x, y, &r)) throw template_error("integer overflow");
        return r;
      }
      if (op == "-") {
        if (__builtin_sub_overflow(x, y, &r)) throw template_error("integer overflow");
        return r;
      }
      if (op == "*") {
        if (__builtin_mul_overflow(x, y, &r)) throw template_error("integer overflow");
        return r;
      }
      if (op == "/") {
        if (y == 0) throw template_error("division by zero");
        return static_cast<double>(x) / static_cast<double>(y);
      }
      if (op == "//" || op == "%") {
        if (y == 0)
          throw template_error(op == "%" ? "integer modulo by zero"
                                         : "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) throw template_error("integer overflow");
        std::int64_t q = x / y;
        std::int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return op == "//" ? value(q) : value(m);
      }
      if (op == "**") {
        if (y < 0) return std::pow(static_cast<double>(x), static_cast<double>(y));
        std::int64_t acc = 1;
        for (std::int64_t i = 0; i < y; ++i)
          if (__builtin_mul_overflow(acc, x, &acc)) throw template_error("integer overflow");
        return acc;
      }
    }
    double x = a.to_double();
    double y = b.to_double();
    if (op == "+") return x + y;
    if (op == "-") return x - y;
    if (op == "*") return x * y;
    if (op == "/") {
      if (y == 0) throw template_error("float division by zero");
      return x / y;
    }
    if (op == "//" || op == "%") {
      if (y == 0) throw template_error(op == "%" ? "float modulo" : "float floor division by zero");
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      if (op == "%") return m;
      return std::floor(x / y);
    }
    if (op == "**") return std::pow(x, y);
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      charge_steps(a.as_string().size() + b.as_string().size());
      return a.as_string() + b.as_string();
    }
    if (a.type() == b.type() && a.is_sequence_like()) {
      charge_steps(a.items().size() + b.items().size());
      std::vector<value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return a.is_tuple() ? value::make_tuple(std::move(out)) : value::make_list(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_sequence_like()) && integral(b)) return repeat(a, as_integer(b));
    if ((b.is_string() || b.is_sequence_like()) && integral(a)) return repeat(b, as_integer(a));
  }
  if (op == "%" && a.is_string()) return percent_format(a.as_string(), b);
  unsupported(op, a, b);
}

bool contains(const value& container, const value& item) {
  container.defined();
  item.defined();
  if (container.is_string()) {
    if (!item.is_string())
      throw template_error("'in <string>' requires string as left operand, not " + type_name(item));
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_sequence_like()) {
    for (const auto& e : container.items())
      if (equal(e, item)) return true;
    return false;
  }
  if (container.is_dict()) {
    if (item.is_list() || item.is_dict())
      throw template_error("unhashable type: '" + type_name(item) + "'");
    return container.dict().find(item) != nullptr;
  }
  throw template_error("argument of type '" + type_name(container) + "' is not iterable");
}

std::vector<value> iterate(const value& v) {
  if (v.is_lenient_undefined()) return {};
  v.defined();
  if (v.is_sequence_like()) return v.items();
  if (v.is_dict()) {
    std::vector<value> keys;
    for (const auto& [k, e] : v.dict().entries) keys.push_back(k);
    return keys;
  }
  if (v.is_string()) {
    std::vector<value> chars;
    const std::string& s = v.as_string();
    for (std::size_t i = 0; i < s.size();) {
      std::size_t n = 1;
      auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0xf0) {
        n = 4;
      } else if (c >= 0xe0) {
        n = 3;
      } else if (c >= 0xc0) {
        n = 2;
      }
      chars.emplace_back(s.substr(i, n));
      i += n;
    }
    return chars;
  }
  throw template_error("'" + type_name(v) + "' object is not iterable");
}

std::string interpreter::located(int line, int column) const {
  return "template '" + name_ + "' line " + std::to_string(line) + " column " +
         std::to_string(column) + ": ";
}

value interpreter::lookup(const std::string& name) {
  for (frame* f = current_.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (name == "self") return template_reference();
  auto it = ctx_.find(name);
  if (it != ctx_.end()) return it->second;
  it = template_globals_.find(name);
  if (it != template_globals_.end()) return it->second;
  it = env_.globals.find(name);
  if (it != env_.globals.end()) return it->second;
  value g = builtin_global(name);
  if (!g.is_undefined()) return g;
  return value::undefined("'" + name + "' is undefined");
}

value interpreter::eval(const expr& e) {
  try {
    value v = eval_inner(e);
    if (v.is_undefined()) v.locate_undefined(located(e.line, e.column));
    return v;
  } catch (const located_error&) {
    throw;
  } catch (const template_error& ex) {
    throw located_error(located(e.line, e.column) + ex.what());
  } catch (const std::bad_variant_access&) {
    throw located_error(located(e.line, e.column) + "an argument has the wrong type");
  }
}

value interpreter::getattr(const value& obj, const std::string& name) {
  obj.defined();
  if (obj.is_tuple()) {
    const auto& fields = obj.list().fields;
    for (std::size_t i = 0; i < fields.size() && i < obj.items().size(); ++i)
      if (fields[i] == name) return obj.items()[i];
  }
  if (obj.is_dict()) {
    if (!obj.is_namespace()) {
      value m = method(obj, name);
      if (!m.is_undefined()) return m;
    }
    if (value* v = obj.dict().find(value(name))) return *v;
    return value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
  }
  value m = method(obj, name);
  if (!m.is_undefined()) return m;
  return value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

value interpreter::getitem(const value& obj, const value& key) {
  obj.defined();
  key.defined();
  if (obj.is_dict()) {
    if (value* v = obj.dict().find(key)) return *v;
    if (key.is_string() && !obj.is_namespace()) {
      value m = method(obj, key.as_string());
      if (!m.is_undefined()) return m;
    }
    return value::undefined("'" + object_type_repr(obj) + "' has no attribute " + key.repr());
  }
  if ((obj.is_sequence_like() || obj.is_string()) && integral(key)) {
    std::vector<value> chars;
    const std::vector<value>* items = nullptr;
    if (obj.is_string()) {
      chars = iterate(obj);
      items = &chars;
    } else {
      items = &obj.items();
    }
    std::int64_t i = as_integer(key);
    auto n = static_cast<std::int64_t>(items->size());
    if (i < 0) i += n;
    if (i < 0 || i >= n)
      return value::undefined(object_type_repr(obj) + " has no element " +
                              std::to_string(as_integer(key)));
    return (*items)[static_cast<std::size_t>(i)];
  }
  if (key.is_string()) {
    value m = method(obj, key.as_string());
    if (!m.is_undefined()) return m;
  }
  return value::undefined("'" + object_type_repr(obj) + "' has no attribute " + key.repr());
}

value interpreter::call(const value& callee, call_args& args) {
  callee.defined();
  if (callee.is_namespace()) {
    // A recursive loop's `loop(...)`.
    if (value* fn = callee.dict().find(value("__call__")); fn && fn->is_callable())
      return call(*fn, args);
  }
  if (!callee.is_callable())
    throw template_error("'" + type_name(callee) + "' object is not callable");
  step();
  int& depth = state_ ? state_->depth : depth_;
  if (++depth > k_max_depth) {
    --depth;
    throw template_error("maximum recursion depth exceeded");
  }
  struct guard {
    int& d;
    ~guard() { --d; }
  } g{depth};
  return callee.callable().fn(args);
}

void interpreter::eval_args(const expr& e, call_args& args, std::size_t first) {
  for (std::size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i]));
  if (e.dyn_args)
    for (auto& v : iterate(eval(*e.dyn_args))) args.positional.push_back(v);
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v));
  if (e.dyn_kwargs) {
    value d = eval(*e.dyn_kwargs);
    if (!d.defined().is_dict())
      throw template_error("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& [k, v] : d.dict().entries) {
      if (!k.is_string()) throw template_error("keywords must be strings");
      args.keyword.emplace_back(k.as_string(), v);
    }
  }
}

value interpreter::eval_call(const expr& e, const value* caller) {
  value callee = eval(*e.args[0]);
  call_args args;
  eval_args(e, args, 1);
  if (caller) args.keyword.emplace_back("caller", *caller);
  try {
    return call(callee, args);
  } catch (const located_error& ex) {
    // A macro of another template (imported) failed: say where it was called.
    std::string here = "template '" + name_ + "' ";
    std::string what = ex.what();
    if (what.rfind(here, 0) == 0 || what.rfind("template '", 0) != 0) throw;
    std::string trail = "called from '" + name_ + "' line " + std::to_string(e.line);
    if (const auto* n = dynamic_cast<const nested_error*>(&ex))
      throw nested_error(n->head(), n->trail() + ", " + trail);
    throw nested_error(what, trail);
  }
}

value interpreter::filter(const std::string& name, const value& input, call_args& args) {
  if (auto host = env_.filters.find(name); host != env_.filters.end())
    return host->second(input, args);
  const auto& fs = builtin_filters();
  auto it = fs.find(name);
  if (it == fs.end()) throw template_error("no filter named '" + name + "'");
  return it->second(*this, input, args);
}

bool interpreter::test(const std::string& name, const value& input, call_args& args) {
  if (auto host = env_.tests.find(name); host != env_.tests.end())
    return host->second(input, args);
  const auto& ts = builtin_tests();
  auto it = ts.find(name);
  if (it == ts.end()) throw template_error("no test named '" + name + "'");
  return it->second(*this, input, args);
}

value interpreter::eval_inner(const expr& e) {
  switch (e.k) {
    case expr::kind::literal:
      return e.literal;
    case expr::kind::name:
      return lookup(e.name);
    case expr::kind::list:
    case expr::kind::tuple: {
      std::vector<value> items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return e.k == expr::kind::list ? value::make_list(std::move(items))
                                     : value::make_tuple(std::move(items));
    }
    case expr::kind::dict: {
      value d = value::make_dict();
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        value k = eval(*e.args[i]);
        k.defined();
        if (k.is_list() || k.is_dict())
          throw template_error("unhashable type: '" + type_name(k) + "'");
        d.dict().set(k, eval(*e.args[i + 1]));
      }
      return d;
    }
    case expr::kind::getattr:
      return getattr(eval(*e.args[0]), e.name);
    case expr::kind::getitem:
      return getitem(eval(*e.args[0]), eval(*e.args[1]));
    case expr::kind::slice: {
      value obj = eval(*e.args[0]);
      obj.defined();
      std::vector<value> items;
      if (obj.is_string()) {
        items = iterate(obj);
      } else if (obj.is_sequence_like()) {
        items = obj.items();
      } else {
        throw template_error("'" + type_name(obj) + "' object is not subscriptable");
      }
      auto n = static_cast<std::int64_t>(items.size());
      auto bound = [&](const expr_ptr& p, std::int64_t dflt) -> std::int64_t {
        if (!p) return dflt;
        value v = eval(*p);
        if (v.is_none()) return dflt;
        return to_int(v, "slice indices");
      };
      std::int64_t step = bound(e.args[3], 1);
      if (step == 0) throw template_error("slice step cannot be zero");
      std::int64_t start = bound(e.args[1], step > 0 ? 0 : n - 1);
      std::int64_t stop = bound(e.args[2], step > 0 ? n : -n - 1);
      auto clamp = [&](std::int64_t i, bool is_stop) {
        (void)is_stop;
        if (i < 0) i += n;
        if (step > 0) return std::clamp<std::int64_t>(i, 0, n);
        return std::clamp<std::int64_t>(i, -1, n - 1);
      };
      start = e.args[1] ? clamp(start, false) : start;
      stop = clamp(stop, true);
      if (!e.args[2] && step < 0) stop = -1;
      std::vector<value> out;
      for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
        out.push_back(items[static_cast<std::size_t>(i)]);
      if (obj.is_string()) {
        std::string s;
        for (const auto& c : out) s += c.as_string();
        return s;
      }
      return obj.is_tuple() ? value::make_tuple(std::move(out)) : value::make_list(std::move(out));
    }
    case expr::kind::call:
      return eval_call(e, nullptr);
    case expr::kind::filter: {
      value input;
      if (e.args[0]) {
        input = eval(*e.args[0]);
      } else {
        input = *filter_input_;
      }
      call_args args;
      eval_args(e, args, 1);
      return filter(e.name, input, args);
    }
    case expr::kind::test: {
      value input = eval(*e.args[0]);
      call_args args;
      eval_args(e, args, 1);
      bool r = test(e.name, input, args);
      return e.negated ? !r : r;
    }
    case expr::kind::binary:
      return binary_op(e.name, eval(*e.args[0]), eval(*e.args[1]));
    case expr::kind::unary: {
      value v = eval(*e.args[0]);
      v.defined();
      if (!v.is_number())
        throw template_error("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.is_bool() ? value(as_integer(v)) : v;
      if (v.is_float()) return -v.as_float();
      if (as_integer(v) == INT64_MIN) throw template_error("integer overflow");
      return -as_integer(v);
    }
    case expr::kind::compare: {
      value left = eval(*e.args[0]);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        value right = eval(*e.args[i + 1]);
        const std::string& op = e.ops[i];
        bool r = false;
        if (op == "==") {
          r = equal(left, right);
        } else if (op == "!=") {
          r = !equal(left, right);
        } else if (op == "<") {
          r = less(left, right);
        } else if (op == ">") {
          r = less(right, left);
        } else if (op == "<=") {
          r = less(left, right) || equal(left, right);
        } else if (op == ">=") {
          r = less(right, left) || equal(left, right);
        } else if (op == "in") {
          r = contains(right, left);
        } else {
          r = !contains(right, left);
        }
        if (!r) return false;
        left = std::move(right);
      }
      return true;
    }
    case expr::kind::logic_and: {
      value l = eval(*e.args[0]);
      if (!l.truthy()) return l;
      return eval(*e.args[1]);
    }
    case expr::kind::logic_or: {
      value l = eval(*e.args[0]);
      if (l.truthy()) return l;
      return eval(*e.args[1]);
    }
    case expr::kind::logic_not:
      return !eval(*e.args[0]).truthy();
    case expr::kind::cond:
      if (eval(*e.args[1]).truthy()) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return value::lenient_undefined("the inline if-expression on line " + std::to_string(e.line) +
                                      " evaluated to false and no else section was defined.");
    case expr::kind::concat: {
      std::string out;
      for (const auto& a : e.args) out += eval(*a).str();
      charge_steps(out.size());
      return out;
    }
  }
  return nullptr;
}

void interpreter::assign(const expr& target, const value& v) {
  if (target.k == expr::kind::name) {
    current_->vars[target.name] = v;
    return;
  }
  if (target.k == expr::kind::getattr) {
    value obj = eval(*target.args[0]);
    if (!obj.is_namespace())
      throw template_error("cannot assign attribute on non-namespace object");
    obj.dict().set(value(target.name), v);
    if (mutation_log) mutation_log->push_back(obj);
    return;
  }
  std::vector<value> items = iterate(v);
  if (items.size() != target.args.size()) {
    if (items.size() > target.args.size())
      throw template_error("too many values to unpack (expected " +
                           std::to_string(target.args.size()) + ")");
    throw template_error("not enough values to unpack (expected " +
                         std::to_string(target.args.size()) + ", got " +
                         std::to_string(items.size()) + ")");
  }
  for (std::size_t i = 0; i < items.size(); ++i) assign(*target.args[i], items[i]);
}

value interpreter::make_macro(const stmt& s, const std::string& name,
                              const std::shared_ptr<frame>& closure) {
  // A macro is usually stored in the frame it closes over: holding that frame
  // by shared_ptr would be a cycle. The interpreter keeps such frames alive
  // until the render ends; a macro called later (kept in a host's list) fails.
  closures_.push_back(closure);
  std::weak_ptr<int> alive = alive_;
  frame* scope = closure.get();
  return value::make_callable(name, [this, &s, name, scope, alive](call_args& args) -> value {
    if (alive.expired())
      throw template_error("macro '" + name + "' called after its template was rendered");
    auto f = std::make_shared<frame>();
    f->parent = scope->shared_from_this();
    f->macro = true;
    std::vector<value> varargs;
    std::size_t n = s.params.size();
    std::vector<bool> bound(n, false);
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
      if (i < n) {
        f->vars[s.params[i].name] = args.positional[i];
        bound[i] = true;
      } else if (s.uses_varargs) {
        varargs.push_back(args.positional[i]);
      } else {
        throw template_error("macro '" + name + "' takes not more than " + std::to_string(n) +
                             " argument(s)");
      }
    }
    value kwargs = value::make_dict();
    for (auto& [k, v] : args.keyword) {
      bool found = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (s.params[i].name == k) {
          if (bound[i])
            throw template_error("macro '" + name + "' takes no keyword argument '" + k + "'");
          f->vars[k] = v;
          bound[i] = found = true;
        }
      }
      if (found) continue;
      if (k == "caller") {
        if (!s.uses_caller)
          throw template_error("macro '" + name +
                               "' was invoked with two values for the special caller argument");
        f->vars["caller"] = v;
      } else if (s.uses_kwargs) {
        kwargs.dict().set(value(k), v);
      } else {
        throw template_error("macro '" + name + "' takes no keyword argument '" + k + "'");
      }
    }
    f->vars["varargs"] = value::make_tuple(std::move(varargs));
    f->vars["kwargs"] = kwargs;
    auto saved = current_;
    auto saved_flow = flow_;
    current_ = f;
    struct restore {
      interpreter& in;
      std::shared_ptr<frame> s;
      flow fl;
      ~restore() {
        in.current_ = s;
        in.flow_ = fl;
      }
    } r{*this, saved, saved_flow};
    for (std::size_t i = 0; i < n; ++i) {
      if (bound[i]) continue;
      if (s.params[i].default_value) {
        f->vars[s.params[i].name] = eval(*s.params[i].default_value);
      } else {
        f->vars[s.params[i].name] =
            value::undefined("parameter '" + s.params[i].name + "' was not provided");
      }
    }
    if (!f->vars.count("caller")) f->vars["caller"] = value::undefined("No caller defined");
    ++own_output_;
    struct unown {
      int& n;
      ~unown() { --n; }
    } u{own_output_};
    std::string out;
    exec(s.children, out);
    return out;
  });
}

namespace {

void reach(const value& v, std::set<const void*>& seen) {
  if (!v.identity() || !seen.insert(v.identity()).second) return;
  if (v.is_sequence_like()) {
    for (const auto& e : v.items()) reach(e, seen);
  } else if (v.is_dict()) {
    for (const auto& [k, e] : v.dict().entries) {
      reach(k, seen);
      reach(e, seen);
    }
  }
}

// Whether the containers reachable from the ones a render changed may hold
// a cycle: one of them reaches itself through lists and dicts, or a
// callable is among them (what it holds is not seen: a bound method holds
// its object). Every cycle of containers runs through a changed one, since
// a container is made without a cycle and only a change can close one; so
// when this is false, no cycle can have been made. Iterative, as the data
// may nest deeper than the stack allows.
bool may_hold_cycle(const std::vector<value>& changed) {
  enum class mark : char { open, done };
  std::unordered_map<const void*, mark> seen;
  struct walk {
    const value* v;
    std::size_t next;
  };
  std::vector<walk> path;
  auto child = [](const value& v, std::size_t i) -> const value* {
    if (v.is_sequence_like()) return i < v.items().size() ? &v.items()[i] : nullptr;
    const auto& e = v.dict().entries;
    if (i / 2 >= e.size()) return nullptr;
    return i % 2 == 0 ? &e[i / 2].first : &e[i / 2].second;
  };
  // Enters v; true when it closes a cycle or is a callable.
  auto enter = [&](const value& v) {
    if (v.is_callable()) return true;
    const void* id = v.identity();
    if (!id) return false;
    auto [it, fresh] = seen.try_emplace(id, mark::open);
    if (!fresh) return it->second == mark::open;
    path.push_back({&v, 0});
    return false;
  };
  for (const auto& root : changed) {
    if (enter(root)) return true;
    while (!path.empty()) {
      walk& w = path.back();
      if (const value* c = child(*w.v, w.next++)) {
        if (enter(*c)) return true;
      } else {
        seen[w.v->identity()] = mark::done;
        path.pop_back();
      }
    }
  }
  return false;
}

}  // namespace

void interpreter::run(const template_tree& t, const std::string& tpldir, std::string& out) {
  std::vector<value> changed;
  struct cleanup {
    interpreter& in;
    std::vector<value>& changed;
    std::vector<value>* outer;
    ~cleanup() {
      mutation_log = outer;
      budget = saved_budget;
      // Most renders change only containers that hold no cycle: then
      // nothing need be emptied, and the host's data (pillar, grains, salt)
      // need not be walked.
      if (changed.empty() || !may_hold_cycle(changed)) return;
      std::set<const void*> kept;
      for (const auto& [k, v] : in.ctx_) reach(v, kept);
      for (const auto& [k, v] : in.env_.globals) reach(v, kept);
      for (auto& v : changed) {
        if (kept.count(v.identity())) continue;
        if (v.is_dict()) {
          v.dict().entries.clear();
        } else {
          v.items().clear();
        }
      }
    }
    step_budget saved_budget;
  } c{*this, changed, mutation_log, budget};
  mutation_log = &changed;
  if (env_.max_steps && state_) budget = {&state_->steps, env_.max_steps};
  run_template(t, tpldir, out);
}

void interpreter::exec(const body& b, std::string& out) {
  for (const auto& s : b) {
    exec_one(*s, out);
    if (flow_ != flow::normal) return;
  }
}

void interpreter::exec_for(const stmt& s, std::string& out) {
  run_loop(s, eval(*s.value), 1, current_, out);
}

void interpreter::run_loop(const stmt& s, const value& seq, std::int64_t depth,
                           std::shared_ptr<frame> outer, std::string& out) {
  std::vector<value> items = iterate(seq);
  auto saved = current_;
  struct restore {
    interpreter& in;
    std::shared_ptr<frame> s;
    ~restore() { in.current_ = s; }
  } r{*this, saved};
  if (s.condition) {
    std::vector<value> kept;
    for (const auto& item : items) {
      current_ = std::make_shared<frame>();
      current_->parent = outer;
      assign(*s.target, item);
      if (eval(*s.condition).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  auto n = static_cast<std::int64_t>(items.size());
  auto last_changed = std::make_shared<std::optional<value>>();
  for (std::int64_t i = 0; i < n; ++i) {
    step();
    current_ = std::make_shared<frame>();
    current_->parent = outer;
    value loop = value::make_namespace();
    auto& d = loop.dict();
    d.set("index", i + 1);
    d.set("index0", i);
    d.set("revindex", n - i);
    d.set("revindex0", n - i - 1);
    d.set("first", i == 0);
    d.set("last", i == n - 1);
    d.set("length", n);
    d.set("depth", depth);
    d.set("depth0", depth - 1);
    if (s.recursive) {
      d.set("__call__",
            value::make_callable("loop", [this, &s, depth, outer](call_args& a) -> value {
              if (a.positional.size() != 1 || !a.keyword.empty())
                throw template_error("loop() takes exactly one argument");
              std::string inner;
              run_loop(s, a.positional[0], depth + 1, outer, inner);
              return inner;
            }));
    }
    d.set("previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)]
                            : value::undefined("there is no previous item"));
    d.set("nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)]
                                : value::undefined("there is no next item"));
    d.set("cycle", value::make_callable("cycle", [i](call_args& a) -> value {
            if (a.positional.empty()) throw template_error("no items for cycling given");
            return a.positional[static_cast<std::size_t>(i) % a.positional.size()];
          }));
    d.set("changed", value::make_callable("changed", [last_changed](call_args& a) -> value {
            value now = value::make_tuple(a.positional);
            if (*last_changed && equal(**last_changed, now)) return false;
            *last_changed = now;
            return true;
          }));
    current_->vars["loop"] = loop;
    assign(*s.target, items[static_cast<std::size_t>(i)]);
    exec(s.children, out);
    if (flow_ == flow::break_) {
      flow_ = flow::normal;
      break;
    }
    flow_ = flow::normal;
  }
  current_ = saved;
  if (n == 0) exec(s.else_children, out);
}

void interpreter::exec_one(const stmt& s, std::string& out) {
  try {
    step();
    switch (s.k) {
      case stmt::kind::text:
        if (parent_ && own_output_ == 0) return;
        out += s.text;
        return;
      case stmt::kind::output:
        // After `extends`, Jinja neither evaluates nor writes a template's
        // own output (macros and blocks have their own).
        if (parent_ && own_output_ == 0) return;
        out += eval(*s.value).str();
        return;
      case stmt::kind::if_:
        for (const auto& [cond, b] : s.branches) {
          if (eval(*cond).truthy()) {
            exec(b, out);
            return;
          }
        }
        exec(s.else_children, out);
        return;
      case stmt::kind::for_:
        exec_for(s, out);
        return;
      case stmt::kind::set:
        assign(*s.target, eval(*s.value));
        return;
      case stmt::kind::set_block: {
        std::string captured;
        exec(s.children, captured);
        value v = captured;
        if (s.value) {
          const value* saved = filter_input_;
          filter_input_ = &v;
          value filtered = eval(*s.value);
          filter_input_ = saved;
          v = filtered;
        }
        assign(*s.target, v);
        return;
      }
      case stmt::kind::macro:
        current_->vars[s.name] = make_macro(s, s.name, current_);
        return;
      case stmt::kind::call_block: {
        value caller = make_macro(s, "caller", current_);
        out += eval_call(*s.value, &caller).str();
        return;
      }
      case stmt::kind::filter_block: {
        std::string captured;
        auto saved_scope = current_;
        current_ = std::make_shared<frame>();
        current_->parent = saved_scope;
        struct restore {
          interpreter& in;
          std::shared_ptr<frame> s;
          ~restore() { in.current_ = s; }
        } r{*this, saved_scope};
        exec(s.children, captured);
        value v = captured;
        const value* saved = filter_input_;
        filter_input_ = &v;
        value filtered = eval(*s.value);
        filter_input_ = saved;
        out += filtered.str();
        return;
      }
      case stmt::kind::with: {
        auto saved = current_;
        auto f = std::make_shared<frame>();
        f->parent = saved;
        std::vector<value> values;
        for (const auto& a : s.assigns) values.push_back(eval(*a.second));
        current_ = f;
        struct restore {
          interpreter& in;
          std::shared_ptr<frame> s;
          ~restore() { in.current_ = s; }
        } r{*this, saved};
        for (std::size_t i = 0; i < values.size(); ++i) assign(*s.assigns[i].first, values[i]);
        exec(s.children, out);
        return;
      }
      case stmt::kind::do_:
        eval(*s.value);
        return;
      case stmt::kind::break_:
        flow_ = flow::break_;
        return;
      case stmt::kind::continue_:
        flow_ = flow::continue_;
        return;
      case stmt::kind::include:
      case stmt::kind::import_:
      case stmt::kind::from_import:
      case stmt::kind::extends:
      case stmt::kind::block:
      case stmt::kind::load:
      case stmt::kind::import_data:
      case stmt::kind::profile:
        exec_loader_tag(s, out);
        return;
    }
  } catch (const located_error&) {
    throw;
  } catch (const template_error& ex) {
    throw located_error(located(s.line, s.column) + ex.what());
  } catch (const std::bad_variant_access&) {
    throw located_error(located(s.line, s.column) + "an argument has the wrong type");
  }
}

namespace {

// Templates loading templates deeper than this is a template loading itself
// without end (Jinja would hit Python's recursion limit).
constexpr std::size_t k_max_templates = 32;

bool is_relative(const std::string& name) {
  std::string first = name.substr(0, name.find('/'));
  return first == "." || first == "..";
}

// Python's os.path.normpath for '/'-separated names.
std::string normpath(const std::string& path) {
  bool absolute = path.starts_with("/");
  std::vector<std::string> parts;
  std::size_t i = 0;
  while (i <= path.size()) {
    std::size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    i = j + 1;
    if (part.empty() || part == ".") continue;
    if (part == ".." && !parts.empty() && parts.back() != "..") {
      parts.pop_back();
    } else if (part != ".." || !absolute) {
      parts.push_back(part);
    }
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t k = 0; k < parts.size(); ++k) out += (k ? "/" : "") + parts[k];
  return out.empty() ? "." : out;
}

std::string dirname(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

void interpreter::step() {
  if (env_.max_steps == 0 || !state_) return;
  if (++state_->steps > env_.max_steps)
    throw template_error("the render took more than " + std::to_string(env_.max_steps) +
                         " steps");
}

std::string interpreter::trail(const stmt& at, const char* how) const {
  return std::string(how) + " from '" + name_ + "' line " + std::to_string(at.line);
}

std::optional<interpreter::found_template> interpreter::load(const std::string& name,
                                                             const stmt& at, const char* how) {
  // SaltCacheLoader.get_source: './x' and '../x' are relative to the asking
  // template's tpldir, and may not climb out of the file roots.
  std::string resolved = name;
  bool relative = is_relative(name);
  if (relative) {
    resolved = normpath(tpldir_ + "/" + name);
    if (is_relative(resolved) && resolved.substr(0, resolved.find('/')) == "..")
      return std::nullopt;
  }
  found_template f;
  auto it = state_->templates.find(resolved);
  if (it != state_->templates.end()) {
    f.tree = it->second;
  } else {
    if (!env_.loader) return std::nullopt;
    std::optional<std::string> source = env_.loader(resolved, name_);
    if (!source) return std::nullopt;
    try {
      f.tree = shared_template(*source, resolved, state_->opts);
    } catch (const located_error& e) {
      throw nested_error(e.what(), trail(at, how));
    }
    state_->templates[resolved] = f.tree;
  }
  std::string dir = relative ? tpldir_ : dirname(resolved);
  f.tpldir = dir.empty() ? "." : dir;
  if (env_.globals.count("tpldir")) {
    std::string dot = dir;
    std::replace(dot.begin(), dot.end(), '/', '.');
    f.globals["tplfile"] = relative ? name : resolved;
    f.globals["tpldir"] = f.tpldir;
    f.globals["tpldot"] = dot;
  }
  return f;
}

std::optional<interpreter::found_template> interpreter::find_template(const value& names,
                                                                      bool ignore_missing,
                                                                      const stmt& at,
                                                                      const char* how) {
  names.defined();
  if (names.is_sequence_like()) {
    if (names.items().empty())
      throw template_error("TemplatesNotFound: Tried to select from an empty list of templates.");
    std::string tried;
    for (const auto& n : names.items()) {
      n.defined();
      if (auto f = load(n.str(), at, how)) return f;
      tried += (tried.empty() ? "" : ", ") + n.str();
    }
    if (ignore_missing) return std::nullopt;
    throw template_error("TemplatesNotFound: none of the templates given were found: " + tried);
  }
  if (auto f = load(names.str(), at, how)) return f;
  if (ignore_missing) return std::nullopt;
  throw template_error("TemplateNotFound: " + names.str());
}

context interpreter::visible() const {
  context c = ctx_;
  std::vector<const frame*> frames;
  for (const frame* f = current_.get(); f; f = f->parent.get()) frames.push_back(f);
  for (auto f = frames.rbegin(); f != frames.rend(); ++f) {
    for (const auto& [k, v] : (*f)->vars) {
      if (v.is_undefined() || k == "loop") continue;
      if ((*f)->macro && (k == "varargs" || k == "kwargs" || k == "caller")) continue;
      c[k] = v;
    }
  }
  return c;
}

interpreter& interpreter::child(context ctx, const found_template& t) {
  state_->contexts.push_back(std::make_unique<context>(std::move(ctx)));
  state_->children.push_back(
      std::make_unique<interpreter>(*state_->contexts.back(), env_, t.tree->name, state_));
  interpreter& in = *state_->children.back();
  in.set_template_globals(t.globals);
  return in;
}

void interpreter::run_nested(interpreter& in, const found_template& t, const stmt& at,
                             const char* how, std::string& out, bool register_blocks) {
  std::string trail = this->trail(at, how);
  try {
    if (state_->chain.size() >= k_max_templates) {
      std::string chain;
      for (const auto& n : state_->chain) chain += "'" + n + "' -> ";
      throw located_error(located(at.line, at.column) + "templates load each other " +
                          std::to_string(k_max_templates) + " deep: a template includes itself (" +
                          chain + "'" + t.tree->name + "')");
    }
    state_->chain.push_back(t.tree->name);
    struct pop {
      std::vector<std::string>& chain;
      ~pop() { chain.pop_back(); }
    } p{state_->chain};
    in.run_template(*t.tree, t.tpldir, out, register_blocks);
  } catch (const nested_error& e) {
    if (e.head().find("templates load each other") != std::string::npos) throw;
    throw nested_error(e.head(), e.trail() + ", " + trail);
  } catch (const located_error& e) {
    if (std::string(e.what()).find("templates load each other") != std::string::npos) throw;
    throw nested_error(e.what(), trail);
  }
}

void interpreter::run_template(const template_tree& t, const std::string& tpldir,
                               std::string& out, bool register_blocks) {
  name_ = t.name;
  tpldir_ = tpldir;
  if (register_blocks)
    for (const auto& [n, b] : t.blocks) blocks_[n].push_back({b, t.name});
  // After `extends`, a template's own output is dropped (Jinja's
  // `if parent_template is None`); its statements still run.
  std::string dropped;
  for (const auto& s : t.root) exec_one(*s, parent_ ? dropped : out);
  if (!parent_) return;
  auto parent = std::move(parent_);
  parent_.reset();
  const stmt& at = *extends_at_;
  extends_at_ = nullptr;
  found_template f{parent, parent_tpldir_, parent_globals_};
  set_template_globals(parent_globals_);
  run_nested(*this, f, at, "extended", out, false);
}

value interpreter::import_module(const stmt& s) {
  value n = eval(*s.value);
  auto f = find_template(n, false, s, "imported");
  const std::string& key = f->tree->name;
  if (!s.with_context) {
    auto it = state_->modules.find(key);
    if (it != state_->modules.end()) return it->second;
  }
  interpreter& in = child(s.with_context ? visible() : context{}, *f);
  std::string text;
  run_nested(in, *f, s, "imported", text);
  value m = value::make_namespace();
  m.dict().module = true;
  m.dict().module_name = key;
  m.dict().module_text = text;
  for (const auto& [k, v] : in.root_->vars)
    if (!k.starts_with("_")) m.dict().set(value(k), v);
  if (!s.with_context) state_->modules[key] = m;
  return m;
}

std::string interpreter::render_block(const std::string& name, std::size_t index) {
  auto it = blocks_.find(name);
  if (it == blocks_.end() || index >= it->second.size())
    throw template_error("there is no parent block called '" + name + "'.");
  const block_ref b = it->second[index];
  auto f = std::make_shared<frame>();
  f->parent = b.s->scoped ? current_ : root_;
  if (index + 1 < it->second.size()) {
    std::weak_ptr<int> alive = alive_;
    f->vars["super"] =
        value::make_callable("super", [this, name, index, alive](call_args&) -> value {
          if (alive.expired()) throw template_error("super() called after the render");
          return render_block(name, index + 1);
        });
  } else {
    f->vars["super"] = value::undefined("there is no parent block called '" + name + "'.");
  }
  auto saved = current_;
  std::string saved_name = name_;
  struct restore {
    interpreter& in;
    std::shared_ptr<frame> s;
    std::string n;
    ~restore() {
      in.current_ = s;
      in.name_ = n;
    }
  } r{*this, saved, saved_name};
  current_ = f;
  name_ = b.template_name;
  ++own_output_;
  struct unown {
    int& n;
    ~unown() { --n; }
  } u{own_output_};
  std::string out;
  exec(b.s->children, out);
  flow_ = flow::normal;
  return out;
}

value interpreter::template_reference() {
  value ref = value::make_namespace();
  std::weak_ptr<int> alive = alive_;
  for (const auto& [n, chain] : blocks_) {
    ref.dict().set(value(n),
                   value::make_callable(n, [this, n = n, alive](call_args&) -> value {
                     if (alive.expired()) throw template_error("self called after the render");
                     return render_block(n, 0);
                   }));
  }
  return ref;
}

value interpreter::parse_data(const std::string& format, const std::string& text) {
  if (format == "text") return text;
  if (format == "json") {
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception&) {
      throw template_error("Unable to load json from " + text);
    }
    return value::from_json(j);
  }
  if (!env_.yaml_loader)
    throw template_error(
        "no YAML loader: this renderer cannot read YAML (environment::yaml_loader is unset)");
  try {
    return value::from_json(env_.yaml_loader(text, name_));
  } catch (const nlohmann::json::exception& e) {
    // A loader's own slip (nlohmann refusing a key that is not UTF-8) is
    // still the template's error, not a crash of the caller.
    throw template_error(std::string("Encountered error loading yaml: ") + e.what());
  }
}

void interpreter::exec_loader_tag(const stmt& s, std::string& out) {
  switch (s.k) {
    case stmt::kind::include: {
      value n = eval(*s.value);
      auto f = find_template(n, s.ignore_missing, s, "included");
      if (!f) return;
      interpreter& in = child(s.with_context ? visible() : context{}, *f);
      run_nested(in, *f, s, "included", out);
      return;
    }
    case stmt::kind::import_:
      current_->vars[s.name] = import_module(s);
      return;
    case stmt::kind::from_import: {
      value m = import_module(s);
      for (const auto& [n, alias] : s.imports) {
        value* v = m.dict().find(value(n));
        current_->vars[alias] =
            v ? *v
              : value::undefined("the template " + value(m.dict().module_name).repr() +
                                 " (imported on line " + std::to_string(s.line) + " in '" +
                                 name_ + "') does not export the requested name '" + n + "'");
      }
      return;
    }
    case stmt::kind::extends: {
      if (parent_) throw template_error("extended multiple times");
      value n = eval(*s.value);
      auto f = find_template(n, false, s, "extended");
      parent_ = f->tree;
      parent_tpldir_ = f->tpldir;
      parent_globals_ = f->globals;
      extends_at_ = &s;
      for (const auto& [bn, b] : parent_->blocks) blocks_[bn].push_back({b, parent_->name});
      return;
    }
    case stmt::kind::block:
      if (parent_ && own_output_ == 0) return;
      if (s.required && blocks_[s.name].size() <= 1)
        throw template_error("Required block '" + s.name + "' not found");
      out += render_block(s.name, 0);
      return;
    case stmt::kind::load: {
      std::string captured;
      auto saved = current_;
      current_ = std::make_shared<frame>();
      current_->parent = saved;
      struct restore {
        interpreter& in;
        std::shared_ptr<frame> s;
        ~restore() { in.current_ = s; }
      } r{*this, saved};
      exec(s.children, captured);
      current_ = saved;
      assign(*s.target, parse_data(s.format, captured));
      return;
    }
    case stmt::kind::import_data: {
      value m = import_module(s);
      current_->vars[s.name] = parse_data(s.format, m.dict().module_text);
      return;
    }
    case stmt::kind::profile:
      eval(*s.value);
      exec(s.children, out);
      return;
    default:
      return;
  }
}

}  // namespace brine::render::detail
