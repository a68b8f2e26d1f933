// The grains module: Salt's grains.* over the minion's grains, and
// grains.setval/delval into the grains file beside the minion config.

#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "base/fs.h"
#include "base/yaml_json.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
namespace grains_mod {
namespace {

constexpr auto instant = registry::kind::instant;

std::shared_ptr<const nlohmann::json> grains_of(const call& c) {
  auto g = need_context(c).grains();
  return g ? g : std::make_shared<const nlohmann::json>(nlohmann::json::object());
}

asio::awaitable<outcome> items(call c) {
  arguments s("grains.items", c, {"sanitize"});
  auto data = grains_of(c);
  co_return outcome{*data};
}

asio::awaitable<outcome> get(call c) {
  arguments s("grains.get", c, {"key", "default", "delimiter", "ordered"});
  std::string key = s.scalar_text("key", "");
  if (s.given("key") == nullptr) throw base::error("grains.get needs a key: grains.get os");
  auto g = grains_of(c);
  const auto* v = traverse(*g, key, s.scalar_text("delimiter", ":"));
  const auto* fallback = s.given("default");
  co_return outcome{v ? *v : (fallback ? *fallback : nlohmann::json(""))};
}

// Salt's has_value: whether the key (':' walks into maps and lists) is
// there, whatever its value (None and False count).
asio::awaitable<outcome> has_value(call c) {
  arguments s("grains.has_value", c, {"key"});
  if (s.given("key") == nullptr) throw base::error("grains.has_value needs a key: grains.has_value pkg:apache");
  auto g = grains_of(c);
  co_return outcome{traverse(*g, s.scalar_text("key", "")) != nullptr};
}

asio::awaitable<outcome> item(call c) {
  arguments s("grains.item", c, {"default", "delimiter", "sanitize"}, true);
  // Salt: item(*args, **kwargs), default and delimiter by keyword only.
  co_return outcome{items_at(*grains_of(c), s)};
}

asio::awaitable<outcome> ls(call c) {
  arguments s("grains.ls", c, {});
  nlohmann::json names = nlohmann::json::array();
  auto data = grains_of(c);  // kept alive through the loop
  for (const auto& [k, v] : data->items()) names.push_back(k);
  co_return outcome{std::move(names)};
}

// Salt's salt.utils.data.filter_by.
nlohmann::json filter_by(const std::string& fun, const nlohmann::json& lookup_dict,
                         const nlohmann::json& traversed, const nlohmann::json* merge,
                         const std::string& fallback, const std::string& base) {
  if (!lookup_dict.is_object()) {
    throw base::error(fun + ": lookup_dict must be a mapping, got " + lookup_dict.dump());
  }
  nlohmann::json ret;  // null: nothing found yet
  auto values = traversed.is_array() ? traversed : nlohmann::json::array({traversed});
  for (const auto& each : values) {
    // Python's str(): True, None, 1.5.
    std::string text = each.is_string()    ? each.get<std::string>()
                       : each.is_boolean() ? (each.get<bool>() ? "True" : "False")
                       : each.is_null()    ? "None"
                                           : each.dump();
    for (const auto& [key, value] : lookup_dict.items()) {
      if (fnmatch(key, text)) {
        ret = value;
        break;
      }
    }
    if (!ret.is_null()) break;
  }
  if (ret.is_null()) {
    if (auto d = lookup_dict.find(fallback); d != lookup_dict.end()) ret = *d;
  }
  if (!base.empty()) {
    if (auto b = lookup_dict.find(base); b != lookup_dict.end()) {
      if (ret.is_null()) {
        ret = *b;
      } else if (b->is_object()) {
        if (!ret.is_object()) {
          throw base::error(fun + ": filter_by default and look-up values must both be "
                                  "dictionaries.");
        }
        nlohmann::json merged = *b;
        dict_update(merged, ret);
        ret = std::move(merged);
      }
    }
  }
  // Salt tests `if merge:`: an empty or false merge is no merge.
  if (merge != nullptr && !merge->is_null() && !(merge->is_boolean() && !merge->get<bool>()) &&
      !((merge->is_object() || merge->is_array()) && merge->empty()) &&
      !(merge->is_string() && merge->get<std::string>().empty())) {
    if (!merge->is_object()) throw base::error(fun + ": filter_by merge argument must be a dictionary.");
    if (ret.is_null()) {
      ret = *merge;
    } else {
      dict_update(ret, *merge);
    }
  }
  return ret;
}

asio::awaitable<outcome> filter_by_fn(call c) {
  arguments s("grains.filter_by", c, {"lookup_dict", "grain", "merge", "default", "base"});
  auto g = grains_of(c);
  const auto* traversed = traverse(*g, s.scalar_text("grain", "os_family"));
  co_return outcome{filter_by("grains.filter_by", s.need("lookup_dict"),
                              traversed ? *traversed : nlohmann::json::array(), s.given("merge"),
                              s.scalar_text("default", "default"), s.scalar_text("base", ""))};
}

nlohmann::json read_grains_file(const std::string& path) {
  if (!base::file_exists(path)) return nlohmann::json::object();
  try {
    auto v = base::yaml_to_json(YAML::LoadFile(path));
    if (v.is_null()) return nlohmann::json::object();
    if (!v.is_object()) throw base::error("grains file " + path + " is not a YAML mapping");
    return v;
  } catch (const YAML::Exception& e) {
    throw base::error("grains file " + path + ": " + e.what());
  }
}

// YAML is a superset of JSON: the file stays readable by both and by Salt.
void write_grains_file(const std::string& path, const nlohmann::json& grains) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw base::error("cannot write the grains file " + tmp);
    out << grains.dump(2) << "\n";
    if (!out.flush()) throw base::error("cannot write the grains file " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw base::error("cannot replace the grains file " + path + ": " + ec.message());
}

// Salt's setval: a key's value in the grains file (a nested key with
// `:`), then the grains are refreshed.
nlohmann::json set_value(minion_context& ctx, const std::string& key, const nlohmann::json& val,
                         bool destructive) {
  std::string path = ctx.grains_file();
  nlohmann::json grains = read_grains_file(path);
  if (val.is_null() && destructive) {
    grains.erase(key);
  } else {
    grains[key] = val;
  }
  write_grains_file(path, grains);
  ctx.refresh_grains();
  return {{key, val}};
}

asio::awaitable<outcome> setval(call c) {
  arguments s("grains.setval", c, {"key", "val", "destructive", "refresh_pillar"});
  std::string key = s.scalar_text("key", "");
  if (key.empty()) throw base::error("grains.setval needs a key and a value: grains.setval role web");
  co_return outcome{set_value(need_context(c), key, s.need("val"), s.flag("destructive", false))};
}

asio::awaitable<outcome> delval(call c) {
  arguments s("grains.delval", c, {"key", "destructive", "refresh_pillar"});
  std::string key = s.scalar_text("key", "");
  if (key.empty()) throw base::error("grains.delval needs a key: grains.delval role");
  co_return outcome{set_value(need_context(c), key, nullptr, s.flag("destructive", false))};
}

// Salt's dnsutil.serial: a zone's serial kept as the grain dnsserial[_ZONE]:
// the stored one (today's YYYYMMDD01 when there is none); with update, one
// more than the stored one, or today's when that is older, stored again.
asio::awaitable<outcome> dns_serial(call c) {
  arguments s("dnsutil.serial", c, {"zone", "update"});
  std::string key = "dnsserial";
  if (std::string zone = s.scalar_text("zone", ""); !zone.empty()) key += "_" + zone;
  auto g = grains_of(c);
  const auto* v = traverse(*g, key);
  std::string stored;
  if (v != nullptr && v->is_string()) stored = v->get<std::string>();
  if (v != nullptr && v->is_number_integer()) stored = std::to_string(v->get<long long>());
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y%m%d01", &tm);
  std::string present = buf;
  if (!s.flag("update", false)) co_return outcome{stored.empty() ? present : stored};
  std::string current = present;
  if (!stored.empty() && stored >= present) {
    try {
      current = std::to_string(std::stoll(stored) + 1);
    } catch (const std::exception&) {
      throw base::error("dnsutil.serial: the stored serial " + stored + " is not a number");
    }
  }
  set_value(need_context(c), key, current, false);
  co_return outcome{current};
}

}  // namespace
}  // namespace grains_mod

