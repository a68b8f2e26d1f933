#include "modules/arguments.h"

namespace brine::modules {

arguments::arguments(std::string fun, const call& c, std::vector<std::string> params, bool varargs)
    : fun_(std::move(fun)), params_(std::move(params)) {
  if (!c.args.is_array() || !c.kwargs.is_object()) {
    fail("malformed call: args must be a list and kwargs a mapping");
  }
  if (varargs) {
    rest_.assign(c.args.begin(), c.args.end());
  } else {
    if (c.args.size() > params_.size()) {
      fail("takes at most " + std::to_string(params_.size()) + " positional argument(s)" +
           accepted() + ", got " + std::to_string(c.args.size()));
    }
    for (std::size_t i = 0; i < c.args.size(); ++i) values_[params_[i]] = c.args[i];
  }
  for (const auto& [key, value] : c.kwargs.items()) {
    if (key.starts_with("__")) continue;
    if (std::find(params_.begin(), params_.end(), key) == params_.end()) {
      fail("unknown keyword argument '" + key + "'" + accepted());
    }
    if (values_.contains(key)) fail(key + " was given twice: positionally and as " + key + "=");
    values_[key] = value;
  }
}

void arguments::fail(const std::string& message) const { throw base::error(fun_ + ": " + message); }

const nlohmann::json* arguments::given(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

const nlohmann::json* arguments::get(std::string_view name) const {
  const json* v = given(name);
  return v == nullptr || v->is_null() ? nullptr : v;
}

const nlohmann::json& arguments::need(std::string_view name) const {
  if (const json* v = given(name)) return *v;
  fail("missing argument '" + std::string(name) + "'");
}

std::string arguments::text_of(const std::string& what, const json& v) const {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  fail(what + " must be a string, got " + v.dump());
}

std::optional<std::string> arguments::text(std::string_view name) const {
  const json* v = get(name);
  if (v == nullptr) return std::nullopt;
  return text_of(std::string(name), *v);
}

std::string arguments::scalar_text(std::string_view name, std::string fallback) const {
  const json* v = get(name);
  if (v == nullptr) return fallback;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_primitive()) return v->dump();
  fail(std::string(name) + " must be text, got " + v->dump());
}

bool arguments::flag(std::string_view name, bool fallback) const {
  const json* v = get(name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail(std::string(name) + " must be true or false, got " + v->dump());
  return v->get<bool>();
}

double arguments::seconds(std::string_view name) const {
  const json* v = get(name);
  if (v == nullptr) return 0;
  std::optional<double> s = as_number(*v);
  if (!s || !(*s >= 0))
    fail(std::string(name) + " must be a number of seconds >= 0, got " + v->dump());
  return *s;
}

std::string arguments::accepted() const {
  if (params_.empty()) return " (it takes no keyword arguments)";
  std::string out = " (accepted: ";
  for (std::size_t i = 0; i < params_.size(); ++i) out += (i ? ", " : "") + params_[i];
  return out + ")";
}

std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char ch : word) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

std::vector<std::string> shlex_split(const std::string& what, const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char ch = line[i];
    if (quote == '\'') {
      if (ch == '\'') quote = 0; else cur += ch;
    } else if (quote == '"') {
      if (ch == '"') {
        quote = 0;
      } else if (ch == '\\' && i + 1 < line.size() &&
                 (line[i + 1] == '"' || line[i + 1] == '\\')) {
        // Python's escapedquotes: inside "..." a backslash escapes only
        // the quote and itself (a shell would also take $ and `).
        cur += line[++i];
      } else {
        cur += ch;
      }
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      have = true;
    } else if (ch == '\\') {
      if (i + 1 == line.size()) throw base::error(what + " ends with an escape: " + line);
      cur += line[++i];
      have = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (have) out.push_back(cur);
      cur.clear();
      have = false;
    } else {
      cur += ch;
      have = true;
    }
  }
  if (quote) throw base::error(what + " has an unclosed quote: " + line);
  if (have) out.push_back(cur);
  return out;
}

}  // namespace brine::modules
