// The ssh module: Salt's ssh.* for authorized_keys files (read and edited
// directly, as Salt does) and known_hosts files (through ssh-keygen -F, -R
// and -H, and ssh-keyscan for a host's keys, as Salt does).

#include "modules/ssh_keys.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include "modules/accounts.h"
#include "modules/arguments.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace ssh {

namespace ssh_mod {
namespace {

bool type_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '@' || ch == '.' ||
         ch == '-';
}

// Group 2 of Salt's regex matching from `at` to the end of the line.
bool key_at(const std::string& line, std::size_t at) {
  std::size_t i = at;
  if (line.compare(i, 3, "sk-") == 0 &&
      (line.compare(i + 3, 4, "ssh-") == 0 || line.compare(i + 3, 4, "ecds") == 0)) {
    i += 3;
  }
  if (line.compare(i, 4, "ssh-") != 0 && line.compare(i, 4, "ecds") != 0) return false;
  i += 4;
  std::size_t start = i;
  while (i < line.size() && type_char(line[i])) ++i;
  if (i == start || i >= line.size()) return false;
  if (!std::isspace(static_cast<unsigned char>(line[i]))) return false;
  return i + 1 < line.size();
}

}  // namespace
}  // namespace ssh_mod

std::optional<key_line> split_key_line(const std::string& line) {
  using namespace ssh_mod;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (std::isspace(static_cast<unsigned char>(line[i])) && key_at(line, i + 1)) {
      return key_line{line.substr(0, i), line.substr(i + 1)};
    }
    if (key_at(line, i)) return key_line{line.substr(0, i), line.substr(i)};
  }
  return std::nullopt;
}

}  // namespace ssh

namespace ssh_mod {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Python's base64.b64decode(validate=True): the base64 alphabet only, with
// correct padding; nullopt otherwise.
std::optional<std::string> b64decode(const std::string& text) {
  std::size_t pads = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '=') {
      ++pads;
      continue;
    }
    if (pads > 0) return std::nullopt;  // data after padding
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '+' && ch != '/') {
      return std::nullopt;
    }
  }
  if (pads > 2 || text.size() % 4 != 0) return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<std::size_t>(n) - pads);
  return out;
}

