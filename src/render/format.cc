#include <climits>
#include <cmath>
#include <cstdio>

#include "base/python.h"
#include "render/interpreter.h"

// Python's string formatting: `%` (printf-style) and str.format's mini-language.
namespace brine::render::detail {
namespace {

struct spec {
  char fill = ' ';
  char align = '\0';
  char sign = '-';
  bool alt = false;
  bool zero = false;
  int width = -1;
  bool grouping = false;
  int precision = -1;
  char type = '\0';
};

std::string pad(const std::string& body, const spec& sp, char default_align) {
  if (sp.width < 0) return body;
  auto len = base::python_len(body);
  auto w = static_cast<std::size_t>(sp.width);
  if (len >= w) return body;
  std::size_t n = w - len;
  charge_steps(n);
  char align = sp.align ? sp.align : default_align;
  std::string f(1, sp.fill);
  auto rep = [&](std::size_t k) {
    std::string out;
    for (std::size_t i = 0; i < k; ++i) out += f;
    return out;
  };
  if (align == '<') return body + rep(n);
  if (align == '^') return rep(n / 2) + body + rep(n - n / 2);
  if (align == '=') {
    if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
      return body.substr(0, 1) + rep(n) + body.substr(1);
    return rep(n) + body;
  }
  return rep(n) + body;
}

std::string group_thousands(const std::string& digits) {
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return out;
}

std::string format_number(const value& v, const spec& sp) {
  char type = sp.type;
  bool is_int = v.is_int() || v.is_bool();
  if (type == '\0') type = is_int ? 'd' : 'r';
  std::string body;
  bool negative = false;
  if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c') {
    if (!is_int)
      throw template_error("Unknown format code '" + std::string(1, type) +
                           "' for object of type 'float'");
    std::int64_t i = v.is_bool() ? std::int64_t{v.as_bool()} : v.as_int();
    negative = i < 0;
    std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(i) : static_cast<std::uint64_t>(i);
    if (type == 'd') {
      body = std::to_string(u);
      if (sp.grouping) body = group_thousands(body);
    } else if (type == 'b') {
      if (u == 0) body = "0";
      while (u) {
        body.insert(body.begin(), static_cast<char>('0' + (u & 1)));
        u >>= 1;
      }
      if (sp.alt) body = "0b" + body;
    } else {
      char buf[40];
      std::snprintf(buf, sizeof buf,
                    type == 'x'   ? "%llx"
                    : type == 'X' ? "%llX"
                                  : "%llo",
                    static_cast<unsigned long long>(u));
      body = buf;
      if (sp.alt) body = (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") + body;
    }
  } else {
    double d = v.to_double();
    negative = std::signbit(d) && !std::isnan(d);
    double a = std::fabs(d);
    if (type == 'r') {
      body = float_repr(a);
    } else if (std::isinf(a)) {
      body = (type == 'F' || type == 'E' || type == 'G') ? "INF" : "inf";
    } else if (std::isnan(a)) {
      body = (type == 'F' || type == 'E' || type == 'G') ? "NAN" : "nan";
    } else {
      int prec = sp.precision < 0 ? 6 : sp.precision;
      char buf[512];
      if (type == '%') {
        std::snprintf(buf, sizeof buf, "%.*f", prec, a * 100);
        body = std::string(buf) + "%";
      } else {
        char f[8] = {'%', '.', '*', type == 'n' ? 'g' : type, '\0'};
        std::snprintf(buf, sizeof buf, f, prec, a);
        body = buf;
      }
      if (sp.grouping && (type == 'f' || type == 'F')) {
        auto dot = body.find('.');
        body = group_thousands(body.substr(0, dot)) +
               (dot == std::string::npos ? "" : body.substr(dot));
      }
    }
  }
  std::string sign = negative ? "-" : (sp.sign == '+' ? "+" : sp.sign == ' ' ? " " : "");
  if (sp.zero && sp.align == '\0') {
    spec z = sp;
    z.fill = '0';
    z.align = '=';
    return pad(sign + body, z, '>');
  }
  return pad(sign + body, sp, '>');
}

spec parse_spec(const std::string& s) {
  spec sp;
  std::size_t i = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    sp.fill = s[0];
    sp.align = s[1];
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    sp.align = s[0];
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sp.sign = s[i++];
  if (i < s.size() && s[i] == '#') {
    sp.alt = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    sp.zero = true;
    ++i;
  }
  std::size_t w = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  // Python takes any width that fits a Py_ssize_t; brine stops at INT_MAX
  // (2 GiB of padding). pad() charges the padding to the step budget.
  if (i > w) sp.width = static_cast<int>(parse_digits(s.substr(w, i - w), INT_MAX, "width"));
  if (i < s.size() && s[i] == ',') {
    sp.grouping = true;
    ++i;
  }
  if (i < s.size() && s[i] == '.') {
    std::size_t p = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == p) throw template_error("Format specifier missing precision");
    sp.precision = static_cast<int>(parse_digits(s.substr(p, i - p), 1000, "precision"));
  }
  if (i < s.size()) sp.type = s[i++];
  if (i != s.size()) throw template_error("Invalid format specifier '" + s + "'");
  return sp;
}

}  // namespace

