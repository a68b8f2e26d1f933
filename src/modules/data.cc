#include "modules/data.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>

#include "base/error.h"
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
      for (const auto& item : v) it->push_back(item);
    } else {
      dest[k] = v;
    }
  }
}

bool fnmatch(std::string_view pattern, std::string_view text) {
  // Python's fnmatch has no escape character and treats '/' as any other.
  return ::fnmatch(std::string(pattern).c_str(), std::string(text).c_str(), FNM_NOESCAPE) == 0;
}

signature::signature(std::string fun, std::vector<std::string> names, const call& c,
                     bool varargs)
    : fun_(std::move(fun)), names_(std::move(names)) {
  if (!c.args.is_array() || !c.kwargs.is_object()) {
    throw base::error(fun_ + ": malformed call: args must be a list and kwargs a mapping");
  }
  for (size_t i = 0; i < c.args.size(); ++i) {
    if (varargs || i >= names_.size()) {
      if (!varargs) {
        throw base::error(fun_ + " takes at most " + std::to_string(names_.size()) +
                          " positional argument(s), got " + std::to_string(c.args.size()));
      }
      rest_.push_back(c.args[i]);
    } else {
      given_.emplace(names_[i], c.args[i]);
    }
  }
  for (const auto& [k, v] : c.kwargs.items()) {
    if (k.starts_with("__")) continue;
    if (std::find(names_.begin(), names_.end(), k) == names_.end()) {
      std::string accepted;
      for (const auto& n : names_) accepted += (accepted.empty() ? "" : ", ") + n;
      throw base::error(fun_ + ": unknown keyword argument '" + k + "'" +
                        (accepted.empty() ? " (it takes none)" : " (accepted: " + accepted + ")"));
    }
    if (!given_.emplace(k, v).second) {
      throw base::error(fun_ + ": argument '" + k + "' given twice (by position and as " + k +
                        "=)");
    }
  }
}

const nlohmann::json* signature::get(std::string_view name) const {
  auto it = given_.find(name);
  return it == given_.end() ? nullptr : &it->second;
}

const nlohmann::json& signature::need(std::string_view name) const {
  if (const auto* v = get(name)) return *v;
  throw base::error(fun_ + ": missing argument '" + std::string(name) + "'");
}

std::string signature::text(std::string_view name, std::string fallback) const {
  const auto* v = get(name);
  if (v == nullptr || v->is_null()) return fallback;
  if (v->is_string()) return v->get<std::string>();
  if (v->is_primitive()) return v->dump();
  throw base::error(fun_ + ": " + std::string(name) + " must be text, got " + v->dump());
}

bool signature::flag(std::string_view name, bool fallback) const {
  const auto* v = get(name);
  if (v == nullptr || v->is_null()) return fallback;
  if (!v->is_boolean()) {
    throw base::error(fun_ + ": " + std::string(name) + " must be true or false, got " +
                      v->dump());
  }
  return v->get<bool>();
}

minion_context& need_context(const call& c) {
  if (c.context == nullptr) {
    throw base::error(c.fun + " runs on a minion (it needs the minion's grains, pillar or jobs)");
  }
  return *c.context;
}

}  // namespace brine::modules