void register_grains_module(registry& reg) {
  using namespace grains_mod;
  reg.add("grains.items", items,
          "grains.items: returns all of the minion's grains.\n\nCLI example: brine cmd '*' "
          "grains.items",
          instant);
  reg.add("grains.get", get,
          "grains.get KEY [default=''] [delimiter=':']: the value of a grain; ':' walks into "
          "nested maps and lists.\n\nCLI example: brine cmd '*' grains.get ip_interfaces:eth0",
          instant);
  reg.add("dnsutil.serial", dns_serial,
          "dnsutil.serial [zone=''] [update=False]: the zone's serial, kept as the grain "
          "dnsserial_ZONE (today's YYYYMMDD01 when none is stored); update=True stores and "
          "returns the next one.\n\nCLI example: brine cmd '*' dnsutil.serial example.com "
          "update=True");
  reg.add("grains.has_value", has_value,
          "grains.has_value KEY: True when the grain (':' walks into nested maps and lists) "
          "exists, whatever its value.\n\nCLI example: brine cmd '*' grains.has_value pkg:apache",
          instant);
  reg.add("grains.item", item,
          "grains.item KEY... [default=''] [delimiter=':']: a map of the named grains.\n\nCLI "
          "example: brine cmd '*' grains.item os osrelease",
          instant);
  reg.add("grains.ls", ls,
          "grains.ls: the sorted names of the minion's grains.\n\nCLI example: brine cmd '*' grains.ls",
          instant);
  reg.add("grains.filter_by", filter_by_fn,
          "grains.filter_by LOOKUP_DICT [grain=os_family] [merge=] [default=default] [base=]: "
          "the entry of LOOKUP_DICT whose key (a glob) matches the grain's value.\n\nCLI "
          "example: brine cmd '*' grains.filter_by '{Debian: apache2, RedHat: httpd}'",
          instant);
  reg.add("grains.setval", setval,
          "grains.setval KEY VAL [destructive=False]: sets a grain in the grains file beside "
          "the minion config and refreshes the grains; returns {KEY: VAL}.\n\nCLI example: "
          "brine cmd '*' grains.setval role web");
  reg.add("grains.delval", delval,
          "grains.delval KEY [destructive=False]: sets the grain to None in the grains file "
          "(removes it with destructive=True) and refreshes.\n\nCLI example: brine cmd '*' "
          "grains.delval role");
}

}  // namespace brine::modules
