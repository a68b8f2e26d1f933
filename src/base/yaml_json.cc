#include "base/yaml_json.h"

#include "base/error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>

namespace brine::base {

namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), s) != words.end();
}

// Digits of `base` with optional '_' separators (YAML 1.1), at least one digit.
bool parse_int(std::string_view digits, int base, bool negative, nlohmann::json& out) {
  std::string clean;
  for (char c : digits) {
    if (c != '_') clean += c;
  }
  if (clean.empty()) return false;
  for (char c : clean) {
    int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
            : std::isxdigit(static_cast<unsigned char>(c))
                ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                : 99;
    if (v >= base) return false;
  }
  errno = 0;
  unsigned long long v = std::strtoull(clean.c_str(), nullptr, base);
  if (errno == ERANGE) return false;
  if (negative) {
    if (v > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()) + 1) return false;
    out = v == static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()) + 1
              ? std::numeric_limits<int64_t>::min()
              : -static_cast<int64_t>(v);
  } else if (v <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
    out = static_cast<int64_t>(v);
  } else {
    out = v;
  }
  return true;
}

bool digits_or_underscores(std::string_view s, int base) {
  return std::all_of(s.begin(), s.end(), [base](char c) {
    if (c == '_') return true;
    if (base == 2) return c == '0' || c == '1';
    if (base == 8) return c >= '0' && c <= '7';
    if (base == 16) return std::isxdigit(static_cast<unsigned char>(c)) != 0;
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// PyYAML's implicit resolvers for int and float (YAML 1.1), sexagesimal
// numbers left out: 0b/0x/leading-0 octal/decimal integers, and floats with
// a '.' (an exponent needs its sign: 1.0e+3, not 1e3).
bool parse_number(std::string_view s, nlohmann::json& out) {
  if (s.empty()) return false;
  bool negative = s[0] == '-';
  std::string_view body = (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
  if (body.empty()) return false;
  if (body.size() > 2 && body[0] == '0' && (body[1] == 'b' || body[1] == 'x')) {
    int base = body[1] == 'b' ? 2 : 16;
    return digits_or_underscores(body.substr(2), base) &&
           parse_int(body.substr(2), base, negative, out);
  }
  if (body.size() > 1 && body[0] == '0' && digits_or_underscores(body.substr(1), 8)) {
    return parse_int(body.substr(1), 8, negative, out);
  }
  if (body == "0" || (body[0] >= '1' && body[0] <= '9' && digits_or_underscores(body, 10))) {
    return parse_int(body, 10, negative, out);
  }
  if (one_of(body, {".inf", ".Inf", ".INF"})) {
    out = negative ? -std::numeric_limits<double>::infinity()
                   : std::numeric_limits<double>::infinity();
    return true;
  }
  if (one_of(s, {".nan", ".NaN", ".NAN"})) {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  // [0-9][0-9_]*\.[0-9_]*  or  \.[0-9_]+ , then ([eE][-+][0-9]+)?
  size_t dot = body.find('.');
  if (dot == std::string_view::npos) return false;
  std::string_view whole = body.substr(0, dot);
  std::string_view rest = body.substr(dot + 1);
  size_t e = rest.find_first_of("eE");
  std::string_view fraction = rest.substr(0, e);
  if (!digits_or_underscores(whole, 10) || !digits_or_underscores(fraction, 10)) return false;
  if (whole.empty() ? fraction.empty() || fraction[0] == '_' : whole[0] == '_') return false;
  if (e != std::string_view::npos) {
    std::string_view exponent = rest.substr(e + 1);
    if (exponent.size() < 2 || (exponent[0] != '+' && exponent[0] != '-') ||
        !std::all_of(exponent.begin() + 1, exponent.end(),
                     [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; })) {
      return false;
    }
  }
  std::string clean;
  for (char c : s) {
    if (c != '_') clean += c;
  }
  out = std::strtod(clean.c_str(), nullptr);
  return true;
}

}  // namespace

nlohmann::json yaml_scalar(const std::string& s) {
  if (one_of(s, {"", "~", "null", "Null", "NULL"})) return nullptr;
  if (one_of(s, {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"})) return true;
  if (one_of(s, {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"})) return false;
  nlohmann::json n;
  if (parse_number(s, n)) return n;
  return s;
}

namespace {

// Values a conversion may make. Aliases let a few lines of YAML stand for
// an exponential tree (the "billion laughs"); as data, every value counts.
constexpr size_t k_max_values = 1'000'000;
constexpr int k_max_depth = 1000;

struct converter {
  size_t made = 0;

  nlohmann::json convert(const YAML::Node& node, int depth) {
    if (++made > k_max_values) {
      throw error("YAML data with more than " + std::to_string(k_max_values) +
                  " values (aliases expand to a copy each time they are used): write the data "
                  "out without nesting aliases");
    }
    if (depth > k_max_depth) {
      throw error("YAML data nested more than " + std::to_string(k_max_depth) + " levels deep");
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return nullptr;
      case YAML::NodeType::Sequence: {
        auto a = nlohmann::json::array();
        for (const auto& item : node) a.push_back(convert(item, depth + 1));
        return a;
      }
      case YAML::NodeType::Map: {
        auto o = nlohmann::json::object();
        for (const auto& kv : node) {
          auto key = convert(kv.first, depth + 1);
          o[key.is_string() ? key.get<std::string>() : key.dump()] = convert(kv.second, depth + 1);
        }
        return o;
      }
      case YAML::NodeType::Scalar:
        break;
    }
    // Quoted (or explicitly tagged !!str) scalars are strings as they are.
    if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return node.Scalar();
    return yaml_scalar(node.Scalar());
  }
};

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& node) {
  converter c;
  return c.convert(node, 0);
}

}  // namespace brine::base
