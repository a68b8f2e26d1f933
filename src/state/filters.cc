#include "state/filters.h"

#include <cctype>

#include "render/python_json.h"

namespace brine::state {

using render::value;

std::string python_json(const value& v, bool sort_keys) {
  render::json_dumps_options o;
  o.sort_keys = sort_keys;
  return render::python_json_dumps(v, o);
}

value traverse(const value& data, const std::string& key, const value& fallback,
               const std::string& delimiter) {
  value ptr = data;
  size_t start = 0;
  for (;;) {
    size_t at = delimiter.empty() ? std::string::npos : key.find(delimiter, start);
    std::string each = key.substr(start, at == std::string::npos ? std::string::npos : at - start);
    if (ptr.is_sequence_like()) {
      bool numeric = !each.empty();
      size_t b = (each[0] == '-' || each[0] == '+') ? 1 : 0;
      if (b >= each.size()) numeric = false;
      for (size_t i = b; i < each.size() && numeric; ++i) numeric = std::isdigit(static_cast<unsigned char>(each[i]));
      bool found = false;
      value key_v = numeric ? value(static_cast<std::int64_t>(std::stoll(each))) : value(each);
      for (const auto& e : ptr.items()) {
        if (!e.is_dict()) continue;
        if (value* got = e.dict().find(key_v)) {
          ptr = *got;
          found = true;
          break;
        }
      }
      if (!found) {
        if (!numeric) return fallback;
        auto idx = std::stoll(each);
        auto n = static_cast<long long>(ptr.items().size());
        if (idx < 0) idx += n;
        if (idx < 0 || idx >= n) return fallback;
        ptr = ptr.items()[static_cast<size_t>(idx)];
      }
    } else if (ptr.is_dict()) {
      value* got = ptr.dict().find(value(each));
      if (!got) return fallback;
      ptr = *got;
    } else {
      return fallback;
    }
    if (at == std::string::npos) break;
    start = at + delimiter.size();
  }
  return ptr;
}

}  // namespace brine::state
