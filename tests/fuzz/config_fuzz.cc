// libFuzzer target: master and minion config files (YAML), which a user
// edits by hand. The first byte picks the master's or the minion's parser;
// the rest is the file's text. Parsing must never crash or hang and may
// only throw base::error (one line naming the file, the line and the fix).
// Where the fast path for plain `name: value` files (detail::simple_mapping)
// takes the text, yaml-cpp must read the same options from it: the two
// parsers may never disagree on what a file says.
#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/config.h"
#include "base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = (spdlog::set_level(spdlog::level::off), true);
  (void)quiet;
  if (size < 1) return 0;
  std::string yaml(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::string source = "/nonexistent/brine-fuzz/config";
  try {
    if (data[0] % 2 == 0) {
      (void)brine::base::parse_master_config(yaml, source);
    } else {
      (void)brine::base::parse_minion_config(yaml, source);
    }
  } catch (const brine::base::error&) {
    // A config the user must fix: the message says where and how.
  }
  if (auto simple = brine::base::detail::simple_mapping(yaml)) {
    YAML::Node root;
    try {
      root = YAML::Load(yaml);
    } catch (const YAML::Exception&) {
      std::abort();  // the fast path took text that is not YAML
    }
    if (simple->empty()) {
      if (!root.IsNull() && !(root.IsMap() && root.size() == 0)) std::abort();
      return 0;
    }
    if (!root.IsMap()) std::abort();
    // yaml-cpp keeps a mapping's order; a repeated name is the caller's
    // error either way (check_once), so compare the first of each.
    size_t i = 0;
    for (const auto& kv : root) {
      if (i >= simple->size()) std::abort();
      const auto& o = (*simple)[i++];
      if (!kv.first.IsScalar() || kv.first.Scalar() != o.name) std::abort();
      if (!kv.second.IsScalar() || kv.second.Scalar() != o.value) std::abort();
      if (kv.first.Mark().line + 1 != o.line) std::abort();
    }
    if (i != simple->size()) std::abort();
  }
  return 0;
}
