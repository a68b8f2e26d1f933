// The config module: Salt's config.* over the minion's options, grains,
// pillar, the master's options (pillar key 'master') and Salt's defaults.

#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {
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

}  // namespace

const json& config_defaults() {
  static const json defaults = {
      {"mongo.db", "salt"},
      {"mongo.password", ""},
      {"mongo.port", 27017},
      {"mongo.user", ""},
      {"redis.db", "0"},
      {"redis.host", "salt"},
      {"redis.port", 6379},
      {"test.foo", "unconfigured"},
      {"ca.cert_base_path", "/etc/pki"},
      {"solr.cores", json::array()},
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
  reg.add("config.get", config_get,
          "config.get KEY [default=''] [delimiter=':'] [merge=recurse|overwrite] [omit_opts] "
          "[omit_grains] [omit_pillar] [omit_master]: the first of the minion's options, grains, "
          "pillar, the master's options (pillar key 'master') and Salt's module defaults that "
          "has KEY; with merge, all of them merged (options win, then grains, pillar, the "
          "master's; recurse merges maps at every level, overwrite replaces top-level keys) "
          "before KEY is looked up.\n\nCLI example: brine cmd '*' config.get master",
          instant);
}

}  // namespace brine::modules
