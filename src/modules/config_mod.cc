// The config module: Salt's config.* over the minion's options, grains,
// pillar, the master's options (pillar key 'master') and Salt's defaults.

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "base/python_truth.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
namespace config_mod {
namespace {

constexpr auto instant = registry::kind::instant;

using json = nlohmann::json;

// Salt's dictupdate.merge with strategy recurse or overwrite (lists are
// replaced: Salt takes merge_lists from /etc/salt/master, which a minion
// rarely has). Overwrite replaces a top-level key whole.
void merge_source(json& data, const json& src, const std::string& strategy,
                  const std::string& what) {
  if (!src.is_object()) {
    throw tool_failure("config.get: cannot merge " + what + ": it must be a dictionary, got " +
                       src.dump());
  }
  if (strategy == "overwrite") {
    for (const auto& [k, v] : src.items()) data[k] = v;
  } else {
    dict_update(data, src);
  }
}

// Salt's config.get: the first of the minion options, grains, pillar, the
// master's options (pillar 'master', where the master sends them with
// pillar_opts) and Salt's defaults that has the key; with merge=, all of
// them merged (options over grains over pillar over the master's over the
// defaults; omit_* do not apply, as in Salt), then walked.
asio::awaitable<outcome> config_get_impl(call c) {
  arguments s("config.get", c,
              {"key", "default", "delimiter", "merge", "omit_opts", "omit_pillar", "omit_master",
               "omit_grains"});
  if (s.given("key") == nullptr) throw base::error("config.get needs a key: config.get pki_dir");
  std::string key = s.scalar_text("key", "");
  std::string delimiter = s.scalar_text("delimiter", ":");
  auto& ctx = need_context(c);
  auto grains = ctx.grains();
  auto pillar = ctx.pillar();
  const json empty = json::object();
  const json& grains_data = grains ? *grains : empty;
  const json& pillar_data = pillar ? *pillar : empty;
  const json* master_data = &empty;
  if (auto it = pillar_data.find("master"); it != pillar_data.end()) master_data = &*it;
  const json* fallback = s.given("default");
  json dflt = fallback ? *fallback : json("");
  const json* merge = s.get("merge");
  if (merge == nullptr) {
    std::vector<const json*> sources;
    if (!s.flag("omit_opts", false)) sources.push_back(&ctx.opts());
    if (!s.flag("omit_grains", false)) sources.push_back(&grains_data);
    if (!s.flag("omit_pillar", false)) sources.push_back(&pillar_data);
    if (!s.flag("omit_master", false)) sources.push_back(master_data);
    sources.push_back(&config_defaults());
    for (const auto* src : sources) {
      if (const auto* v = traverse(*src, key, delimiter)) co_return outcome{*v};
    }
    co_return outcome{dflt};
  }
  std::string strategy = merge->is_string() ? merge->get<std::string>() : merge->dump();
  if (strategy != "recurse" && strategy != "overwrite") {
    spdlog::warn("Unsupported merge strategy '{}'. Falling back to 'recurse'.", strategy);
    strategy = "recurse";
  }
  json data = config_defaults();
  merge_source(data, *master_data, strategy, "pillar key 'master' (the master's options)");
  merge_source(data, pillar_data, strategy, "the pillar");
  merge_source(data, grains_data, strategy, "the grains");
  merge_source(data, ctx.opts(), strategy, "the minion's options");
  const auto* v = traverse(data, key, delimiter);
  co_return outcome{v ? *v : dflt};
}

asio::awaitable<outcome> config_get(call c) {
  return failures_as_outcomes<config_get_impl>(std::move(c));
}

// Salt's config.valid_fileproto: whether the URI's scheme is one Salt fetches
// from (salt, file, http, https, ftp, swift, s3).
bool is_valid_fileproto(std::string_view uri) {
  // Python's urlparse: C0 controls and spaces stripped in front, tabs and
  // line breaks dropped anywhere; the scheme is what precedes the first ':'
  // when it starts with a letter and holds only letters, digits, '+', '-'
  // and '.', lowercased.
  std::string u;
  for (char ch : uri) {
    if (ch != '\t' && ch != '\r' && ch != '\n') u += ch;
  }
  std::size_t start = 0;
  while (start < u.size() && static_cast<unsigned char>(u[start]) <= ' ') ++start;
  u.erase(0, start);
  auto colon = u.find(':');
  std::string scheme;
  if (colon != std::string::npos && colon > 0 &&
      std::isalpha(static_cast<unsigned char>(u[0])) && static_cast<unsigned char>(u[0]) < 0x80) {
    bool ok = true;
    for (std::size_t i = 0; i < colon; ++i) {
      unsigned char ch = static_cast<unsigned char>(u[i]);
      if (!(ch < 0x80 && (std::isalnum(ch) || ch == '+' || ch == '-' || ch == '.'))) ok = false;
    }
    if (ok) {
      for (std::size_t i = 0; i < colon; ++i) {
        scheme += static_cast<char>(std::tolower(static_cast<unsigned char>(u[i])));
      }
    }
  }
  for (const char* proto : {"salt", "file", "http", "https", "ftp", "swift", "s3"}) {
    if (scheme == proto) return true;
  }
  return false;
}

// salt.utils.files.normalize_mode: as text, "0o" made "0", quotes and
// leading zeros stripped, then zero-padded to four characters.
std::string normalize_mode_text(const nlohmann::json& mode) {
  std::string m = mode.is_string() ? mode.get<std::string>() : mode.dump();
  if (mode.is_boolean()) m = mode.get<bool>() ? "True" : "False";
  for (std::size_t at = m.find("0o"); at != std::string::npos; at = m.find("0o", at + 1)) {
    m.replace(at, 2, "0");
  }
  auto strip = [&m](char q) {
    std::size_t b = m.find_first_not_of(q);
    if (b == std::string::npos) {
      m.clear();
      return;
    }
    m = m.substr(b, m.find_last_not_of(q) - b + 1);
  };
  strip('"');
  strip('\'');
  std::size_t nz = m.find_first_not_of('0');
  m.erase(0, nz == std::string::npos ? m.size() : nz);
  if (m.size() < 4) {
    bool sign = !m.empty() && (m[0] == '+' || m[0] == '-');
    m.insert(sign ? 1 : 0, 4 - m.size(), '0');
  }
  return m;
}

// The master's options as a minion sees them (pillar key 'master', where
// the master sends them with pillar_opts): a mapping, else nothing.
const json& master_opts(const json& pillar) {
  static const json none = json::object();
  auto it = pillar.find("master");
  return it != pillar.end() && it->is_object() ? *it : none;
}

// A top-level key of `data`, no walk into nested maps (config.option,
// config.merge); a key that is not text is in no mapping.
const json* top_level(const json& data, const json& key) {
  if (!key.is_string() || !data.is_object()) return nullptr;
  auto it = data.find(key.get<std::string>());
  return it != data.end() ? &*it : nullptr;
}

// Salt's config.option: the first of the minion's options, grains, pillar,
// the master's options and Salt's defaults that has the key at the top
// level (no ':' walk, unlike config.get). With wildcard, the key is a glob
// and every match is returned in a map, the minion's options winning over
// grains, pillar and the master's, Salt's defaults filling in.
asio::awaitable<outcome> option(call c) {
  arguments s("config.option", c,
              {"value", "default", "omit_opts", "omit_grains", "omit_pillar", "omit_master",
               "omit_all", "wildcard"});
  const json& value = s.need("value");
  auto& ctx = need_context(c);
  auto grains = ctx.grains();
  auto pillar = ctx.pillar();
  const json empty = json::object();
  const json& grains_data = grains ? *grains : empty;
  const json& pillar_data = pillar ? *pillar : empty;
  bool all = s.flag("omit_all", false);
  bool omit_opts = all || s.flag("omit_opts", false);
  bool omit_grains = all || s.flag("omit_grains", false);
  bool omit_pillar = all || s.flag("omit_pillar", false);
  bool omit_master = all || s.flag("omit_master", false);
  bool wildcard = s.flag("wildcard", false);
  const json* fallback = s.get("default");
  json dflt = fallback ? *fallback : wildcard ? json::object() : json("");
  if (!wildcard) {
    std::vector<const json*> sources;
    if (!omit_opts) sources.push_back(&ctx.opts());
    if (!omit_grains) sources.push_back(&grains_data);
    if (!omit_pillar) sources.push_back(&pillar_data);
    if (!omit_master) sources.push_back(&master_opts(pillar_data));
    sources.push_back(&config_defaults());
    for (const auto* src : sources) {
      if (const auto* v = top_level(*src, value)) co_return outcome{*v};
    }
    co_return outcome{dflt};
  }
  if (!value.is_string()) s.fail("with wildcard, value must be a glob, got " + value.dump());
  std::string glob = value.get<std::string>();
  json found = json::object();
  auto add = [&](const json& src) {
    for (const auto& [k, v] : src.items()) {
      if (fnmatch(glob, k)) found[k] = v;
    }
  };
  if (!omit_master) add(master_opts(pillar_data));
  if (!omit_pillar) add(pillar_data);
  if (!omit_grains) add(grains_data);
  if (!omit_opts) add(ctx.opts());
  for (const auto& [k, v] : config_defaults().items()) {
    if (fnmatch(glob, k) && !found.contains(k)) found[k] = v;
  }
  co_return outcome{found.empty() ? dflt : std::move(found)};
}

// Salt's config.merge: the key's values in the minion's options, the
// master's options and the pillar (not the grains) combined: the first
// found that is text is returned as it is; maps are merged one level deep,
// the earlier source winning; lists are concatenated in source order; any
// other pairing keeps the earlier value. Salt's defaults only when no
// source has it.
asio::awaitable<outcome> merge(call c) {
  arguments s("config.merge", c, {"value", "default", "omit_opts", "omit_master", "omit_pillar"});
  const json& value = s.need("value");
  auto& ctx = need_context(c);
  auto pillar = ctx.pillar();
  const json empty = json::object();
  const json& pillar_data = pillar ? *pillar : empty;
  std::vector<const json*> sources;
  if (!s.flag("omit_opts", false)) sources.push_back(&ctx.opts());
  if (!s.flag("omit_master", false)) sources.push_back(&master_opts(pillar_data));
  if (!s.flag("omit_pillar", false)) sources.push_back(&pillar_data);
  // Salt's None: not found yet (an option set to None counts as unset).
  json ret;
  for (const auto* src : sources) {
    const json* v = top_level(*src, value);
    if (v == nullptr) continue;
    if (ret.is_null()) {
      ret = *v;
      if (ret.is_string()) co_return outcome{std::move(ret)};
    } else if (ret.is_object() && v->is_object()) {
      json merged = *v;
      for (const auto& [k, x] : ret.items()) merged[k] = x;
      ret = std::move(merged);
    } else if (ret.is_array() && v->is_array()) {
      for (const auto& x : *v) ret.push_back(x);
    }
  }
  if (ret.is_null()) {
    if (const auto* d = top_level(config_defaults(), value)) co_return outcome{*d};
    const json* fallback = s.given("default");
    co_return outcome{fallback ? *fallback : json("")};
  }
  co_return outcome{std::move(ret)};
}

// Salt's config.dot_vals: the options named "<value>.<anything>", from the
// master's options and then the minion's (which win).
asio::awaitable<outcome> dot_vals(call c) {
  arguments s("config.dot_vals", c, {"value"});
  std::string prefix = s.text_of("value", s.need("value")) + ".";
  auto& ctx = need_context(c);
  auto pillar = ctx.pillar();
  json found = json::object();
  const json empty = json::object();
  for (const json* src : {&master_opts(pillar ? *pillar : empty), &ctx.opts()}) {
    for (const auto& [k, v] : src->items()) {
      if (k.starts_with(prefix)) found[k] = v;
    }
  }
  co_return outcome{std::move(found)};
}

asio::awaitable<outcome> items(call c) {
  arguments s("config.items", c, {});
  co_return outcome{need_context(c).opts()};
}

asio::awaitable<outcome> valid_fileproto(call c) {
  arguments s("config.valid_fileproto", c, {"uri"});
  co_return outcome{is_valid_fileproto(s.text_of("uri", s.need("uri")))};
}

// Salt's config.backup_mode: the argument when given, else the minion's
// backup_mode option ('' when unset).
asio::awaitable<outcome> backup_mode(call c) {
  arguments s("config.backup_mode", c, {"backup"});
  const json* backup = s.get("backup");
  if (backup != nullptr && base::python_truth(*backup)) co_return outcome{*backup};
  // Salt's minion always has the option (default ''); brine's may not.
  const json* opt = top_level(need_context(c).opts(), json("backup_mode"));
  co_return outcome{opt ? *opt : json("")};
}

asio::awaitable<outcome> manage_mode(call c) {
  arguments s("config.manage_mode", c, {"mode"});
  const json& mode = s.need("mode");
  co_return outcome{mode.is_null() ? json(nullptr) : json(normalize_mode_text(mode))};
}

}  // namespace
}  // namespace config_mod