// Salt's _fingerprint: the hash of the decoded key as "xx:xx:..."; nullopt
// for a key that is not base64.
std::optional<std::string> fingerprint(const std::string& key, const std::string& hash_type) {
  std::optional<std::string> raw = b64decode(key);
  if (!raw) return std::nullopt;
  std::string type = hash_type.empty() ? "sha256" : hash_type;
  std::transform(type.begin(), type.end(), type.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  const EVP_MD* md = EVP_get_digestbyname(type.c_str());
  if (md == nullptr) {
    throw tool_failure("The fingerprint_hash_type " + type + " is not supported.");
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(raw->data(), raw->size(), digest, &len, md, nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    if (i) out += ':';
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

// Salt's _refine_enc: the key type as authorized_keys spells it.
std::string refine_enc(const std::string& enc) {
  if (enc == "r" || enc == "rsa" || enc == "ssh-rsa") return "ssh-rsa";
  if (enc == "d" || enc == "dsa" || enc == "dss" || enc == "ssh-dss") return "ssh-dss";
  if (enc == "e" || enc == "ecdsa") return "ecdsa-sha2-nistp256";
  if (enc == "ecdsa-sha2-nistp521" || enc == "ecdsa-sha2-nistp384" ||
      enc == "ecdsa-sha2-nistp256") {
    return enc;
  }
  if (enc == "ed25519" || enc == "ssh-ed25519") return "ssh-ed25519";
  for (const char* allowed :
       {"rsa-sha2-512", "rsa-sha2-256", "rsa-sha2-512-cert-v01@openssh.com",
        "rsa-sha2-256-cert-v01@openssh.com", "ssh-rsa-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com", "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
        "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com", "ssh-ed25519-cert-v01@openssh.com",
        "sk-ssh-ed25519@openssh.com", "sk-ssh-ed25519-cert-v01@openssh.com"}) {
    if (enc == allowed) return enc;
  }
  throw tool_failure("Incorrect encryption key type '" + enc + "'.");
}

std::string auth_line(const std::string& key, const std::string& enc, const std::string& comment,
                      const std::vector<std::string>& options) {
  std::string line;
  if (!options.empty()) {
    for (std::size_t i = 0; i < options.size(); ++i) line += (i ? "," : "") + options[i];
    line += " ";
  }
  return line + enc + " " + key + " " + comment + "\n";
}

std::vector<std::string> words(const std::string& s) { return split_words(s); }

// Salt's _expand_authorized_keys_path and _get_config_file.
std::string keys_file(const account& user, const std::string& config) {
  std::string path;
  bool escape = false;
  for (char ch : config) {
    if (escape) {
      escape = false;
      if (ch == '%') {
        path += '%';
      } else if (ch == 'u') {
        path += user.name;
      } else if (ch == 'h') {
        path += user.home;
      } else {
        throw tool_failure(std::string("AuthorizedKeysFile path: unknown token character \"%") +
                           ch + "\"");
      }
    } else if (ch == '%') {
      escape = true;
    } else {
      path += ch;
    }
  }
  if (escape) throw tool_failure("AuthorizedKeysFile path: Last character can't be escape character");
  return fs::path(path).is_absolute() ? path : (fs::path(user.home) / path).string();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

// Salt's _validate_keys: the keys of a file, by key, each {enc, comment,
// options, fingerprint}, in file order.
nlohmann::ordered_json file_keys(const std::string& path, const std::string& hash_type) {
  nlohmann::ordered_json ret = nlohmann::ordered_json::object();
  for (const auto& raw : read_lines(path)) {
    std::string line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    std::optional<ssh::key_line> found = ssh::split_key_line(line);
    if (!found) continue;
    std::vector<std::string> comps = words(found->rest);
    if (comps.size() < 2) continue;
    std::vector<std::string> options;
    if (!found->options.empty()) {
      std::stringstream s(found->options);
      std::string opt;
      while (std::getline(s, opt, ',')) options.push_back(opt);
    }
    std::string comment;
    for (std::size_t i = 2; i < comps.size(); ++i) comment += (i > 2 ? " " : "") + comps[i];
    std::optional<std::string> fp = fingerprint(comps[1], hash_type);
    if (!fp) continue;
    ret[comps[1]] = {{"enc", comps[0]}, {"comment", comment}, {"options", options},
                     {"fingerprint", *fp}};
  }
  return ret;
}

asio::awaitable<account> need_user(std::string name) {
  std::optional<account> user = co_await find_account(name);
  if (!user) throw tool_failure("User '" + name + "' does not exist");
  co_return *user;
}

std::string config_arg(const arguments& a, const std::string& fallback) {
  std::string v = a.text("config").value_or(fallback);
  return v.empty() ? fallback : v;
}

std::vector<std::string> options_arg(const arguments& a) {
  std::vector<std::string> out;
  const json* v = a.get("options");
  if (v == nullptr) return out;
  if (!v->is_array()) a.fail("options must be a list, got " + v->dump());
  for (const auto& o : *v) out.push_back(a.text_of("option", o));
  return out;
}

asio::awaitable<nlohmann::ordered_json> user_keys(std::string user, std::string config,
                                                  std::string hash_type) {
  std::optional<account> acct = co_await find_account(user);
  if (!acct) co_return nlohmann::ordered_json::object();
  std::string full = keys_file(*acct, config);
  std::error_code ec;
  if (!fs::is_regular_file(full, ec)) co_return nlohmann::ordered_json::object();
  co_return file_keys(full, hash_type);
}

asio::awaitable<outcome> auth_keys(call c) {
  arguments a("ssh.auth_keys", c, {"user", "config", "fingerprint_hash_type"});
  std::optional<std::string> user = a.text("user");
  if (!user) a.fail("needs the user: ssh.auth_keys USER (brine lists one user's keys at a time)");
  std::string config = config_arg(a, ".ssh/authorized_keys");
  std::string hash_type = a.text("fingerprint_hash_type").value_or("");
  nlohmann::ordered_json keys = co_await user_keys(*user, config, hash_type);
  outcome o;
  o.ret = json(keys);
  o.ordered_ret = std::make_shared<const nlohmann::ordered_json>(std::move(keys));
  co_return o;
}

// Salt's check_key: "add", "update" or "exists".
asio::awaitable<std::string> check(std::string user, std::string key, std::string enc,
                                   std::string comment, std::vector<std::string> options,
                                   std::string config, std::string hash_type) {
  enc = refine_enc(enc);
  nlohmann::ordered_json current = co_await user_keys(user, config, hash_type);
  if (!current.contains(key)) co_return "add";
  const auto& have = current[key];
  std::string now = auth_line(key, have["enc"], have["comment"],
                              have["options"].get<std::vector<std::string>>());
  co_return now == auth_line(key, enc, comment, options) ? "exists" : "update";
}

struct key_args {
  std::string user, key, enc, comment, config, hash_type;
  std::vector<std::string> options;
};

key_args read_key_args(const arguments& a) {
  key_args k;
  std::optional<std::string> user = a.text("user");
  std::optional<std::string> key = a.text("key");
  if (!user || !key) a.fail("needs the user and the key: " + a.fun() + " USER KEY");
  k.user = *user;
  k.key = *key;
  k.enc = a.text("enc").value_or("ssh-rsa");
  k.comment = a.scalar_text("comment", "");
  k.options = options_arg(a);
  k.config = config_arg(a, ".ssh/authorized_keys");
  k.hash_type = a.text("fingerprint_hash_type").value_or("");
  if (k.comment.find_first_of("\r\n") != std::string::npos) a.fail("comment must be one line");
  return k;
}

asio::awaitable<outcome> check_key(call c) {
  arguments a("ssh.check_key", c,
              {"user", "key", "enc", "comment", "options", "config", "cache_keys",
               "fingerprint_hash_type"});
  key_args k = read_key_args(a);
  std::string r = co_await check(k.user, k.key, k.enc, k.comment, k.options, k.config, k.hash_type);
  co_return outcome{r};
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& l : lines) out << l;
  out.flush();
  if (!out) throw tool_failure("Problem reading or writing to key file: " + path);
}

asio::awaitable<outcome> set_auth_key(call c) {
  arguments a("ssh.set_auth_key", c,
              {"user", "key", "enc", "comment", "options", "config", "cache_keys",
               "fingerprint_hash_type"});
  key_args k = read_key_args(a);
  if (words(k.key).size() > 1) co_return outcome{"invalid"};
  k.enc = refine_enc(k.enc);
  std::optional<account> user = co_await find_account(k.user);
  if (!user) co_return outcome{"fail"};
  if (!fingerprint(k.key, k.hash_type)) co_return outcome{"Invalid public key"};
  std::string status =
      co_await check(k.user, k.key, k.enc, k.comment, k.options, k.config, k.hash_type);
  if (status == "exists") co_return outcome{"no change"};
  const std::string full = keys_file(*user, k.config);
  const std::string line = auth_line(k.key, k.enc, k.comment, k.options);
  if (status == "update") {
    // Salt's _replace_auth_key: blank lines go, the key's line is replaced.
    std::vector<std::string> out;
    for (const auto& raw : read_lines(full)) {
      std::string l = trim(raw);
      if (l.empty()) continue;
      std::optional<ssh::key_line> found = l.front() == '#' ? std::nullopt : ssh::split_key_line(l);
      std::vector<std::string> comps = found ? words(found->rest) : std::vector<std::string>{};
      out.push_back(comps.size() >= 2 && comps[1] == k.key ? line : l + "\n");
    }
    write_lines(full, out);
    co_return outcome{"replace"};
  }
  std::error_code ec;
  if (full.starts_with(user->home) && !fs::is_directory(user->home, ec)) co_return outcome{"fail"};
  fs::path dir = fs::path(full).parent_path();
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw tool_failure("Could not create " + dir.string() + ": " + ec.message());
    if (::geteuid() == 0 && ::chown(dir.c_str(), user->uid, user->gid) != 0) {
      throw tool_failure("chown " + dir.string() + ": " + std::strerror(errno));
    }
    ::chmod(dir.c_str(), 0700);
  }
  const bool fresh = !fs::is_regular_file(full, ec);
  std::string before;
  if (!fresh) {
    std::ifstream in(full, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    before = s.str();
  }
  {
    std::ofstream out(full, std::ios::binary | std::ios::app);
    if (!before.empty() && before.back() != '\n') out << '\n';
    out << line;
    out.flush();
    if (!out) throw tool_failure("Could not write to key file: " + full);
  }
  if (fresh) {
    if (::geteuid() == 0 && ::chown(full.c_str(), user->uid, user->gid) != 0) {
      throw tool_failure("chown " + full + ": " + std::strerror(errno));
    }
    ::chmod(full.c_str(), 0600);
  }
  co_return outcome{"new"};
}

asio::awaitable<outcome> rm_auth_key(call c) {
  arguments a("ssh.rm_auth_key", c, {"user", "key", "config", "fingerprint_hash_type"});
  std::optional<std::string> user_name = a.text("user");
  std::optional<std::string> key = a.text("key");
  if (!user_name || !key) a.fail("needs the user and the key: ssh.rm_auth_key USER KEY");
  std::string config = config_arg(a, ".ssh/authorized_keys");
  std::string hash_type = a.text("fingerprint_hash_type").value_or("");
  nlohmann::ordered_json current = co_await user_keys(*user_name, config, hash_type);
  if (!current.contains(*key)) co_return outcome{"Key not present"};
  account user = co_await need_user(*user_name);
  const std::string full = keys_file(user, config);
  std::error_code ec;
  if (!fs::is_regular_file(full, ec)) co_return outcome{"Authorized keys file " + full + " not present"};
  std::vector<std::string> out;
  for (const auto& raw : read_lines(full)) {
    std::string l = trim(raw);
    if (l.empty()) continue;
    if (l.front() == '#') {
      out.push_back(l + "\n");
      continue;
    }
    std::optional<ssh::key_line> found = ssh::split_key_line(l);
    if (!found) continue;
    std::vector<std::string> comps = words(found->rest);
    if (comps.size() >= 2 && comps[1] == *key) continue;
    out.push_back(l + "\n");
  }
  write_lines(full, out);
  co_return outcome{"Key removed"};
}

// ---- known_hosts ----

const std::string k_default_port = "22";

// Salt's _get_known_hosts_file: the path, or {status: error, error}.
asio::awaitable<json> known_hosts_file(std::optional<std::string> config,
                                       std::optional<std::string> user) {
  std::string cfg = config.value_or(user ? ".ssh/known_hosts" : "/etc/ssh/ssh_known_hosts");
  if (fs::path(cfg).is_absolute()) co_return cfg;
  if (!user) co_return json{{"status", "error"}, {"error", "Cannot determine absolute path to file."}};
  std::optional<account> acct = co_await find_account(*user);
  if (!acct) co_return json{{"status", "error"}, {"error", "User " + *user + " does not exist"}};
  co_return (fs::path(acct->home) / cfg).string();
}

std::string ssh_hostname(const std::string& host, const std::string& port) {
  if (port.empty() || port == k_default_port) return host;
  return "[" + host + "]:" + port;
}

asio::awaitable<process_result> run_tool(std::chrono::seconds limit, std::vector<std::string> argv) {
  process_options opts;
  opts.argv = std::move(argv);
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.merge_stderr = true;  // Salt's cmd.run
  opts.timeout = child_limit(limit);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}

// Salt's _parse_openssh_output: "HOST ENC KEY" lines as {hostname, key, enc,
// fingerprint}.
nlohmann::ordered_json parse_openssh(const std::string& output, const std::string& hash_type) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::istringstream in(output);
  std::string raw;
  while (std::getline(in, raw)) {
    std::string line = trim(raw);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string> w = words(line);
    if (w.size() != 3) continue;
    std::optional<std::string> fp = fingerprint(w[2], hash_type);
    if (!fp) continue;
    out.push_back({{"hostname", w[0]}, {"key", w[2]}, {"enc", w[1]}, {"fingerprint", *fp}});
  }
  return out;
}

struct host_args {
  std::optional<std::string> user, config;
  std::string hostname, port, hash_type;
};

host_args read_host_args(const arguments& a) {
  host_args h;
  h.user = a.text("user");
  if (h.user && h.user->empty()) h.user.reset();
  h.config = a.text("config");
  if (h.config && h.config->empty()) h.config.reset();
  h.hostname = a.text("hostname").value_or("");
  h.port = a.get("port") != nullptr ? a.scalar_text("port", "") : "";
  h.hash_type = a.text("fingerprint_hash_type").value_or("");
  if (h.hostname.starts_with("-")) a.fail("hostname must not start with '-'");
  return h;
}

// Salt's get_known_host_entries: the file's entries for the host, null when
// none; an error dict when the file cannot be named.
asio::awaitable<nlohmann::ordered_json> host_entries(std::chrono::seconds limit, host_args h) {
  json full = co_await known_hosts_file(h.config, h.user);
  if (full.is_object()) co_return nlohmann::ordered_json(full);
  std::vector<std::string> argv = {"ssh-keygen", "-F", ssh_hostname(h.hostname, h.port), "-f",
                                   full.get<std::string>()};
  process_result r = co_await run_tool(limit, std::move(argv));
  nlohmann::ordered_json entries = parse_openssh(r.stdout_text, h.hash_type);
  if (entries.empty()) co_return nullptr;
  co_return entries;
}

outcome ordered_outcome(nlohmann::ordered_json v) {
  outcome o;
  o.ret = json(v);
  o.ordered_ret = std::make_shared<const nlohmann::ordered_json>(std::move(v));
  return o;
}

asio::awaitable<outcome> get_known_host_entries(call c) {
  arguments a("ssh.get_known_host_entries", c,
              {"user", "hostname", "config", "port", "fingerprint_hash_type"});
  host_args h = read_host_args(a);
  nlohmann::ordered_json entries = co_await host_entries(c.timeout, h);
  co_return ordered_outcome(std::move(entries));
}

asio::awaitable<outcome> check_known_host(call c) {
  arguments a("ssh.check_known_host", c,
              {"user", "hostname", "key", "fingerprint", "config", "port",
               "fingerprint_hash_type"});
  host_args h = read_host_args(a);
  if (h.hostname.empty()) {
    co_return outcome{json{{"status", "error"}, {"error", "hostname argument required"}}};
  }
  std::string key = a.text("key").value_or("");
  std::string fp = a.text("fingerprint").value_or("");
  nlohmann::ordered_json entries = co_await host_entries(c.timeout, h);
  if (entries.is_object()) co_return ordered_outcome(std::move(entries));
  if (entries.is_null()) co_return outcome{"add"};
  auto has = [&](const char* field, const std::string& want) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const auto& e) { return e[field] == want; });
  };
  if (!key.empty()) co_return outcome{has("key", key) ? "exists" : "update"};
  if (!fp.empty()) co_return outcome{has("fingerprint", fp) ? "exists" : "update"};
  co_return outcome{"exists"};
}

