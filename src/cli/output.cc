#include "cli/output.h"

#include "base/yaml_json.h"

#include <cctype>

#include <yaml-cpp/yaml.h>

namespace brine::cli {
namespace {

void scalar(std::string& out, const nlohmann::json& v, const std::string& pad) {
  std::string text;
  if (v.is_boolean()) {
    text = v.get<bool>() ? "True" : "False";
  } else if (v.is_null()) {
    text = "None";
  } else if (v.is_string()) {
    text = v.get<std::string>();
  } else {
    text = v.dump();
  }
  size_t start = 0;
  for (;;) {
    size_t nl = text.find('\n', start);
    out += pad + text.substr(start, nl == std::string::npos ? std::string::npos : nl - start) +
           "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
}

void walk(std::string& out, const nlohmann::json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    out += pad + "----------\n";
    for (const auto& [k, item] : v.items()) {
      out += pad + k + ":\n";
      walk(out, item, indent + 4);
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (item.is_structured()) {
        out += pad + "|_\n";
        walk(out, item, indent + 2);
      } else {
        std::string line;
        scalar(line, item, "");
        out += pad + "- " + line;
      }
    }
  } else {
    scalar(out, v, pad);
  }
}

}  // namespace

std::string nested(const std::string& id, const nlohmann::json& value) {
  std::string out = id + ":\n";
  walk(out, value, 4);
  return out;
}

nlohmann::json parse_arg(const std::string& text) {
  // Only the YAML spellings of null are null; an empty word is an empty string.
  if (text.empty()) return text;
  try {
    return base::yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception&) {
    return text;
  }
}

void split_args(const std::vector<std::string>& words, nlohmann::json& args,
                nlohmann::json& kwargs) {
  args = nlohmann::json::array();
  kwargs = nlohmann::json::object();
  for (const auto& w : words) {
    auto eq = w.find('=');
    bool is_kwarg = eq != std::string::npos && eq > 0;
    for (size_t i = 0; is_kwarg && i < eq; ++i) {
      unsigned char c = static_cast<unsigned char>(w[i]);
      if (!std::isalnum(c) && c != '_') is_kwarg = false;
    }
    if (is_kwarg) {
      kwargs[w.substr(0, eq)] = parse_arg(w.substr(eq + 1));
    } else {
      args.push_back(parse_arg(w));
    }
  }
}

}  // namespace brine::cli
