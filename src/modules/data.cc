#include "modules/data.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <vector>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"

namespace brine::modules {

const nlohmann::json* traverse(const nlohmann::json& data, std::string_view key,
                               std::string_view delimiter) {
  const nlohmann::json* ptr = &data;
  size_t start = 0;
  for (;;) {
    size_t end = delimiter.empty() ? std::string_view::npos : key.find(delimiter, start);
    std::string part(key.substr(start, end == std::string_view::npos ? end : end - start));
    if (ptr->is_array()) {
      const nlohmann::json* found = nullptr;
      for (const auto& item : *ptr) {
        if (item.is_object()) {
          if (auto it = item.find(part); it != item.end()) {
            found = &*it;
            break;
          }
        }
      }
      if (found == nullptr) {
        long idx = 0;
        auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), idx);
        if (ec != std::errc() || p != part.data() + part.size()) return nullptr;
        // Python's negative indexes count from the end.
        long size = static_cast<long>(ptr->size());
        if (idx < 0) idx += size;
        if (idx < 0 || idx >= size) return nullptr;
        found = &(*ptr)[static_cast<size_t>(idx)];
      }
      ptr = found;
    } else if (ptr->is_object()) {
      auto it = ptr->find(part);
      if (it == ptr->end()) return nullptr;
      ptr = &*it;
    } else {
      return nullptr;
    }
    if (end == std::string_view::npos) return ptr;
    start = end + delimiter.size();
  }
}

void dict_update(nlohmann::json& dest, const nlohmann::json& upd, bool merge_lists) {
  if (!dest.is_object() || !upd.is_object()) {
    dest = upd;
    return;
  }
  for (const auto& [k, v] : upd.items()) {
    auto it = dest.find(k);
    if (it != dest.end() && it->is_object() && v.is_object()) {
      dict_update(*it, v, merge_lists);
    } else if (it != dest.end() && merge_lists && it->is_array() && v.is_array()) {
      // Only the items the list lacks (Salt since 2016.11.6), judged against
      // the list as it was: repeats within `v` all go in.
      std::vector<nlohmann::json> added;
      for (const auto& item : v) {
        if (std::find(it->begin(), it->end(), item) == it->end()) added.push_back(item);
      }
      for (auto& item : added) it->push_back(std::move(item));
    } else {
      dest[k] = v;
    }
  }
}

nlohmann::json items_at(const nlohmann::json& data, const arguments& a) {
  nlohmann::json ret = nlohmann::json::object();
  const auto* fallback = a.given("default");
  for (const auto& k : a.rest()) {
    std::string key = k.is_string() ? k.get<std::string>() : k.dump();
    const auto* v = traverse(data, key, a.scalar_text("delimiter", ":"));
    ret[key] = v ? *v : (fallback ? *fallback : nlohmann::json(""));
  }
  return ret;
}

bool fnmatch(std::string_view pattern, std::string_view text) {
  // Python's fnmatch has no escape character and treats '/' as any other.
  return ::fnmatch(std::string(pattern).c_str(), std::string(text).c_str(), FNM_NOESCAPE) == 0;
}

minion_context& need_context(const call& c) {
  if (c.context == nullptr) {
    throw base::error(c.fun + " runs on a minion (it needs the minion's grains, pillar or jobs)");
  }
  return *c.context;
}

}  // namespace brine::modules