asio::awaitable<void> chown_to(std::optional<std::string> user, std::string path) {
  if (!user || ::geteuid() != 0) co_return;
  std::optional<account> acct = co_await find_account(*user);
  if (acct && ::chown(path.c_str(), acct->uid, acct->gid) != 0) {
    throw tool_failure("chown " + path + ": " + std::strerror(errno));
  }
}

asio::awaitable<json> hash_hosts(std::chrono::seconds limit, std::optional<std::string> user,
                                 std::string full) {
  std::error_code ec;
  if (!fs::is_regular_file(full, ec)) {
    co_return json{{"status", "error"}, {"error", "Known hosts file " + full + " does not exist"}};
  }
  struct stat st {};
  ::stat(full.c_str(), &st);
  std::vector<std::string> argv = {"ssh-keygen", "-H", "-f", full};
  process_result r = co_await run_tool(limit, std::move(argv));
  ::chmod(full.c_str(), st.st_mode & 07777);
  co_await chown_to(user, full);
  co_return json{{"status", "updated"}, {"comment", trim(r.stdout_text)}};
}

asio::awaitable<outcome> hash_known_hosts(call c) {
  arguments a("ssh.hash_known_hosts", c, {"user", "config"});
  host_args h = read_host_args(a);
  json full = co_await known_hosts_file(h.config, h.user);
  if (full.is_object()) co_return outcome{full};
  std::string path = full.get<std::string>();
  json r = co_await hash_hosts(c.timeout, h.user, path);
  co_return outcome{r};
}

