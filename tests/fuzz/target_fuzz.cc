// libFuzzer target: target expressions, as `brine cmd` and the local API
// take them from a user (and a minion re-checks a publish's). The first
// byte picks the tgt_type, the second the delimiter; the rest is the
// expression. Parsing must never crash or hang and may only throw
// target::error (Salt's message naming the word at fault); a parsed
// expression must match a minion with grains and pillar, with and without
// greed, without throwing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "target/target.h"

namespace {

using brine::target::type;

const brine::target::nodegroups& groups() {
  static const brine::target::nodegroups g = {
      {"web", std::string("G@role:web or N@db")},
      {"db", std::vector<std::string>{"db1", "db2"}},
      {"loop", std::string("N@loop and web*")},
      {"deep", std::string("N@web and not N@db")},
  };
  return g;
}

const nlohmann::json& grains() {
  static const nlohmann::json g = nlohmann::json::parse(R"({
    "os": "Debian", "osmajorrelease": 12, "role": ["web", "db"],
    "ipv4": ["127.0.0.1", "10.1.2.3"], "ip_interfaces": {"lo": ["127.0.0.1"]},
    "nested": {"a": {"b": "c:d"}}, "num": 1.5, "flag": true, "none": null})");
  return g;
}

const nlohmann::json& pillar() {
  static const nlohmann::json p =
      nlohmann::json::parse(R"({"env": "prod", "list": [1, "two", {"k": "v"}]})");
  return p;
}

constexpr type k_types[] = {type::glob,        type::pcre,   type::list,      type::grain,
                            type::grain_pcre,  type::pillar, type::pillar_pcre, type::ipcidr,
                            type::nodegroup,   type::compound};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  type t = k_types[data[0] % (sizeof(k_types) / sizeof(k_types[0]))];
  char delimiter = static_cast<char>(data[1]);
  std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  try {
    auto e = brine::target::expression::parse(text, t, groups(), delimiter);
    brine::target::expression::tree_data both{&grains(), &pillar()};
    brine::target::expression::tree_data none{};
    for (const char* id : {"web1", "db1", "", "a.b-c_d"}) {
      (void)e.matches(id, both, false);
      (void)e.matches(id, none, true);
      (void)e.matches(id, none, false);
    }
    (void)e.listed();
  } catch (const brine::target::error&) {
    // A malformed expression: the user's message.
  } catch (const brine::base::error&) {
    // e.g. a regex PCRE2 refuses, named with the expression.
  }
  return 0;
}