const nlohmann::json& config_defaults() {
  static const nlohmann::json defaults = {
      {"mongo.db", "salt"},
      {"mongo.password", ""},
      {"mongo.port", 27017},
      {"mongo.user", ""},
      {"redis.db", "0"},
      {"redis.host", "salt"},
      {"redis.port", 6379},
      {"test.foo", "unconfigured"},
      {"ca.cert_base_path", "/etc/pki"},
      {"solr.cores", nlohmann::json::array()},
      {"solr.host", "localhost"},
      {"solr.port", "8983"},
      {"solr.baseurl", "/solr"},
      {"solr.type", "master"},
      {"solr.request_timeout", nullptr},
      {"solr.init_script", "/etc/rc.d/solr"},
      {"solr.dih.import_options",
       {{"clean", false}, {"optimize", true}, {"commit", true}, {"verbose", false}}},
      {"solr.backup_path", nullptr},
      {"solr.num_backups", 1},
      {"poudriere.config", "/usr/local/etc/poudriere.conf"},
      {"poudriere.config_dir", "/usr/local/etc/poudriere.d"},
      {"ldap.uri", ""},
      {"ldap.server", "localhost"},
      {"ldap.port", "389"},
      {"ldap.tls", false},
      {"ldap.no_verify", false},
      {"ldap.anonymous", true},
      {"ldap.scope", 2},
      {"ldap.attrs", nullptr},
      {"ldap.binddn", ""},
      {"ldap.bindpw", ""},
      {"hosts.file", "/etc/hosts"},
      {"aliases.file", "/etc/aliases"},
      {"virt", {{"tunnel", false}, {"images", "/srv/salt-images"}}},
      {"docker.exec_driver", "docker-exec"},
      {"docker.compare_container_networks",
       {{"static", {"Aliases", "Links", "IPAMConfig"}},
        {"automatic", {"IPAddress", "Gateway", "GlobalIPv6Address", "IPv6Gateway"}}}},
  };
  return defaults;
}

