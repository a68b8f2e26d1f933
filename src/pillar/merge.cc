#include "pillar/merge.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace brine::pillar {

namespace {

constexpr std::pair<std::string_view, strategy> k_strategies[] = {
    {"smart", strategy::smart},         {"recurse", strategy::recurse},
    {"aggregate", strategy::aggregate}, {"overwrite", strategy::overwrite},
    {"none", strategy::none},
};

// salt.utils.dictupdate.update with recursive_update=True. Its shortcut for
// mappings with no key in common (a plain dict.update) gives the same result.
template <class Json>
void update(Json& dest, const Json& upd, bool merge_lists) {
  for (const auto& [key, val] : upd.items()) {
    auto it = dest.find(key);
    if (it == dest.end()) {
      dest[key] = val;
    } else if (it->is_object() && val.is_object()) {
      update(*it, val, merge_lists);
    } else if (merge_lists && it->is_array() && val.is_array()) {
      // merged.extend([x for x in val if x not in merged]): `merged` is the
      // old list while the new items are picked, so duplicates within `val`
      // stay.
      auto& list = *it;
      auto old_end = static_cast<std::ptrdiff_t>(list.size());
      for (const auto& x : val) {
        if (std::find(list.begin(), list.begin() + old_end, x) == list.begin() + old_end) {
          list.push_back(x);
        }
      }
    } else {
      *it = val;
    }
  }
}

}  // namespace

std::optional<strategy> parse_strategy(std::string_view name) {
  for (const auto& [n, s] : k_strategies) {
    if (n == name) return s;
  }
  return std::nullopt;
}

namespace detail {

template <class Json>
void merge(Json& dest, const Json& upd, strategy s, bool merge_lists) {
  switch (s) {
    case strategy::smart:
    case strategy::recurse:
      update(dest, upd, merge_lists);
      return;
    case strategy::none:
      update(dest, upd, false);
      return;
    case strategy::overwrite:
    case strategy::aggregate:
      // merge_overwrite: replace the shared top-level keys, then
      // merge_recurse, which then has nothing left to merge (each shared
      // value is laid over itself, lists included).
      for (const auto& [key, val] : upd.items()) dest[key] = val;
      return;
  }
}

template void merge(nlohmann::json&, const nlohmann::json&, strategy, bool);
template void merge(nlohmann::ordered_json&, const nlohmann::ordered_json&, strategy, bool);

}  // namespace detail

}  // namespace brine::pillar