asio::awaitable<outcome> rm_known_host(call c) {
  arguments a("ssh.rm_known_host", c, {"user", "hostname", "config", "port"});
  host_args h = read_host_args(a);
  if (h.hostname.empty()) {
    co_return outcome{json{{"status", "error"}, {"error", "hostname argument required"}}};
  }
  json full = co_await known_hosts_file(h.config, h.user);
  if (full.is_object()) co_return outcome{full};
  const std::string path = full.get<std::string>();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    co_return outcome{
        json{{"status", "error"}, {"error", "Known hosts file " + path + " does not exist"}}};
  }
  std::vector<std::string> argv = {"ssh-keygen", "-R", ssh_hostname(h.hostname, h.port), "-f",
                                   path};
  process_result r = co_await run_tool(c.timeout, std::move(argv));
  co_await chown_to(h.user, path);
  nlohmann::ordered_json ret = {{"status", "removed"}, {"comment", trim(r.stdout_text)}};
  co_return ordered_outcome(std::move(ret));
}

// Salt's recv_known_host_entries: ssh-keyscan's answer, tried up to 5 times.
asio::awaitable<nlohmann::ordered_json> scan(std::chrono::seconds limit, std::string host,
                                             std::string enc, std::string port, bool hashed,
                                             std::string timeout, std::string hash_type) {
  std::vector<std::string> argv = {"ssh-keyscan"};
  if (!port.empty()) argv.insert(argv.end(), {"-p", port});
  if (!enc.empty()) argv.insert(argv.end(), {"-t", enc});
  if (hashed) argv.push_back("-H");
  argv.insert(argv.end(), {"-T", timeout, host});
  process_options opts;
  opts.argv = argv;
  opts.timeout = child_limit(limit);
  for (int attempt = 0; attempt < 5; ++attempt) {
    process_options once = opts;
    process_result r = co_await run_process(std::move(once));
    if (!trim(r.stdout_text).empty()) co_return parse_openssh(r.stdout_text, hash_type);
  }
  co_return nullptr;
}