void register_config_module(registry& reg) {
  using namespace config_mod;
  reg.add("config.get", config_get,
          "config.get KEY [default=''] [delimiter=':'] [merge=recurse|overwrite] [omit_opts] "
          "[omit_grains] [omit_pillar] [omit_master]: the first of the minion's options, grains, "
          "pillar, the master's options (pillar key 'master') and Salt's module defaults that "
          "has KEY; with merge, all of them merged (options win, then grains, pillar, the "
          "master's; recurse merges maps at every level, overwrite replaces top-level keys) "
          "before KEY is looked up.\n\nCLI example: brine cmd '*' config.get master",
          instant);
  reg.add("config.option", option,
          "config.option VALUE [default=''] [omit_opts] [omit_grains] [omit_pillar] "
          "[omit_master] [omit_all] [wildcard]: the first of the minion's options, grains, "
          "pillar, the master's options (pillar key 'master') and Salt's module defaults that has "
          "the top-level key VALUE (no ':' walk, unlike config.get); omit_all skips all but the "
          "defaults. With wildcard, VALUE is a glob and the result a map of every matching key "
          "(the minion's options win, then grains, pillar, the master's; defaults fill in), "
          "default {}.\n\nCLI example: brine cmd '*' config.option redis.host",
          instant);
  reg.add("config.merge", merge,
          "config.merge VALUE [default=''] [omit_opts] [omit_master] [omit_pillar]: the top-level "
          "key VALUE from the minion's options, the master's options and the pillar combined "
          "(grains are not read): the first text found is the answer; maps are merged one level "
          "deep, the earlier source winning; lists are joined in that order. Salt's defaults "
          "only when none has it.\n\nCLI example: brine cmd '*' config.merge schedule",
          instant);
  reg.add("config.dot_vals", dot_vals,
          "config.dot_vals VALUE: a map of the options named VALUE.<name>, from the master's "
          "options (pillar key 'master') and the minion's, which win.\n\nCLI example: brine cmd "
          "'*' config.dot_vals host",
          instant);
  reg.add("config.items", items,
          "config.items: the minion's options, as config.get reads them.\n\nCLI example: brine "
          "cmd '*' config.items",
          instant);
  reg.add("config.valid_fileproto", valid_fileproto,
          "config.valid_fileproto URI: whether URI's scheme is one Salt fetches files from "
          "(salt, file, http, https, ftp, swift, s3).\n\nCLI example: brine cmd '*' "
          "config.valid_fileproto salt://path/to/file",
          instant);
  reg.add("config.backup_mode", backup_mode,
          "config.backup_mode [backup='']: BACKUP when given, else the minion's backup_mode "
          "option ('' when unset).\n\nCLI example: brine cmd '*' config.backup_mode",
          instant);
  reg.add("config.manage_mode", manage_mode,
          "config.manage_mode MODE: a file mode as Salt normalises it: text, '0o' made '0', "
          "quotes and leading zeros dropped, zero-padded to four ('0o644' is '0644').\n\nCLI "
          "example: brine cmd '*' config.manage_mode 644",
          instant);
}

}  // namespace brine::modules
