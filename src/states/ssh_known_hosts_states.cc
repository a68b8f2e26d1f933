// Salt's ssh_known_hosts states: ssh_known_hosts.present and .absent, through
// the ssh module's execution functions (ssh.check_known_host,
// ssh.set_known_host, ssh.get_known_host_entries, ssh.rm_known_host), which
// use ssh-keygen and ssh-keyscan as Salt's do.

#include <filesystem>
#include <optional>
#include <string>

#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace ssh_known_hosts_states {
namespace {

using plain_json = nlohmann::json;

std::optional<std::string> text_arg(const state_call& c, const std::string& key) {
  const json* v = c.arg(key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  std::string t = py_text(*v);
  if (t.empty()) return std::nullopt;
  return t;
}

// The known_hosts file as Salt names it: the user's .ssh/known_hosts, or the
// system's /etc/ssh/ssh_known_hosts; "" when a relative one has no user.
std::string config_of(const state_call& c, const std::optional<std::string>& user) {
  std::string config =
      text_arg(c, "config").value_or(user ? ".ssh/known_hosts" : "/etc/ssh/ssh_known_hosts");
  if (!user && !std::filesystem::path(config).is_absolute()) return "";
  return config;
}

asio::awaitable<json> present(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  if (c.test) ret["result"] = nullptr;
  std::optional<std::string> user = text_arg(c, "user");
  std::string config = config_of(c, user);
  if (config.empty()) {
    ret["result"] = false;
    ret["comment"] = "If not specifying a \"user\", specify an absolute \"config\".";
    co_return ret;
  }
  std::optional<std::string> key = text_arg(c, "key");
  std::optional<std::string> fingerprint = text_arg(c, "fingerprint");
  std::optional<std::string> enc = text_arg(c, "enc");
  std::optional<std::string> port = text_arg(c, "port");
  std::optional<std::string> hash_type = text_arg(c, "fingerprint_hash_type");
  plain_json kwargs = {{"hostname", name}, {"config", config}};
  if (user) kwargs["user"] = *user;
  if (port) kwargs["port"] = *port;
  if (hash_type) kwargs["fingerprint_hash_type"] = *hash_type;
  if (c.test) {
    if (key && fingerprint) {
      ret["result"] = false;
      ret["comment"] = "Specify either \"key\" or \"fingerprint\", not both.";
      co_return ret;
    }
    if (key && !enc) {
      ret["result"] = false;
      ret["comment"] = "Required argument \"enc\" if using \"key\" argument.";
      co_return ret;
    }
    if (key) kwargs["key"] = *key;
    if (fingerprint) kwargs["fingerprint"] = *fingerprint;
    std::string fun = "ssh.check_known_host";
    plain_json none = plain_json::array();
    json result = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
    if (result.is_object() && result.contains("error")) {
      ret["result"] = false;
      ret["comment"] = result["error"];
    } else if (result == "exists") {
      ret["result"] = true;
      ret["comment"] = "Host " + name + " is already in " + config;
    } else if (result == "add") {
      ret["comment"] = "Key for " + name + " is set to be added to " + config;
    } else {
      ret["comment"] = "Key for " + name + " is set to be updated in " + config;
    }
    co_return ret;
  }
  if (key) kwargs["key"] = *key;
  if (fingerprint) kwargs["fingerprint"] = *fingerprint;
  if (enc) kwargs["enc"] = *enc;
  kwargs["hash_known_hosts"] = c.flag("hash_known_hosts", true);
  if (auto timeout = text_arg(c, "timeout")) kwargs["timeout"] = *timeout;
  std::string fun = "ssh.set_known_host";
  plain_json none = plain_json::array();
  json result = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
  const std::string status = result.value("status", "");
  if (status == "exists") {
    ret["comment"] = name + " already exists in " + config;
  } else if (status == "error") {
    ret["result"] = false;
    ret["comment"] = result.value("error", "");
  } else {
    ret["changes"] = json{{"old", result["old"]}, {"new", result["new"]}};
    const json& first = result["new"][0];
    if (key) {
      ret["comment"] = name + "'s key saved to " + config + " (key: " +
                       first["key"].get<std::string>() + ")";
    } else if (fingerprint) {
      ret["comment"] = name + "'s key saved to " + config + " (fingerprint: " +
                       first["fingerprint"].get<std::string>() + ")";
    } else if (enc) {
      ret["comment"] = name + "'s " + *enc + " key saved to " + config + " (key: " +
                       first["key"].get<std::string>() + ")";
    } else {
      ret["comment"] = name + "'s key(s) saved to " + config;
    }
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  const std::string name = c.name();
  json ret = make_ret(name, true, "");
  std::optional<std::string> user = text_arg(c, "user");
  std::string config = config_of(c, user);
  if (config.empty()) {
    ret["result"] = false;
    ret["comment"] = "If not specifying a \"user\", specify an absolute \"config\".";
    co_return ret;
  }
  plain_json kwargs = {{"hostname", name}, {"config", config}};
  if (user) kwargs["user"] = *user;
  plain_json rm_kwargs = kwargs;
  std::string fun = "ssh.get_known_host_entries";
  plain_json none = plain_json::array();
  json known = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
  if (known.is_null() || (known.is_array() && known.empty())) {
    ret["comment"] = "Host is already absent";
    co_return ret;
  }
  if (c.test) {
    ret["result"] = nullptr;
    ret["comment"] = "Key for " + name + " is set to be removed from " + config;
    co_return ret;
  }
  std::string rm = "ssh.rm_known_host";
  plain_json rm_none = plain_json::array();
  json result = co_await c.run(std::move(rm), std::move(rm_none), std::move(rm_kwargs));
  if (result.value("status", "") == "error") {
    ret["result"] = false;
    ret["comment"] = result.value("error", "");
    co_return ret;
  }
  ret["changes"] = json{{"old", known}, {"new", nullptr}};
  ret["comment"] = result.value("comment", "");
  co_return ret;
}

}  // namespace
}  // namespace ssh_known_hosts_states

void register_ssh_known_hosts_states(registry& reg) {
  using namespace ssh_known_hosts_states;
  reg.add("ssh_known_hosts.present", present, {"name"},
          "ssh_known_hosts.present name=HOST [user] [key enc | fingerprint] [port] [config] "
          "[hash_known_hosts=True] [timeout=5]: the host's key is in the known_hosts file (the "
          "user's .ssh/known_hosts, or /etc/ssh/ssh_known_hosts); without key, ssh-keyscan "
          "fetches it");
  reg.add("ssh_known_hosts.absent", absent, {"name"},
          "ssh_known_hosts.absent name=HOST [user] [config]: the host is not in the known_hosts "
          "file (ssh-keygen -R)");
}

}  // namespace brine::states