std::string format_field(const value& v, const std::string& text) {
  v.defined();
  spec sp = parse_spec(text);
  if (v.is_number() && !(v.is_bool() && sp.type == '\0')) {
    if (sp.type == 's')
      throw template_error("Unknown format code 's' for object of type '" + type_name(v) + "'");
    return format_number(v, sp);
  }
  if (sp.type != '\0' && sp.type != 's')
    throw template_error("Unknown format code '" + std::string(1, sp.type) +
                         "' for object of type '" + type_name(v) + "'");
  std::string s = v.str();
  if (sp.precision >= 0) {
    std::size_t n = 0;
    std::size_t i = 0;
    for (; i < s.size(); ++i) {
      if ((static_cast<unsigned char>(s[i]) & 0xc0) != 0x80) {
        if (n == static_cast<std::size_t>(sp.precision)) break;
        ++n;
      }
    }
    s.resize(i);
  }
  return pad(s, sp, '<');
}

std::string percent_format(const std::string& fmt, const value& args) {
  // Python's rule: a tuple is the argument list; any other value is one
  // argument, and one that has __getitem__ but is not a str (a dict, and a
  // list too) is also the mapping, which excuses arguments left unconverted:
  // 'abc' % [1] is 'abc', 'abc' % 1 fails.
  std::vector<value> list;
  const value* mapping = nullptr;
  if (args.is_tuple()) {
    list = args.items();
  } else {
    if (args.is_dict() || args.is_list()) mapping = &args;
    list.push_back(args);
  }
  std::size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size()) throw template_error("incomplete format");
    value arg;
    bool have = false;
    if (fmt[i] == '(') {
      auto close = fmt.find(')', i);
      if (close == std::string::npos) throw template_error("incomplete format key");
      if (!mapping) throw template_error("format requires a mapping");
      if (!mapping->is_dict())
        throw template_error("list indices must be integers or slices, not str");
      std::string key = fmt.substr(i + 1, close - i - 1);
      value* v = mapping->dict().find(value(key));
      if (!v) throw template_error("KeyError: " + string_repr(key));
      arg = *v;
      have = used_mapping = true;
      i = close + 1;
    }
    spec sp;
    for (; i < fmt.size(); ++i) {
      char c = fmt[i];
      if (c == '-') {
        sp.align = '<';
      } else if (c == '+') {
        sp.sign = '+';
      } else if (c == ' ') {
        if (sp.sign != '+') sp.sign = ' ';
      } else if (c == '#') {
        sp.alt = true;
      } else if (c == '0') {
        sp.zero = true;
      } else {
        break;
      }
    }
    std::size_t w = i;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) ++i;
    if (i > w) sp.width = static_cast<int>(parse_digits(fmt.substr(w, i - w), INT_MAX, "width"));
    if (i < fmt.size() && fmt[i] == '.') {
      std::size_t p = ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) ++i;
      sp.precision =
          i > p ? static_cast<int>(parse_digits(fmt.substr(p, i - p), 1000, "precision")) : 0;
    }
    if (i >= fmt.size()) throw template_error("incomplete format");
    char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!have) {
      if (next >= list.size()) throw template_error("not enough arguments for format string");
      arg = list[next++];
    }
    if (sp.align == '<') sp.zero = false;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = type == 's' ? arg.str() : arg.repr();
        if (sp.precision >= 0 && static_cast<std::size_t>(sp.precision) < s.size())
          s.resize(static_cast<std::size_t>(sp.precision));
        out += pad(s, sp, '>');
        break;
      }
      case 'd':
      case 'i':
      case 'u': {
        arg.defined();
        if (!arg.is_number())
          throw template_error("%d format: a real number is required, not " + type_name(arg));
        value n =
            arg.is_float() ? value(static_cast<std::int64_t>(std::trunc(arg.as_float()))) : arg;
        sp.type = 'd';
        out += format_number(n, sp);
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        arg.defined();
        if (!arg.is_int() && !arg.is_bool())
          throw template_error(std::string("%") + type + " format: an integer is required, not " +
                               type_name(arg));
        sp.type = type;
        out += format_number(arg, sp);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        arg.defined();
        if (!arg.is_number()) throw template_error("must be real number, not " + type_name(arg));
        sp.type = type;
        out += format_number(value(arg.to_double()), sp);
        break;
      }
      default:
        throw template_error(std::string("unsupported format character '") + type + "'");
    }
  }
  if (!used_mapping && !mapping && next < list.size())
    throw template_error("not all arguments converted during string formatting");
  return out;
}