asio::awaitable<outcome> recv_known_host_entries(call c) {
  arguments a("ssh.recv_known_host_entries", c,
              {"hostname", "enc", "port", "hash_known_hosts", "timeout", "fingerprint_hash_type"});
  std::string host = a.text("hostname").value_or("");
  if (host.empty() || host.starts_with("-")) a.fail("needs a hostname");
  std::string enc = a.text("enc").value_or("");
  std::string port = a.scalar_text("port", "");
  std::string timeout = a.scalar_text("timeout", "5");
  std::string hash_type = a.text("fingerprint_hash_type").value_or("");
  nlohmann::ordered_json entries = co_await scan(c.timeout, host, enc, port,
                                                 a.flag("hash_known_hosts", true), timeout,
                                                 hash_type);
  if (entries.is_array() && entries.empty()) entries = nullptr;
  co_return ordered_outcome(std::move(entries));
}

asio::awaitable<outcome> set_known_host(call c) {
  arguments a("ssh.set_known_host", c,
              {"user", "hostname", "fingerprint", "key", "port", "enc", "config",
               "hash_known_hosts", "timeout", "fingerprint_hash_type"});
  host_args h = read_host_args(a);
  auto error = [](const std::string& text) {
    return ordered_outcome({{"status", "error"}, {"error", text}});
  };
  if (h.hostname.empty()) co_return error("hostname argument required");
  const bool hashed = a.flag("hash_known_hosts", true);
  if (!h.port.empty() && h.port != k_default_port && hashed) {
    co_return error("argument port can not be used in conjunction with argument hash_known_hosts");
  }
  std::string key = a.text("key").value_or("");
  std::string fp = a.text("fingerprint").value_or("");
  std::string enc = a.text("enc").value_or("");
  nlohmann::ordered_json stored = co_await host_entries(c.timeout, h);
  if (stored.is_object()) co_return ordered_outcome(std::move(stored));
  std::vector<std::string> stored_keys, stored_fps;
  if (stored.is_array()) {
    for (const auto& e : stored) {
      if (enc.empty() || e["enc"] == enc) stored_keys.push_back(e["key"]);
      stored_fps.push_back(e["fingerprint"]);
    }
  }
  bool update = false, check = false;
  auto in = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  if (stored.is_null()) {
    update = true;
  } else if (!fp.empty() && !in(stored_fps, fp)) {
    update = true;
  } else if (!key.empty() && !in(stored_keys, key)) {
    update = true;
  } else if (key.empty() && fp.empty()) {
    check = true;
  }
  if (!update && !check) co_return ordered_outcome({{"status", "exists"}, {"keys", stored_keys}});
  nlohmann::ordered_json remote;
  if (key.empty()) {
    std::string timeout = a.scalar_text("timeout", "5");
    remote = co_await scan(c.timeout, h.hostname, enc, h.port, hashed, timeout, h.hash_type);
    if (!remote.is_array() || remote.empty()) co_return error("Unable to receive remote host keys");
    std::vector<std::string> keys, fps;
    for (const auto& e : remote) {
      keys.push_back(e["key"]);
      fps.push_back(e["fingerprint"]);
    }
    if (!fp.empty() && !in(fps, fp)) {
      co_return error("Remote host public keys found but none of their fingerprints match the "
                      "one you have provided");
    }
    if (check && std::set<std::string>(keys.begin(), keys.end()) ==
                     std::set<std::string>(stored_keys.begin(), stored_keys.end())) {
      co_return ordered_outcome({{"status", "exists"}, {"keys", stored_keys}});
    }
  } else {
    remote = nlohmann::ordered_json::array(
        {{{"hostname", h.hostname}, {"enc", enc}, {"key", key}}});
  }
  json full_json = co_await known_hosts_file(h.config, h.user);
  if (full_json.is_object()) co_return outcome{full_json};
  const std::string full = full_json.get<std::string>();
  std::error_code ec;
  std::optional<mode_t> origmode;
  if (fs::is_regular_file(full, ec)) {
    struct stat st {};
    ::stat(full.c_str(), &st);
    origmode = st.st_mode & 07777;
    // The host's lines of this key type go (ssh-keygen -F numbers them).
    std::vector<std::string> argv = {"ssh-keygen", "-F", ssh_hostname(h.hostname, h.port), "-f",
                                     full};
    process_result r = co_await run_tool(c.timeout, std::move(argv));
    std::vector<std::string> out_lines;
    std::istringstream in_lines(r.stdout_text);
    std::string l;
    while (std::getline(in_lines, l)) out_lines.push_back(l);
    std::set<std::size_t> remove;
    for (std::size_t i = 0; i + 1 < out_lines.size(); i += 2) {
      std::vector<std::string> head = words(out_lines[i]);
      std::vector<std::string> body = words(out_lines[i + 1]);
      if (head.empty() || body.size() < 2) continue;
      if (!enc.empty() && body[body.size() - 2] != enc) continue;
      try {
        remove.insert(std::stoul(head.back()));
      } catch (const std::exception&) {
      }
    }
    if (!remove.empty()) {
      std::vector<std::string> lines;
      std::ifstream in(full, std::ios::binary);
      std::string line;
      std::size_t n = 0;
      while (std::getline(in, line)) {
        if (!remove.contains(++n)) lines.push_back(line + "\n");
      }
      in.close();
      std::ofstream out(full, std::ios::binary | std::ios::trunc);
      for (const auto& kept : lines) out << kept;
      if (!out) throw tool_failure("Couldn't remove old entry(ies) from known hosts file: " + full);
    }
  }
  std::string text;
  for (const auto& e : remote) {
    std::string host = e["hostname"];
    if (hashed || h.port.empty() || h.port == k_default_port || host.find(':') != std::string::npos) {
      text += host + " " + e["enc"].get<std::string>() + " " + e["key"].get<std::string>() + "\n";
    } else {
      text += "[" + host + "]:" + h.port + " " + e["enc"].get<std::string>() + " " +
              e["key"].get<std::string>() + "\n";
    }
  }
  fs::path dir = fs::path(full).parent_path();
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (!ec && h.user) {
      std::string dir_path = dir.string();
      co_await chown_to(h.user, dir_path);
      ::chmod(dir.c_str(), 0700);
    }
  }
  {
    std::ofstream out(full, std::ios::binary | std::ios::app);
    out << text;
    out.flush();
    if (!out) throw tool_failure("Couldn't append to known hosts file: " + full);
  }
  co_await chown_to(h.user, full);
  ::chmod(full.c_str(), origmode ? *origmode : 0600);
  if (!key.empty() && hashed) co_await hash_hosts(c.timeout, h.user, full);
  nlohmann::ordered_json ret = {{"status", "updated"}, {"old", stored}, {"new", remote}};
  co_return ordered_outcome(std::move(ret));
}

}  // namespace
}  // namespace ssh_mod

