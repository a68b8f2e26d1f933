#include "render/python_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "render/interpreter.h"

namespace brine::render {
namespace {

using ordered_json = nlohmann::ordered_json;

// Python's RecursionError comes near a thousand frames; a dict that holds
// itself stops here instead of overflowing the stack.
constexpr int k_max_depth = 500;

// Python's float.__repr__ as json.dumps writes it.
std::string float_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

// One json.dumps call: its options and the text so far.
class writer {
 public:
  explicit writer(const json_dumps_options& o)
      : o_(o), item_separator_(o.item_separator.value_or(o.indent ? "," : ", ")) {}

  void dump(const value& v, int level);
  void dump(const ordered_json& v, int level);
  std::string finish();

 private:
  void write_string(std::string_view s);
  void newline(int level);
  // A list or a dict: "[]"/"{}" when empty, else the items between the
  // separators, each on a line of its own when there is an indent.
  template <class Items, class Write>
  void container(char open, char close, const Items& items, int level, Write write_item);

  const json_dumps_options& o_;
  std::string item_separator_;
  std::string out_;
};

// json.dumps's two-character escapes.
const char* short_escape(unsigned char c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    default:
      return nullptr;
  }
}

void writer::write_string(std::string_view s) {
  out_ += '"';
  char buf[16];
  for (std::size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (const char* e = short_escape(c)) {
      out_ += e;
      ++i;
      continue;
    }
  if (c < 0x20 || (o_.ensure_ascii && c == 0x7f)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out_ += buf;
      ++i;
      continue;
    }
    if (c < 0x80 || !o_.ensure_ascii) {
      out_ += static_cast<char>(c);
      ++i;
      continue;
    }
    // A UTF-8 sequence; a byte that starts none (or a cut-off one) stands
    // for itself.
    std::size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    std::uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
    for (std::size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    i += n;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out_ += buf;
  }
  out_ += '"';
}

void writer::newline(int level) {
  if (!o_.indent) return;
  out_ += '\n';
  for (int i = 0; i < level; ++i) out_ += *o_.indent;
}

template <class Items, class Write>
void writer::container(char open, char close, const Items& items, int level, Write write_item) {
  out_ += open;
  if (items.empty()) {
    out_ += close;
    return;
  }
  bool first = true;
  for (const auto& item : items) {
    if (!first) out_ += item_separator_;
    first = false;
    newline(level + 1);
    write_item(item);
  }
  newline(level);
  out_ += close;
}

// A dict key as json.dumps writes it: str as is, the other scalars as their
// JSON text.
std::string key_text(const value& k) {
  switch (k.type()) {
    case value::kind::string:
      return k.as_string();
    case value::kind::boolean:
      return k.as_bool() ? "true" : "false";
    case value::kind::none:
      return "null";
    case value::kind::integer:
      return std::to_string(k.as_int());
    case value::kind::floating:
      return float_text(k.as_float());
    default:
      throw template_error("keys must be str, int, float, bool or None, not " + type_name(k));
  }
}

void writer::dump(const value& v, int level) {
  if (level > k_max_depth) {
    throw template_error("maximum recursion depth exceeded while encoding JSON");
  }
  v.defined();
  switch (v.type()) {
    case value::kind::none:
      out_ += "null";
      return;
    case value::kind::boolean:
      out_ += v.as_bool() ? "true" : "false";
      return;
    case value::kind::integer:
      out_ += std::to_string(v.as_int());
      return;
    case value::kind::floating:
      out_ += float_text(v.as_float());
      return;
    case value::kind::string:
      write_string(v.as_string());
      return;
    case value::kind::list:
    case value::kind::tuple:
      container('[', ']', v.items(), level, [&](const value& e) { dump(e, level + 1); });
      return;
    case value::kind::dict: {
      std::vector<const std::pair<value, value>*> entries;
      for (const auto& entry : v.dict().entries) entries.push_back(&entry);
      if (o_.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* x, const auto* y) { return less(x->first, y->first); });
      }
      container('{', '}', entries, level, [&](const auto* entry) {
        write_string(key_text(entry->first));
        out_ += o_.key_separator;
        dump(entry->second, level + 1);
      });
      return;
    }
    default:
      throw template_error("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

void writer::dump(const ordered_json& v, int level) {
  switch (v.type()) {
    case ordered_json::value_t::null:
      out_ += "null";
      return;
    case ordered_json::value_t::boolean:
      out_ += v.get<bool>() ? "true" : "false";
      return;
    case ordered_json::value_t::number_integer:
      out_ += std::to_string(v.get<std::int64_t>());
      return;
    case ordered_json::value_t::number_unsigned:
      out_ += std::to_string(v.get<std::uint64_t>());
      return;
    case ordered_json::value_t::number_float:
      out_ += float_text(v.get<double>());
      return;
    case ordered_json::value_t::string:
      write_string(v.get_ref<const std::string&>());
      return;
    case ordered_json::value_t::array:
      container('[', ']', v, level, [&](const ordered_json& e) { dump(e, level + 1); });
      return;
    case ordered_json::value_t::object: {
      std::vector<std::pair<const std::string*, const ordered_json*>> entries;
      for (auto it = v.begin(); it != v.end(); ++it) entries.emplace_back(&it.key(), &it.value());
      if (o_.sort_keys) {
        // Python orders str by code point, which is UTF-8's byte order.
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& x, const auto& y) { return *x.first < *y.first; });
      }
      container('{', '}', entries, level, [&](const auto& entry) {
        write_string(*entry.first);
        out_ += o_.key_separator;
        dump(*entry.second, level + 1);
      });
      return;
    }
    default:
      // Binary or discarded: decoded JSON holds neither; nlohmann's text.
      out_ += v.dump();
  }
}

std::string writer::finish() {
  if (!o_.html_safe) return std::move(out_);
  std::string out;
  out.reserve(out_.size());
  for (char c : out_) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      case '\'':
        out += "\\u0027";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> json_indent(const value& indent) {
  if (indent.is_none()) return std::nullopt;
  if (indent.is_string()) return indent.as_string();
  auto n = std::max<std::int64_t>(0, detail::to_int(indent, "indent"));
  return std::string(static_cast<std::size_t>(n), ' ');
}

std::string python_json_dumps(const value& v, const json_dumps_options& o) {
  writer w(o);
  w.dump(v, 0);
  return w.finish();
}

std::string python_json_dumps(const nlohmann::ordered_json& v, const json_dumps_options& o) {
  writer w(o);
  w.dump(v, 0);
  return w.finish();
}

}  // namespace brine::render