std::string str_format(const std::string& fmt, const call_args& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      throw template_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    auto close = fmt.find('}', i);
    if (close == std::string::npos) throw template_error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec_text;
    char conversion = '\0';
    if (auto colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field.resize(colon);
    }
    if (auto bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : '\0';
      field.resize(bang);
    }
    std::size_t end = field.find_first_of(".[");
    std::string head = field.substr(0, end);
    value v;
    if (head.empty()) {
      if (auto_index >= args.positional.size())
        throw template_error("Replacement index " + std::to_string(auto_index) +
                             " out of range for positional args tuple");
      v = args.positional[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      auto n = static_cast<std::size_t>(parse_digits(head, 1000000, "index"));
      if (n >= args.positional.size())
        throw template_error("Replacement index " + head +
                             " out of range for positional args tuple");
      v = args.positional[n];
    } else {
      bool found = false;
      for (const auto& [k, kv] : args.keyword) {
        if (k == head) {
          v = kv;
          found = true;
        }
      }
      if (!found) throw template_error("KeyError: " + string_repr(head));
    }
    while (end != std::string::npos && end < field.size()) {
      if (field[end] == '.') {
        std::size_t e2 = field.find_first_of(".[", end + 1);
        std::string attr =
            field.substr(end + 1, e2 == std::string::npos ? std::string::npos : e2 - end - 1);
        value* f = v.is_dict() ? v.dict().find(value(attr)) : nullptr;
        if (!f)
          throw template_error("'" + type_name(v) + "' object has no attribute '" + attr + "'");
        v = *f;
        end = e2;
      } else {
        std::size_t e2 = field.find(']', end);
        if (e2 == std::string::npos) throw template_error("Missing ']' in format string");
        std::string key = field.substr(end + 1, e2 - end - 1);
        if (v.is_sequence_like() && !key.empty() &&
            std::isdigit(static_cast<unsigned char>(key[0]))) {
          auto n = static_cast<std::size_t>(parse_digits(key, 1000000, "index"));
          if (n >= v.items().size()) throw template_error("list index out of range");
          v = v.items()[n];
        } else if (v.is_dict()) {
          value* f = v.dict().find(value(key));
          if (!f) throw template_error("KeyError: " + string_repr(key));
          v = *f;
        } else {
          throw template_error("'" + type_name(v) + "' object is not subscriptable");
        }
        end = e2 + 1;
      }
    }
    if (conversion == 'r') {
      v = v.repr();
    } else if (conversion == 's') {
      v = v.str();
    }
    out += format_field(v, spec_text);
  }
  return out;
}

}  // namespace brine::render::detail