void register_ssh_module(registry& reg) {
  using namespace ssh_mod;
  reg.add("ssh.auth_keys", failures_as_outcomes<auth_keys>,
          "ssh.auth_keys USER [config=.ssh/authorized_keys] [fingerprint_hash_type=sha256]: "
          "returns the user's authorized keys by key: {enc, comment, options, fingerprint}.\n"
          "CLI Example: brine cmd '*' ssh.auth_keys root");
  reg.add("ssh.check_key", failures_as_outcomes<check_key>,
          "ssh.check_key USER KEY ENC COMMENT OPTIONS [config]: returns 'add', 'update' or "
          "'exists' for the key in the user's authorized keys.\n"
          "CLI Example: brine cmd '*' ssh.check_key root AAAAB3Nza... ssh-rsa me@host '[]'");
  reg.add("ssh.set_auth_key", failures_as_outcomes<set_auth_key>,
          "ssh.set_auth_key USER KEY [enc=ssh-rsa] [comment=''] [options=[]] [config]: adds or "
          "replaces the key in the user's authorized keys; returns 'new', 'replace', 'no "
          "change', 'fail', 'invalid' or 'Invalid public key'.\n"
          "CLI Example: brine cmd '*' ssh.set_auth_key root AAAAB3Nza... enc=ssh-ed25519");
  reg.add("ssh.rm_auth_key", failures_as_outcomes<rm_auth_key>,
          "ssh.rm_auth_key USER KEY [config]: removes the key from the user's authorized keys; "
          "returns 'Key removed' or 'Key not present'.\n"
          "CLI Example: brine cmd '*' ssh.rm_auth_key root AAAAB3Nza...");
  reg.add("ssh.get_known_host_entries", failures_as_outcomes<get_known_host_entries>,
          "ssh.get_known_host_entries USER HOSTNAME [config] [port]: returns the known_hosts "
          "entries of the host (ssh-keygen -F) as {hostname, key, enc, fingerprint}, or None.\n"
          "CLI Example: brine cmd '*' ssh.get_known_host_entries root github.com");
  reg.add("ssh.check_known_host", failures_as_outcomes<check_known_host>,
          "ssh.check_known_host USER HOSTNAME [key] [fingerprint] [config] [port]: returns "
          "'add', 'update' or 'exists'.\n"
          "CLI Example: brine cmd '*' ssh.check_known_host root github.com key=AAAA...");
  reg.add("ssh.set_known_host", failures_as_outcomes<set_known_host>,
          "ssh.set_known_host USER HOSTNAME [fingerprint] [key] [port] [enc] [config] "
          "[hash_known_hosts=True] [timeout=5]: records the host's key (given, or fetched with "
          "ssh-keyscan); returns {status: exists|updated|error, ...}.\n"
          "CLI Example: brine cmd '*' ssh.set_known_host root github.com enc=ssh-ed25519 key=AAAA...");
  reg.add("ssh.rm_known_host", failures_as_outcomes<rm_known_host>,
          "ssh.rm_known_host USER HOSTNAME [config] [port]: removes the host's entries with "
          "ssh-keygen -R; returns {status: removed, comment} or an error.\n"
          "CLI Example: brine cmd '*' ssh.rm_known_host root github.com");
  reg.add("ssh.hash_known_hosts", failures_as_outcomes<hash_known_hosts>,
          "ssh.hash_known_hosts [user] [config]: hashes the host names of a known_hosts file "
          "with ssh-keygen -H.\n"
          "CLI Example: brine cmd '*' ssh.hash_known_hosts root");
  reg.add("ssh.recv_known_host_entries", failures_as_outcomes<recv_known_host_entries>,
          "ssh.recv_known_host_entries HOSTNAME [enc] [port] [hash_known_hosts=True] [timeout=5]: "
          "returns the host's keys as ssh-keyscan gets them, or None.\n"
          "CLI Example: brine cmd '*' ssh.recv_known_host_entries github.com");
}

}  // namespace brine::modules
