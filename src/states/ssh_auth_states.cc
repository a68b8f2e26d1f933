// Salt's ssh_auth states: ssh_auth.present and ssh_auth.absent, one key in a
// user's authorized_keys, through the ssh module's execution functions
// (ssh.check_key, ssh.set_auth_key, ssh.rm_auth_key).

#include <sstream>
#include <string>
#include <vector>

#include "modules/ssh_keys.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace ssh_auth_states {
namespace {

using plain_json = nlohmann::json;

struct parsed_key {
  std::string key, enc, comment;
  std::vector<std::string> options;
};

std::vector<std::string> split_ws(const std::string& s, std::size_t max_splits) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    if (i >= s.size()) break;
    if (out.size() == max_splits) {
      std::string rest = s.substr(i);
      rest.erase(rest.find_last_not_of(" \t\r\n") + 1);
      out.push_back(rest);
      break;
    }
    std::size_t start = i;
    while (i < s.size() && !std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

// Salt's reading of the state's name: "[options] ENC KEY [comment]" or
// "KEY [comment]"; `max_splits` is how far Salt splits (1 and 2 in present,
// no limit elsewhere).
parsed_key parse(const std::string& name, parsed_key defaults, bool limited) {
  parsed_key k = std::move(defaults);
  std::optional<modules::ssh::key_line> full = modules::ssh::split_key_line(name);
  if (!full) {
    std::vector<std::string> parts = split_ws(name, limited ? 1 : std::string::npos);
    k.key = parts.empty() ? "" : parts[0];
    if (parts.size() == 2) k.comment = parts[1];
    return k;
  }
  if (!full->options.empty()) {
    k.options.clear();
    std::stringstream s(full->options);
    std::string opt;
    while (std::getline(s, opt, ',')) k.options.push_back(opt);
  }
  std::vector<std::string> comps = split_ws(full->rest, limited ? 2 : std::string::npos);
  k.enc = comps[0];
  k.key = comps.size() > 1 ? comps[1] : "";
  if (comps.size() == 3) k.comment = comps[2];
  return k;
}

struct call_args {
  std::string user, config, hash_type;
  parsed_key key;
};

// The state's arguments; "" and a comment when one cannot be used.
std::string read(const state_call& c, call_args& a) {
  const json* user = c.arg("user");
  if (user == nullptr || user->is_null()) return "Missing parameter user";
  a.user = py_text(*user);
  const json* source = c.arg("source");
  if (source != nullptr && !source->is_null() && py_text(*source) != "") {
    return "source is not supported by brine yet (give the key as name)";
  }
  const json* config = c.arg("config");
  a.config = config == nullptr || config->is_null() ? ".ssh/authorized_keys" : py_text(*config);
  const json* hash = c.arg("fingerprint_hash_type");
  if (hash != nullptr && !hash->is_null()) a.hash_type = py_text(*hash);
  const json* enc = c.arg("enc");
  a.key.enc = enc == nullptr || enc->is_null() ? "ssh-rsa" : py_text(*enc);
  const json* comment = c.arg("comment");
  a.key.comment = comment == nullptr || comment->is_null() ? "" : py_text(*comment);
  if (const json* options = c.arg("options"); options != nullptr && options->is_array()) {
    for (const auto& o : *options) a.key.options.push_back(py_text(o));
  }
  return "";
}

plain_json common_kwargs(const call_args& a) {
  plain_json kw = {{"config", a.config}};
  if (!a.hash_type.empty()) kw["fingerprint_hash_type"] = a.hash_type;
  return kw;
}

asio::awaitable<std::string> check(const state_call& c, call_args a) {
  std::string fun = "ssh.check_key";
  plain_json args = plain_json::array({a.user, a.key.key, a.key.enc, a.key.comment, a.key.options});
  plain_json kwargs = common_kwargs(a);
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return r.is_string() ? r.get<std::string>() : r.dump();
}

asio::awaitable<json> present(state_call c) {
  json ret = make_ret(c.name(), true, "");
  call_args a;
  if (std::string bad = read(c, a); !bad.empty()) {
    ret["result"] = false;
    ret["comment"] = "ssh_auth.present: " + bad;
    co_return ret;
  }
  a.key = parse(c.name(), a.key, true);
  const std::string& key = a.key.key;
  if (c.test) {
    a.key = parse(key, a.key, false);  // Salt reads the name again
    std::string status = co_await check(c, a);
    ret["result"] = nullptr;
    if (status == "update") {
      ret["comment"] = "Key " + key + " for user " + a.user + " is set to be updated";
    } else if (status == "add") {
      ret["comment"] = "Key " + key + " for user " + a.user + " is set to be added";
    } else if (status == "exists") {
      ret["result"] = true;
      ret["comment"] = "The authorized host key " + key + " is already present for user " + a.user;
    }
    co_return ret;
  }
  std::string fun = "ssh.set_auth_key";
  plain_json args = plain_json::array({a.user, key});
  plain_json kwargs = common_kwargs(a);
  kwargs["enc"] = a.key.enc;
  kwargs["comment"] = a.key.comment;
  kwargs["options"] = a.key.options;
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  const std::string data = r.is_string() ? r.get<std::string>() : r.dump();
  if (data == "replace") {
    ret["changes"][key] = "Updated";
    ret["comment"] = "The authorized host key " + key + " for user " + a.user + " was updated";
  } else if (data == "no change") {
    ret["comment"] = "The authorized host key " + key + " is already present for user " + a.user;
  } else if (data == "new") {
    ret["changes"][key] = "New";
    ret["comment"] = "The authorized host key " + key + " for user " + a.user + " was added";
  } else if (data == "fail") {
    ret["result"] = false;
    ret["comment"] =
        "Failed to add the ssh key. Is the home directory available, and/or does the key file "
        "exist?";
  } else if (data == "invalid" || data == "Invalid public key") {
    ret["result"] = false;
    ret["comment"] = "Invalid public ssh key, most likely has spaces or invalid syntax";
  }
  co_return ret;
}

asio::awaitable<json> absent(state_call c) {
  json ret = make_ret(c.name(), true, "");
  call_args a;
  if (std::string bad = read(c, a); !bad.empty()) {
    ret["result"] = false;
    ret["comment"] = "ssh_auth.absent: " + bad;
    co_return ret;
  }
  a.key = parse(c.name(), a.key, false);
  const std::string& key = a.key.key;
  if (c.test) {
    std::string status = co_await check(c, a);
    ret["result"] = nullptr;
    if (status == "update" || status == "exists") {
      ret["comment"] = "Key " + key + " for user " + a.user + " is set for removal";
    } else {
      ret["comment"] = "Key is already absent";
      ret["result"] = true;
    }
    co_return ret;
  }
  std::string fun = "ssh.rm_auth_key";
  plain_json args = plain_json::array({a.user, key});
  plain_json kwargs = common_kwargs(a);
  json r = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  ret["comment"] = r.is_string() ? r.get<std::string>() : r.dump();
  if (ret["comment"] == "Key removed") ret["changes"][key] = "Removed";
  co_return ret;
}

}  // namespace
}  // namespace ssh_auth_states

void register_ssh_auth_states(registry& reg) {
  using namespace ssh_auth_states;
  reg.add("ssh_auth.present", present, {"name", "user"},
          "ssh_auth.present name=KEY user=USER [enc=ssh-rsa] [comment] [options=[]] "
          "[config=.ssh/authorized_keys] [fingerprint_hash_type]: the key is in the user's "
          "authorized keys (name may be a whole 'options enc key comment' line; source= is not "
          "in brine yet)");
  reg.add("ssh_auth.absent", absent, {"name", "user"},
          "ssh_auth.absent name=KEY user=USER [config=.ssh/authorized_keys]: the key is not in "
          "the user's authorized keys");
}

}  // namespace brine::states
