#include "base/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <stdlib.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/fs.h"
#include "base/schedule_option.h"

namespace brine::base {

// For gtest's messages (found by argument-dependent lookup, so not in the
// anonymous namespace).
void PrintTo(const master_address& m, std::ostream* os) { *os << m.text(); }


namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* k_master = "/etc/brine/master";
constexpr const char* k_minion = "/etc/brine/minion";
const std::string k_finger_half = "0f:1e:2d:3c:4b:5a:69:78:87:96:a5:b4:c3:d2:e1:f0";
const std::string k_finger = k_finger_half + ":" + k_finger_half;
const std::string k_other_finger = "ff" + k_finger.substr(2);
const std::string k_address =
    "a host name or IP address, optionally with :port (IPv6 as [address]:port)";
const std::string k_resolver =
    "IP:PORT of a DNS server, with PORT 1..65535 (IPv6 as [address]:port)";

std::string upper(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

template <class Parse>
std::string error_of(Parse parse) {
  try {
    parse();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string master_error(const std::string& yaml) {
  return error_of([&] { parse_master_config(yaml, k_master); });
}

std::string minion_error(const std::string& yaml) {
  return error_of([&] { parse_minion_config(yaml, k_minion); });
}

// Routes spdlog's default logger into a string for the life of the object.
class captured_log {
 public:
  captured_log() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out_);
    auto logger = std::make_shared<spdlog::logger>("test", sink);
    logger->set_pattern("%v");
    spdlog::set_default_logger(logger);
  }
  ~captured_log() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "brine-config-test-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~temp_dir() { fs::remove_all(path_); }
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = (path_ / name).string();
    std::ofstream(p) << content;
    return p;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(MasterConfig, Defaults) {
  master_config c = parse_master_config("", k_master);
  EXPECT_EQ(c.source, k_master);
  EXPECT_EQ(c.interface, "0.0.0.0");
  EXPECT_EQ(c.port, 4506);
  EXPECT_EQ(c.pki_dir, "/etc/brine/pki/master");
  EXPECT_EQ(c.cachedir, "/var/cache/brine/master");
  EXPECT_EQ(c.sock_dir, "/var/run/brine/master");
  EXPECT_FALSE(c.auto_accept);
  EXPECT_EQ(c.autosign_file, "");
  EXPECT_EQ(c.autoreject_file, "");
  EXPECT_EQ(c.max_frame_bytes, 16u * 1024 * 1024);
  EXPECT_EQ(c.log_file, "");
  EXPECT_EQ(c.log_level, spdlog::level::info);
  EXPECT_EQ(c.keep_jobs, 24u);
  EXPECT_EQ(c.keep_reports, 336u);
  EXPECT_EQ(c.worker_threads, 0u);
  EXPECT_EQ(c.max_concurrent_handshakes, 256u);
  EXPECT_EQ(c.handshake_timeout, 10u);
  EXPECT_TRUE(c.tcp_keepalive);
  EXPECT_EQ(c.tcp_keepalive_idle, 60u);
  EXPECT_EQ(c.tcp_keepalive_cnt, 3u);
  EXPECT_EQ(c.tcp_keepalive_intvl, 20u);
  EXPECT_EQ(c.publish_hold, 60u);
  EXPECT_EQ(c.metrics_port, 0u);
  EXPECT_EQ(c.metrics_interface, "127.0.0.1");
}

TEST(MinionConfig, Defaults) {
  minion_config c = parse_minion_config("", k_minion);
  EXPECT_EQ(c.source, k_minion);
  EXPECT_EQ(c.id, host_name());
  EXPECT_FALSE(c.id.empty());
  EXPECT_EQ(c.masters, (std::vector<master_address>{{"salt", 4506}}));
  EXPECT_EQ(c.master_port, 4506);
  EXPECT_EQ(c.master_type, master_mode::hot);
  EXPECT_FALSE(c.random_master);
  EXPECT_FALSE(c.master_failback);
  EXPECT_EQ(c.master_failback_interval, 0u);
  EXPECT_EQ(c.master_tries, -1);
  EXPECT_EQ(c.retry_dns, 30u);
  EXPECT_TRUE(c.master_fingers.empty());
  EXPECT_EQ(c.master_return_strategy, return_strategy::origin);
  EXPECT_FALSE(c.use_srv_records);
  EXPECT_EQ(c.srv_domain, "");
  EXPECT_EQ(c.srv_resolver, "");
  EXPECT_EQ(c.spool_max_bytes, 256u * 1024 * 1024);
  EXPECT_EQ(c.pki_dir, "/etc/brine/pki/minion");
  EXPECT_EQ(c.cachedir, "/var/cache/brine/minion");
  EXPECT_EQ(c.acceptance_wait_time, 10u);
  EXPECT_EQ(c.acceptance_wait_time_max, 0u);
  EXPECT_EQ(c.master_alive_interval, 30u);
  EXPECT_EQ(c.job_timeout, 3600u);
  EXPECT_EQ(c.http_request_timeout, 3600u);
  EXPECT_EQ(c.hash_type, "sha256");
  EXPECT_EQ(c.max_frame_bytes, 16u * 1024 * 1024);
  EXPECT_EQ(c.log_file, "");
  EXPECT_EQ(c.log_level, spdlog::level::info);
}

TEST(Config, CommentsOnlyOrEmptyDocumentMeansDefaults) {
  for (const char* yaml : {"# nothing here\n\n   # or here\n", "---\n", "~\n", "\n\n"}) {
    SCOPED_TRACE(yaml);
    EXPECT_EQ(parse_master_config(yaml, k_master).port, 4506);
    EXPECT_EQ(parse_minion_config(yaml, k_minion).masters.at(0).host, "salt");
  }
}

TEST(MasterConfig, EveryOption) {
  master_config c = parse_master_config(R"(
interface: "::1"
port: 14506
pki_dir: /srv/pki
cachedir: /srv/cache
sock_dir: /srv/sock
auto_accept: true
autosign_file: /srv/autosign.conf
autoreject_file: /srv/autoreject.conf
max_frame_bytes: 1048576
log_file: /var/log/brine/master
log_level: debug
keep_jobs: 48
keep_reports: 72
worker_threads: 3
max_concurrent_handshakes: 64
handshake_timeout: 5
tcp_keepalive: false
tcp_keepalive_idle: 300
tcp_keepalive_cnt: 9
tcp_keepalive_intvl: 75
publish_hold: 300
metrics_port: 9100
metrics_interface: "::"
)",
                                        k_master);
  EXPECT_EQ(c.interface, "::1");
  EXPECT_EQ(c.port, 14506);
  EXPECT_EQ(c.pki_dir, "/srv/pki");
  EXPECT_EQ(c.cachedir, "/srv/cache");
  EXPECT_EQ(c.sock_dir, "/srv/sock");
  EXPECT_TRUE(c.auto_accept);
  EXPECT_EQ(c.autosign_file, "/srv/autosign.conf");
  EXPECT_EQ(c.autoreject_file, "/srv/autoreject.conf");
  EXPECT_EQ(c.max_frame_bytes, 1048576u);
  EXPECT_EQ(c.log_file, "/var/log/brine/master");
  EXPECT_EQ(c.log_level, spdlog::level::debug);
  EXPECT_EQ(c.keep_jobs, 48u);
  EXPECT_EQ(c.keep_reports, 72u);
  EXPECT_EQ(c.worker_threads, 3u);
  EXPECT_EQ(c.max_concurrent_handshakes, 64u);
  EXPECT_EQ(c.handshake_timeout, 5u);
  EXPECT_FALSE(c.tcp_keepalive);
  EXPECT_EQ(c.tcp_keepalive_idle, 300u);
  EXPECT_EQ(c.tcp_keepalive_cnt, 9u);
  EXPECT_EQ(c.tcp_keepalive_intvl, 75u);
  EXPECT_EQ(c.publish_hold, 300u);
  EXPECT_EQ(c.metrics_port, 9100u);
  EXPECT_EQ(c.metrics_interface, "::");
}

TEST(MinionConfig, EveryOption) {
  minion_config c = parse_minion_config(R"(
id: web-01.example.com
master: 10.1.2.3
master_port: 14506
master_type: failover
random_master: true
master_failback: true
master_failback_interval: 45
master_tries: 3
retry_dns: 0
master_finger: )" + k_finger + R"(
master_return_strategy: any
spool_max_bytes: 65536
pki_dir: /srv/pki
cachedir: /srv/cache
acceptance_wait_time: 5
acceptance_wait_time_max: 60
master_alive_interval: 7
job_timeout: 120
http_request_timeout: 30
hash_type: sha512
max_frame_bytes: 1024
log_file: /var/log/brine/minion
log_level: warning
)",
                                        k_minion);
  EXPECT_EQ(c.id, "web-01.example.com");
  EXPECT_EQ(c.masters, (std::vector<master_address>{{"10.1.2.3", 14506}}));
  EXPECT_EQ(c.master_port, 14506);
  EXPECT_EQ(c.master_type, master_mode::failover);
  EXPECT_TRUE(c.random_master);
  EXPECT_TRUE(c.master_failback);
  EXPECT_EQ(c.master_failback_interval, 45u);
  EXPECT_EQ(c.master_tries, 3);
  EXPECT_EQ(c.retry_dns, 0u);
  EXPECT_EQ(c.master_fingers, std::vector<std::string>{k_finger});
  EXPECT_EQ(c.master_return_strategy, return_strategy::any);
  EXPECT_EQ(c.spool_max_bytes, 65536u);
  EXPECT_EQ(c.pki_dir, "/srv/pki");
  EXPECT_EQ(c.cachedir, "/srv/cache");
  EXPECT_EQ(c.acceptance_wait_time, 5u);
  EXPECT_EQ(c.acceptance_wait_time_max, 60u);
  EXPECT_EQ(c.master_alive_interval, 7u);
  EXPECT_EQ(c.job_timeout, 120u);
  EXPECT_EQ(c.http_request_timeout, 30u);
  EXPECT_EQ(c.hash_type, "sha512");
  EXPECT_EQ(c.max_frame_bytes, 1024u);
  EXPECT_EQ(c.log_file, "/var/log/brine/minion");
  EXPECT_EQ(c.log_level, spdlog::level::warn);
}

TEST(MinionConfig, MasterAcceptsHostNamesAndAddresses) {
  for (const char* m : {"salt", "salt-master.example.com", "my_master", "192.168.0.1", "fe80::1"}) {
    EXPECT_EQ(parse_minion_config(std::string("master: \"") + m + "\"", k_minion).masters,
              (std::vector<master_address>{{m, 4506}}));
  }
}

TEST(MasterConfig, BooleansTakeYamlSpellings) {
  for (const char* yes : {"true", "True", "yes", "YES", "on", "On"}) {
    EXPECT_TRUE(parse_master_config(std::string("auto_accept: ") + yes, k_master).auto_accept)
        << yes;
  }
  for (const char* no : {"false", "no", "off", "Off"}) {
    EXPECT_FALSE(parse_master_config(std::string("auto_accept: ") + no, k_master).auto_accept)
        << no;
  }
}

TEST(MasterConfig, SaltLogLevelNames) {
  auto level = [](const std::string& name) {
    return parse_master_config("log_level: " + name, k_master).log_level;
  };
  EXPECT_EQ(level("garbage"), spdlog::level::trace);
  EXPECT_EQ(level("warning"), spdlog::level::warn);
  EXPECT_EQ(level("error"), spdlog::level::err);
  EXPECT_EQ(level("quiet"), spdlog::level::off);
  EXPECT_EQ(level("DEBUG"), spdlog::level::debug);
}

TEST(MasterConfig, IntegerBounds) {
  EXPECT_EQ(parse_master_config("port: 1", k_master).port, 1);
  EXPECT_EQ(parse_master_config("port: 65535", k_master).port, 65535);
  EXPECT_EQ(parse_master_config("port: \"4507\"", k_master).port, 4507);
  EXPECT_EQ(parse_master_config("max_frame_bytes: 1073741824", k_master).max_frame_bytes,
            1073741824u);
  EXPECT_EQ(parse_master_config("worker_threads: 64", k_master).worker_threads, 64u);
  EXPECT_EQ(parse_master_config("keep_jobs: 4294967295", k_master).keep_jobs, 4294967295u);
  EXPECT_EQ(parse_master_config("publish_hold: 1", k_master).publish_hold, 1u);
  EXPECT_EQ(parse_master_config("publish_hold: 86400", k_master).publish_hold, 86400u);
  EXPECT_EQ(parse_master_config("", k_master).store_failover_wait, 15u);
  EXPECT_EQ(parse_master_config("store_failover_wait: 0", k_master).store_failover_wait, 0u);
}

TEST(MasterConfig, GitfsOptionsAsSaltWritesThem) {
  auto c = parse_master_config(R"(
fileserver_backend: [roots, git]
gitfs_base: main
gitfs_root: salt
gitfs_remotes:
  - https://git.example/states.git
  - https://git.example/formulas.git:
    - root: nginx-formula/nginx
    - mountpoint: salt://nginx
  - /srv/repo: {base: trunk}
)",
                               k_master);
  EXPECT_EQ(c.fileserver_backend, (std::vector<std::string>{"roots", "gitfs"}));
  EXPECT_EQ(c.gitfs_base, "main");
  EXPECT_EQ(c.gitfs_root, "salt");
  ASSERT_EQ(c.gitfs_remotes.size(), 3u);
  EXPECT_EQ(c.gitfs_remotes[0].url, "https://git.example/states.git");
  EXPECT_FALSE(c.gitfs_remotes[0].root);
  EXPECT_EQ(c.gitfs_remotes[1].root, "nginx-formula/nginx");
  EXPECT_EQ(c.gitfs_remotes[1].mountpoint, "salt://nginx");
  EXPECT_EQ(c.gitfs_remotes[2].url, "/srv/repo");
  EXPECT_EQ(c.gitfs_remotes[2].base, "trunk");
  EXPECT_EQ(parse_master_config("", k_master).fileserver_backend,
            std::vector<std::string>{"roots"});

  auto bad = [](const std::string& text) {
    return error_of([&] { parse_master_config(text, k_master); });
  };
  EXPECT_NE(bad("fileserver_backend: [roots, hgfs]")
                .find("fileserver_backend item 2 must be roots or gitfs, got hgfs"),
            std::string::npos)
      << bad("fileserver_backend: [roots, hgfs]");
  std::string e = bad("gitfs_remotes:\n  - https://x/y.git:\n    - ssl_verify: false\n");
  EXPECT_NE(
      e.find("unknown per-remote option ssl_verify; brine's gitfs takes root, mountpoint, base, "
             "user, password, insecure_auth, pubkey, privkey and passphrase"),
      std::string::npos)
      << e;
  e = bad("gitfs_remotes: https://x/y.git");
  EXPECT_NE(e.find("gitfs_remotes must be a list of git URLs or paths"), std::string::npos) << e;
}

TEST(MasterConfig, GitfsCredentialsGlobalAndPerRemote) {
  auto c = parse_master_config(R"(
gitfs_user: deploy
gitfs_password: "s3cr#t"
gitfs_insecure_auth: yes
gitfs_pubkey: keys/gitfs.pub
gitfs_privkey: /etc/brine/keys/gitfs
gitfs_passphrase: open sesame
gitfs_remotes:
  - https://git.example/private.git:
    - user: alice
    - password: hunter2
    - insecure_auth: false
  - git@git.example:formulas.git:
    - pubkey: remote.pub
    - privkey: remote
    - passphrase: ""
  - https://git.example/public.git
)",
                               k_master);
  EXPECT_EQ(c.gitfs_user, "deploy");
  EXPECT_EQ(c.gitfs_password, "s3cr#t");
  EXPECT_TRUE(c.gitfs_insecure_auth);
  EXPECT_EQ(c.gitfs_pubkey, "/etc/brine/keys/gitfs.pub");  // relative to the config's directory
  EXPECT_EQ(c.gitfs_privkey, "/etc/brine/keys/gitfs");
  EXPECT_EQ(c.gitfs_passphrase, "open sesame");
  ASSERT_EQ(c.gitfs_remotes.size(), 3u);
  EXPECT_EQ(c.gitfs_remotes[0].user, "alice");
  EXPECT_EQ(c.gitfs_remotes[0].password, "hunter2");
  EXPECT_EQ(c.gitfs_remotes[0].insecure_auth, false);
  EXPECT_EQ(c.gitfs_remotes[1].url, "git@git.example:formulas.git");
  EXPECT_EQ(c.gitfs_remotes[1].pubkey, "/etc/brine/remote.pub");
  EXPECT_EQ(c.gitfs_remotes[1].privkey, "/etc/brine/remote");
  EXPECT_EQ(c.gitfs_remotes[1].passphrase, "");
  EXPECT_FALSE(c.gitfs_remotes[1].user);
  EXPECT_FALSE(c.gitfs_remotes[2].password);
  EXPECT_FALSE(c.gitfs_remotes[2].insecure_auth);

  auto defaults = parse_master_config("", k_master);
  EXPECT_EQ(defaults.gitfs_password, "");
  EXPECT_FALSE(defaults.gitfs_insecure_auth);
}

// Salt hands a relative path to libgit2, which reads it against the daemon's
// working directory; brine anchors it at the config file's directory, as
// every other path option.
TEST(MasterConfig, RelativeGitfsPathsAreResolvedAgainstTheConfigDirectory) {
  auto c = parse_master_config(R"(
gitfs_remotes:
  - repos/states
  - ./formulas/:
    - root: salt
  - ../shared/pillar.git
  - /srv/abs
  - file:///srv/url
  - git@github.com:org/repo.git
  - github.com:org/repo.git
  - https://git.example/x.git
)",
                               k_master);
  std::vector<std::string> urls;
  for (const auto& r : c.gitfs_remotes) urls.push_back(r.url);
  EXPECT_EQ(urls, (std::vector<std::string>{
                      "/etc/brine/repos/states", "/etc/brine/formulas", "/etc/shared/pillar.git",
                      "/srv/abs", "file:///srv/url", "git@github.com:org/repo.git",
                      "github.com:org/repo.git", "https://git.example/x.git"}));
  EXPECT_EQ(c.gitfs_remotes[1].root, "salt");
}

TEST(MasterConfig, GitfsCredentialsOfTheWrongTypeAreNamedNotShown) {
  auto bad = [](const std::string& text) {
    return error_of([&] { parse_master_config(text, k_master); });
  };
  std::string e = bad("gitfs_insecure_auth: maybe");
  EXPECT_NE(e.find("line 1: gitfs_insecure_auth must be true or false"), std::string::npos) << e;
  e = bad("gitfs_password: [hunter2, again]");
  EXPECT_NE(e.find("gitfs_password must be a string, got a list of 2"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  e = bad("gitfs_passphrase: {word: hunter2}");
  EXPECT_NE(e.find("gitfs_passphrase must be a string, got a mapping"), std::string::npos) << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  e = bad("gitfs_pubkey: [a, b]");
  EXPECT_NE(e.find("gitfs_pubkey must be a file system path"), std::string::npos) << e;
  e = bad("gitfs_user: {a: b}");
  EXPECT_NE(e.find("gitfs_user must be a word"), std::string::npos) << e;
  e = bad("gitfs_remotes:\n  - https://x/y.git:\n    - insecure_auth: sometimes\n");
  EXPECT_NE(e.find("gitfs_remotes item 1 (https://x/y.git) option insecure_auth must be true or "
                   "false"),
            std::string::npos)
      << e;
  e = bad("gitfs_remotes:\n  - https://x/y.git:\n    - password: [hunter2]\n");
  EXPECT_NE(e.find("(https://x/y.git) option password must be a string, got a list of 1"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("hunter2"), std::string::npos) << e;
  e = bad("gitfs_remotes:\n  - https://x/y.git:\n    - privkey: \"\"\n");
  EXPECT_NE(e.find("option privkey must be a file system path"), std::string::npos) << e;
}

TEST(MinionConfig, IntegerBounds) {
  auto minion = [](const std::string& yaml) { return parse_minion_config(yaml, k_minion); };
  EXPECT_EQ(minion("master_tries: -1").master_tries, -1);
  EXPECT_EQ(minion("master_tries: 1").master_tries, 1);
  EXPECT_EQ(minion("master_tries: \"5\"").master_tries, 5);
  EXPECT_EQ(minion("master_tries: 9223372036854775807").master_tries,
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(minion("master_failback_interval: 0").master_failback_interval, 0u);
  EXPECT_EQ(minion("master_failback_interval: 4294967295").master_failback_interval, 4294967295u);
  EXPECT_EQ(minion("retry_dns: 0").retry_dns, 0u);
  EXPECT_EQ(minion("retry_dns: 4294967295").retry_dns, 4294967295u);
  EXPECT_EQ(minion("spool_max_bytes: 65536").spool_max_bytes, 65536u);
  EXPECT_EQ(minion("spool_max_bytes: 1099511627776").spool_max_bytes, 1099511627776u);
}

struct bad_value {
  std::string yaml;
  std::string message;  // after "config <source>: "
};

TEST(MasterConfig, InvalidValuesNameFileLineOptionExpectedAndFound) {
  const std::vector<bad_value> cases = {
      {"port: 70000", "line 1: port must be an integer 1..65535, got 70000"},
      {"metrics_port: 65536", "line 1: metrics_port must be an integer 0..65535, got 65536"},
      {"metrics_port: -1", "line 1: metrics_port must be an integer 0..65535, got -1"},
      {"metrics_interface: localhost",
       "line 1: metrics_interface must be an IPv4 or IPv6 address (not a host name), got "
       "localhost"},
      {"\n# comment\nport: 0", "line 3: port must be an integer 1..65535, got 0"},
      {"port: 12abc", "line 1: port must be an integer 1..65535, got 12abc"},
      {"port: -1", "line 1: port must be an integer 1..65535, got -1"},
      {"port: 4506.0", "line 1: port must be an integer 1..65535, got 4506.0"},
      {"port: 0x10", "line 1: port must be an integer 1..65535, got 0x10"},
      {"port: 99999999999999999999999",
       "line 1: port must be an integer 1..65535, got 99999999999999999999999"},
      {"port:", "line 1: port must be an integer 1..65535, got an empty value"},
      {"port: [1, 2]", "line 1: port must be an integer 1..65535, got a list of 2"},
      {"port: {a: 1}", "line 1: port must be an integer 1..65535, got a mapping"},
      {"interface: eth0",
       "line 1: interface must be an IPv4 or IPv6 address (not a host name), got eth0"},
      {"interface: 10.0.0.256",
       "line 1: interface must be an IPv4 or IPv6 address (not a host name), got 10.0.0.256"},
      {"auto_accept: maybe",
       "line 1: auto_accept must be true or false (or yes/no, on/off), got maybe"},
      {"auto_accept: 1", "line 1: auto_accept must be true or false (or yes/no, on/off), got 1"},
      {"max_frame_bytes: 1023",
       "line 1: max_frame_bytes must be an integer 1024..1073741824 (bytes), got 1023"},
      {"max_frame_bytes: 1073741825",
       "line 1: max_frame_bytes must be an integer 1024..1073741824 (bytes), got 1073741825"},
      {"keep_jobs: 0", "line 1: keep_jobs must be an integer >= 1 (hours), got 0"},
      {"keep_jobs: 4294967296",
       "line 1: keep_jobs must be an integer >= 1 (hours), got 4294967296"},
      {"keep_reports: 0", "line 1: keep_reports must be an integer >= 1 (hours), got 0"},
      {"keep_reports: 14d", "line 1: keep_reports must be an integer >= 1 (hours), got 14d"},
      {"worker_threads: 65", "line 1: worker_threads must be an integer 0..64, got 65"},
      {"max_concurrent_handshakes: 0",
       "line 1: max_concurrent_handshakes must be an integer >= 1, got 0"},
      {"handshake_timeout: 0",
       "line 1: handshake_timeout must be an integer >= 1 (seconds), got 0"},
      {"tcp_keepalive_cnt: -1", "line 1: tcp_keepalive_cnt must be an integer 1..127, got -1"},
      {"tcp_keepalive_idle: 0",
       "line 1: tcp_keepalive_idle must be an integer 1..86400 (seconds), got 0"},
      {"tcp_keepalive_intvl: 3601",
       "line 1: tcp_keepalive_intvl must be an integer 1..3600 (seconds), got 3601"},
      {"publish_hold: 0", "line 1: publish_hold must be an integer 1..86400 (seconds), got 0"},
      {"publish_hold: 86401",
       "line 1: publish_hold must be an integer 1..86400 (seconds), got 86401"},
      {"publish_hold: 1m", "line 1: publish_hold must be an integer 1..86400 (seconds), got 1m"},
      {"store_failover_wait: 1h",
       "line 1: store_failover_wait must be an integer 0..3600 (seconds), got 1h"},
      {"log_level: loud",
       "line 1: log_level must be one of garbage, trace, debug, info, warning, error, critical, "
       "quiet, got loud"},
      {"pki_dir: ''", "line 1: pki_dir must be a file system path, got \"\""},
      {"cachedir:", "line 1: cachedir must be a file system path, got an empty value"},
      {"sock_dir: [a]", "line 1: sock_dir must be a file system path, got a list of 1"},
      {"autosign_file: \"a\\0b\"",
       "line 1: autosign_file must be a file system path without control characters, got "
       "\"a\\x00b\""},
      {"log_file: udp://localhost:514",
       "line 1: log_file must be a file path (syslog URLs are not supported), got "
       "udp://localhost:514"},
      {"store: mysql://u@h/db",
       "line 1: store must be sqlite or postgresql://USER@HOST:PORT/DATABASE, got a mysql:// URL"},
      {"store: sqlite3",
       "line 1: store must be sqlite or postgresql://USER@HOST:PORT/DATABASE, got something "
       "else"},
      {"store:",
       "line 1: store must be sqlite or postgresql://USER@HOST:PORT/DATABASE, got an empty "
       "value"},
      // The password is not repeated back.
      {"store: postgresql://brine:s3cret@db:5432/brine",
       "line 1: store must not hold a password (it would be readable in the config and shown in "
       "messages); put it in the file that store_password_file names, mode 0600"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(master_error(c.yaml), std::string("config ") + k_master + ": " + c.message) << c.yaml;
  }
}

TEST(MasterConfig, Store) {
  EXPECT_EQ(master_config{}.store, "sqlite");
  auto c = parse_master_config(
      "store: postgresql://brine@127.0.0.1:5432/brine?sslmode=disable\n"
      "store_password_file: /etc/brine/store.pw\n",
      "/etc/brine/master");
  EXPECT_EQ(c.store, "postgresql://brine@127.0.0.1:5432/brine?sslmode=disable");
  EXPECT_EQ(c.store_password_file, "/etc/brine/store.pw");
  // A ':' after the '@' is the port, not a password.
  EXPECT_EQ(parse_master_config("store: postgres://brine@db:5432/x", "m").store,
            "postgres://brine@db:5432/x");
}

TEST(MinionConfig, InvalidValuesNameFileLineOptionExpectedAndFound) {
  captured_log log;  // master_shuffle cases also warn that it is deprecated
  const std::vector<bad_value> cases = {
      {"id: web1\nmaster_port: 70000",
       "line 2: master_port must be an integer 1..65535, got 70000"},
      {"id: ''", "line 1: id must be a non-empty name, got \"\""},
      {"id:", "line 1: id must be a name, got an empty value"},
      {"id: web/1", "line 1: id must be a name without '/', got web/1"},
      {"id: web 1",
       "line 1: id must be a name without whitespace or control characters, got \"web 1\""},
      {"id: \"a\\tb\"",
       "line 1: id must be a name without whitespace or control characters, got \"a\\tb\""},
      {"id: '..'", "line 1: id must be a name other than . or .., got .."},
      {"id: " + std::string(256, 'x'),
       "line 1: id must be at most 255 characters, got 256 characters"},
      {"master: salt:4506:1", "line 1: master must be " + k_address + ", got salt:4506:1"},
      {"master: 999.1.1.1", "line 1: master must be " + k_address + ", got 999.1.1.1"},
      {"master: -salt", "line 1: master must be " + k_address + ", got -salt"},
      {"master: '-salt:4506'", "line 1: master must be " + k_address + ", got -salt:4506"},
      {"master: ''", "line 1: master must be " + k_address + ", got \"\""},
      {"master: '[::1'", "line 1: master must be " + k_address + ", got [::1"},
      {"master: '[salt]:4506'", "line 1: master must be " + k_address + ", got [salt]:4506"},
      {"master: '[10.0.0.1]:4506'",
       "line 1: master must be " + k_address + ", got [10.0.0.1]:4506"},
      {"master: '[::1]4506'", "line 1: master must be " + k_address + ", got [::1]4506"},
      {"master: 'fe80::1%eth0'", "line 1: master must be " + k_address + ", got fe80::1%eth0"},
      {"master:",
       "line 1: master must be " + k_address + ", or a list of them, got an empty value"},
      {"master: {a: 1}",
       "line 1: master must be " + k_address + ", or a list of them, got a mapping"},
      {"master: []", "line 1: master must be a non-empty list of masters, got a list of 0"},
      {"master: [a, [b]]", "line 1: master item 2 must be " + k_address + ", got a list of 1"},
      {"master:\n  - a\n  -\n",
       "line 1: master item 2 must be " + k_address + ", got an empty value"},
      {"master: [a, {b: 1}]", "line 1: master item 2 must be " + k_address + ", got a mapping"},
      {"master: [a, b, 'c d']", "line 1: master item 3 must be " + k_address + ", got \"c d\""},
      {"master: salt:0",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got salt:0"},
      {"master: salt:65536",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got salt:65536"},
      {"master: 'salt:'",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got salt:"},
      {"master: salt:45x6",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got salt:45x6"},
      {"master: 'salt:+4506'",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got salt:+4506"},
      {"master: 10.0.0.1:99999",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got 10.0.0.1:99999"},
      {"master: '[::1]:0'",
       "line 1: master must be HOST:PORT with PORT an integer 1..65535, got [::1]:0"},
      {"master: [a, 'b:0']",
       "line 1: master item 2 must be HOST:PORT with PORT an integer 1..65535, got b:0"},
      {"master: [a, b, a]", "line 1: master item 3 must be different from item 1, got a:4506"},
      {"master: [a, 'a:4506']", "line 1: master item 2 must be different from item 1, got a:4506"},
      {"master: [Salt, salt]",
       "line 1: master item 2 must be different from item 1, got salt:4506"},
      {"id: m\nmaster: [a, 'a:4600']\nmaster_port: 4600",
       "line 2: master item 2 must be different from item 1, got a:4600"},
      {"master: ['::1', '[0::1]:4506']",
       "line 1: master item 2 must be different from item 1, got [0::1]:4506"},
      {"master_type: func",
       "line 1: master_type must be str, failover or disable (brine does not support Salt's "
       "func), got func"},
      {"master_type: hot", "line 1: master_type must be str, failover or disable, got hot"},
      {"master_type: Failover", "line 1: master_type must be str, failover or disable, got Failover"},
      {"master_type: [str]", "line 1: master_type must be str, failover or disable, got a list of 1"},
      {"random_master: sometimes",
       "line 1: random_master must be true or false (or yes/no, on/off), got sometimes"},
      {"master_shuffle: 1",
       "line 1: master_shuffle must be true or false (or yes/no, on/off), got 1"},
      {"random_master: true\nmaster_shuffle: false",
       "line 2: random_master (line 1) and its deprecated name master_shuffle (line 2) are both "
       "set; keep random_master"},
      {"master_shuffle: true\nid: m\nrandom_master: true",
       "line 3: random_master (line 3) and its deprecated name master_shuffle (line 1) are both "
       "set; keep random_master"},
      {"master_failback: often",
       "line 1: master_failback must be true or false (or yes/no, on/off), got often"},
      {"master_failback_interval: -1",
       "line 1: master_failback_interval must be an integer >= 0 (seconds), got -1"},
      {"master_failback_interval: 4294967296",
       "line 1: master_failback_interval must be an integer >= 0 (seconds), got 4294967296"},
      {"master_tries: 0", "line 1: master_tries must be -1 (forever) or an integer >= 1, got 0"},
      {"master_tries: -2", "line 1: master_tries must be -1 (forever) or an integer >= 1, got -2"},
      {"master_tries: -0", "line 1: master_tries must be -1 (forever) or an integer >= 1, got -0"},
      {"master_tries: +3", "line 1: master_tries must be -1 (forever) or an integer >= 1, got +3"},
      {"master_tries: 1.5",
       "line 1: master_tries must be -1 (forever) or an integer >= 1, got 1.5"},
      {"master_tries: forever",
       "line 1: master_tries must be -1 (forever) or an integer >= 1, got forever"},
      {"master_tries: 9223372036854775808",
       "line 1: master_tries must be -1 (forever) or an integer >= 1, got 9223372036854775808"},
      {"master_tries:",
       "line 1: master_tries must be -1 (forever) or an integer >= 1, got an empty value"},
      {"retry_dns: -1", "line 1: retry_dns must be an integer >= 0 (seconds), got -1"},
      {"master_return_strategy: all",
       "line 1: master_return_strategy must be origin or any, got all"},
      {"master_return_strategy:",
       "line 1: master_return_strategy must be origin or any, got an empty value"},
      {"use_srv_records: 1",
       "line 1: use_srv_records must be true or false (or yes/no, on/off), got 1"},
      {"id: m\nuse_srv_records: true",
       "line 2: use_srv_records needs srv_domain (the domain whose _brine._tcp SRV records list "
       "the masters)"},
      {"srv_domain: -example.com",
       "line 1: srv_domain must be a DNS domain name, got -example.com"},
      {"srv_domain: ''", "line 1: srv_domain must be a DNS domain name, got \"\""},
      {"srv_domain: 10.0.0.1", "line 1: srv_domain must be a DNS domain name, got 10.0.0.1"},
      {"srv_resolver: 10.0.0.53", "line 1: srv_resolver must be " + k_resolver + ", got 10.0.0.53"},
      {"srv_resolver: 10.0.0.53:0",
       "line 1: srv_resolver must be " + k_resolver + ", got 10.0.0.53:0"},
      {"srv_resolver: 10.0.0.53:65536",
       "line 1: srv_resolver must be " + k_resolver + ", got 10.0.0.53:65536"},
      {"srv_resolver: dns.example.com:53",
       "line 1: srv_resolver must be " + k_resolver + ", got dns.example.com:53"},
      {"srv_resolver: '::1:53'", "line 1: srv_resolver must be " + k_resolver + ", got ::1:53"},
      {"srv_resolver: '[::1]'", "line 1: srv_resolver must be " + k_resolver + ", got [::1]"},
      {"srv_resolver: '[10.0.0.53]:53'",
       "line 1: srv_resolver must be " + k_resolver + ", got [10.0.0.53]:53"},
      {"srv_resolver:", "line 1: srv_resolver must be " + k_resolver + ", got an empty value"},
      {"spool_max_bytes: 65535",
       "line 1: spool_max_bytes must be an integer 65536..1099511627776 (bytes), got 65535"},
      {"spool_max_bytes: 1099511627777",
       "line 1: spool_max_bytes must be an integer 65536..1099511627776 (bytes), got "
       "1099511627777"},
      {"master_finger: aa:bb",
       "line 1: master_finger must be a SHA-256 fingerprint: 32 hex bytes separated by colons "
       "(aa:bb:...:ff), got aa:bb"},
      {"master_finger: " + k_finger.substr(0, 94) + "g",
       "line 1: master_finger must be a SHA-256 fingerprint: 32 hex bytes separated by colons "
       "(aa:bb:...:ff), got " +
           k_finger.substr(0, 94) + "g"},
      {"master_finger: {a: b}",
       "line 1: master_finger must be a SHA-256 fingerprint: 32 hex bytes separated by colons "
       "(aa:bb:...:ff), got a mapping"},
      {"master_finger: [" + k_finger + ", aa:bb]",
       "line 1: master_finger item 2 must be a SHA-256 fingerprint: 32 hex bytes separated by "
       "colons (aa:bb:...:ff), got aa:bb"},
      {"master_finger: [" + k_finger + ", '']",
       "line 1: master_finger item 2 must be a SHA-256 fingerprint: 32 hex bytes separated by "
       "colons (aa:bb:...:ff), got \"\""},
      {"master_finger:\n  - " + k_finger + "\n  -\n",
       "line 1: master_finger item 2 must be a SHA-256 fingerprint: 32 hex bytes separated by "
       "colons (aa:bb:...:ff), got an empty value"},
      {"master_finger: [[" + k_finger + "]]",
       "line 1: master_finger item 1 must be a SHA-256 fingerprint: 32 hex bytes separated by "
       "colons (aa:bb:...:ff), got a list of 1"},
      {"master_finger: [" + k_finger + ", " + k_other_finger + ", " + k_finger + "]",
       "line 1: master_finger item 3 must be different from item 1, got " + k_finger},
      {"master_finger: [" + k_finger + ", " + upper(k_finger) + "]",
       "line 1: master_finger item 2 must be different from item 1, got " + k_finger},
      {"acceptance_wait_time: 0",
       "line 1: acceptance_wait_time must be an integer >= 1 (seconds), got 0"},
      {"acceptance_wait_time: 10\nacceptance_wait_time_max: 5",
       "line 2: acceptance_wait_time_max must be 0 or at least acceptance_wait_time (10), got 5"},
      {"acceptance_wait_time_max: -1",
       "line 1: acceptance_wait_time_max must be an integer >= 0 (seconds), got -1"},
      {"master_alive_interval: 0",
       "line 1: master_alive_interval must be an integer >= 1 (seconds), got 0"},
      {"job_timeout: 0", "line 1: job_timeout must be an integer >= 1 (seconds), got 0"},
      {"http_request_timeout: 0",
       "line 1: http_request_timeout must be an integer >= 1 (seconds), got 0"},
      {"hash_type: crc32",
       "line 1: hash_type must be md5, sha1, sha224, sha256, sha384 or sha512, got crc32"},
      {"max_frame_bytes: 100",
       "line 1: max_frame_bytes must be an integer 1024..1073741824 (bytes), got 100"},
      {"log_level: [debug]",
       "line 1: log_level must be one of garbage, trace, debug, info, warning, error, critical, "
       "quiet, got a list of 1"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(minion_error(c.yaml), std::string("config ") + k_minion + ": " + c.message) << c.yaml;
  }
}

TEST(MinionConfig, MasterFingerIsNormalisedToLowercase) {
  ASSERT_NE(upper(k_finger), k_finger);
  EXPECT_EQ(parse_minion_config("master_finger: " + upper(k_finger), k_minion).master_fingers,
            std::vector<std::string>{k_finger});
  EXPECT_TRUE(parse_minion_config("master_finger: ''", k_minion).master_fingers.empty());
  EXPECT_TRUE(parse_minion_config("master_finger:", k_minion).master_fingers.empty());
}

TEST(MinionConfig, MasterFingerTakesAList) {
  EXPECT_EQ(parse_minion_config("master_finger: [" + k_finger + ", " + upper(k_other_finger) + "]",
                                k_minion)
                .master_fingers,
            (std::vector<std::string>{k_finger, k_other_finger}));
  EXPECT_EQ(
      parse_minion_config("master_finger:\n  - " + k_other_finger + "\n", k_minion).master_fingers,
      std::vector<std::string>{k_other_finger});
  EXPECT_TRUE(parse_minion_config("master_finger: []", k_minion).master_fingers.empty());
}

TEST(MinionConfig, MasterTakesPortsListsAndIpv6) {
  struct good {
    std::string yaml;
    std::vector<master_address> masters;
  };
  const std::vector<good> cases = {
      {"master: salt", {{"salt", 4506}}},
      {"master: salt:4507", {{"salt", 4507}}},
      {"master: salt:1", {{"salt", 1}}},
      {"master: salt:65535", {{"salt", 65535}}},
      {"master: 10.0.0.1:4507", {{"10.0.0.1", 4507}}},
      {"master: '::1'", {{"::1", 4506}}},
      {"master: '[::1]:4507'", {{"::1", 4507}}},
      {"master: '[fe80::1]'", {{"fe80::1", 4506}}},
      // A bare IPv6 literal has no port: the last group is part of the address.
      {"master: 'fe80::1:4507'", {{"fe80::1:4507", 4506}}},
      {"master: [salt]", {{"salt", 4506}}},
      {"master: [a, 'b:4600', '[::1]:1', 10.0.0.1]",
       {{"a", 4506}, {"b", 4600}, {"::1", 1}, {"10.0.0.1", 4506}}},
      // master_port applies wherever it is written, and only to entries without a port.
      {"master:\n  - a\n  - b:4506\nmaster_port: 5000", {{"a", 5000}, {"b", 4506}}},
      {"master_port: 5000\nmaster: [a, 'a:4506']", {{"a", 5000}, {"a", 4506}}},
      {"master_port: 5000", {{"salt", 5000}}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_minion_config(c.yaml, k_minion).masters, c.masters) << c.yaml;
  }
}

TEST(MinionConfig, MasterAddressText) {
  EXPECT_EQ((master_address{"salt", 4506}.text()), "salt:4506");
  EXPECT_EQ((master_address{"10.0.0.1", 1}.text()), "10.0.0.1:1");
  EXPECT_EQ((master_address{"fe80::1", 4507}.text()), "[fe80::1]:4507");
}

TEST(MinionConfig, ParseMasterAddressInvertsText) {
  for (const master_address& m : std::vector<master_address>{
           {"salt", 4506}, {"10.0.0.1", 1}, {"fe80::1", 65535}, {"web-1.example.com", 80}}) {
    EXPECT_EQ(parse_master_address(m.text()), m) << m.text();
  }
  EXPECT_EQ(parse_master_address("salt"), (master_address{"salt", 4506}));
  EXPECT_EQ(parse_master_address("::1"), (master_address{"::1", 4506}));
  for (const char* bad : {"", "salt:0", "salt:x", "-salt:1", "[salt]:1", "a:1:2", "[::1]:"}) {
    EXPECT_EQ(parse_master_address(bad), std::nullopt) << bad;
  }
}

TEST(MinionConfig, MasterTypeAndReturnStrategy) {
  auto minion = [](const std::string& yaml) { return parse_minion_config(yaml, k_minion); };
  EXPECT_EQ(minion("master_type: str").master_type, master_mode::hot);
  EXPECT_EQ(minion("master_type: failover").master_type, master_mode::failover);
  EXPECT_EQ(minion("master_type: disable").master_type, master_mode::disabled);
  EXPECT_EQ(minion("master_return_strategy: origin").master_return_strategy,
            return_strategy::origin);
  EXPECT_EQ(minion("master_return_strategy: any").master_return_strategy, return_strategy::any);
}

TEST(MinionConfig, SrvRecords) {
  captured_log log;
  minion_config c = parse_minion_config(
      "use_srv_records: true\nsrv_domain: example.com\nsrv_resolver: 10.0.0.53:53\n", k_minion);
  EXPECT_TRUE(c.use_srv_records);
  EXPECT_EQ(c.srv_domain, "example.com");
  EXPECT_EQ(c.srv_resolver, "10.0.0.53:53");
  EXPECT_EQ(parse_minion_config("srv_resolver: '[fd00::53]:5353'\nuse_srv_records: on\n"
                                "srv_domain: brine_masters.corp\n",
                                k_minion)
                .srv_resolver,
            "[fd00::53]:5353");
  EXPECT_EQ(log.text(), "");
}

struct warned {
  std::string yaml;
  std::string log;  // every line, each after "config <source>: "
};

TEST(MinionConfig, WarningsNameFileLineAndOption) {
  const std::string f = std::string("config ") + k_minion + ": ";
  const std::vector<warned> cases = {
      {"master_shuffle: true",
       f + "line 1: master_shuffle is deprecated in favour of random_master (same meaning); "
           "rename it\n"},
      {"id: m\nsrv_domain: example.com\nsrv_resolver: 10.0.0.53:53",
       f + "line 2: srv_domain is ignored without use_srv_records: true\n" + f +
           "line 3: srv_resolver is ignored without use_srv_records: true\n"},
      {"use_srv_records: false\nsrv_resolver: 10.0.0.53:53",
       f + "line 2: srv_resolver is ignored without use_srv_records: true\n"},
      {"master: [a, b]\nuse_srv_records: true\nsrv_domain: example.com",
       f + "line 1: master is ignored: use_srv_records is true, so the masters come from the "
           "SRV records of example.com\n"},
      {"master: [a, b]\nmaster_failback: true",
       f + "line 2: master_failback applies only to master_type: failover; ignored\n"},
      {"master_type: str\nmaster_failback: yes",
       f + "line 2: master_failback applies only to master_type: failover; ignored\n"},
      {"master_type: failover\nmaster_failback: true\nmaster_tries: 2", ""},
      {"master_type: str\nmaster_failback: false\nmaster_tries: 2", ""},
      {"master: [a, b]\nrandom_master: true\nmaster_finger: [" + k_finger + ", " + k_other_finger +
           "]",
       ""},
  };
  for (const auto& c : cases) {
    captured_log log;
    EXPECT_NO_THROW(parse_minion_config(c.yaml, k_minion)) << c.yaml;
    EXPECT_EQ(log.text(), c.log) << c.yaml;
  }
}

TEST(MinionConfig, MasterShuffleIsRandomMaster) {
  captured_log log;
  EXPECT_TRUE(parse_minion_config("master_shuffle: true", k_minion).random_master);
  EXPECT_FALSE(parse_minion_config("master_shuffle: false", k_minion).random_master);
  EXPECT_TRUE(parse_minion_config("random_master: yes", k_minion).random_master);
}

TEST(MinionConfig, WrongSeparatorInFingerIsRejected) {
  std::string dashed = k_finger;
  for (char& ch : dashed) ch = ch == ':' ? '-' : ch;
  EXPECT_THAT(minion_error("master_finger: " + dashed), HasSubstr("master_finger must be"));
}

TEST(Config, ErrorsStayOnOneLine) {
  std::string message = minion_error("id: |\n  a\n  b\n");
  EXPECT_EQ(message,
            "config /etc/brine/minion: line 1: id must be a name without whitespace or control "
            "characters, got \"a\\nb\\n\"");
  std::string long_id = minion_error("id: \"" + std::string(120, 'x') + " y\"");
  EXPECT_THAT(long_id, HasSubstr("got \"" + std::string(100, 'x') + "...\""));
}

TEST(Config, TopLevelMustBeAMapping) {
  EXPECT_EQ(master_error("- port: 1\n- port: 2\n"),
            "config /etc/brine/master: line 1: the top level must be a mapping of option: value, "
            "got a list of 2");
  EXPECT_EQ(minion_error("\nhello\n"),
            "config /etc/brine/minion: line 2: the top level must be a mapping of option: value, "
            "got hello");
}

TEST(Config, DuplicateOptionIsAnError) {
  EXPECT_EQ(master_error("port: 1\nkeep_jobs: 2\nport: 2\n"),
            "config /etc/brine/master: line 3: port is set twice (first on line 1); keep one");
}

TEST(Config, SecondDocumentIsAnError) {
  EXPECT_EQ(master_error("port: 1\n---\nport: 2\n"),
            "config /etc/brine/master: line 3: a second YAML document; put all options in one "
            "mapping");
}

TEST(Config, OptionNameMustBeAScalar) {
  EXPECT_EQ(master_error("port: 1\n? [a, b]\n: 1\n"),
            "config /etc/brine/master: line 2: an option name must be a word, got a list of 2");
}

TEST(Config, BrokenYamlNamesFileAndLine) {
  std::string tab = master_error("port: 4506\n\tinterface: 127.0.0.1\n");
  EXPECT_THAT(tab, StartsWith("config /etc/brine/master: line 2: invalid YAML"));
  EXPECT_THAT(tab, Not(HasSubstr("\n")));
  EXPECT_THAT(minion_error("id: a\nmaster: [b\n"),
              StartsWith("config /etc/brine/minion: line 3: invalid YAML"));
  EXPECT_THAT(minion_error("id: \"unterminated\n"), StartsWith("config /etc/brine/minion: line "));
}

TEST(Config, UnknownOptionIsWarnedAndIgnored) {
  captured_log log;
  minion_config c;
  ASSERT_NO_THROW(
      c = parse_minion_config("id: a\nmaster: m1\nmastr: m2\nfruit: apple\n", "/x/minion"));
  EXPECT_EQ(c.masters, (std::vector<master_address>{{"m1", 4506}}));
  EXPECT_THAT(log.text(), HasSubstr("config /x/minion: line 3: unknown option 'mastr' ignored "
                                    "(did you mean 'master'?)"));
  EXPECT_THAT(log.text(), HasSubstr("config /x/minion: line 4: unknown option 'fruit' ignored\n"));
}

TEST(Config, OptionOfTheOtherDaemonIsUnknown) {
  captured_log log;
  EXPECT_EQ(parse_master_config("master_port: 1\n", k_master).port, 4506);
  EXPECT_THAT(log.text(), HasSubstr("line 1: unknown option 'master_port' ignored"));
}

TEST(Config, RelativePathsResolveAgainstTheConfigDirectory) {
  master_config m = parse_master_config(R"(
pki_dir: pki
cachedir: ../cache/./master/
sock_dir: /run/brine/../brine-sock
autosign_file: autosign.conf
autoreject_file: ''
log_file: logs//master.log
)",
                                        "/opt/brine/etc/master");
  EXPECT_EQ(m.pki_dir, "/opt/brine/etc/pki");
  EXPECT_EQ(m.cachedir, "/opt/brine/cache/master");
  EXPECT_EQ(m.sock_dir, "/run/brine-sock");
  EXPECT_EQ(m.autosign_file, "/opt/brine/etc/autosign.conf");
  EXPECT_EQ(m.autoreject_file, "");
  EXPECT_EQ(m.log_file, "/opt/brine/etc/logs/master.log");

  minion_config n = parse_minion_config("pki_dir: pki\ncachedir: .\n", "conf/minion");
  EXPECT_EQ(n.pki_dir, (fs::current_path() / "conf" / "pki").string());
  EXPECT_EQ(n.cachedir, (fs::current_path() / "conf").string());
}

TEST(MinionGrains, ConfiguredGrainsAndBlacklist) {
  auto c = parse_minion_config(R"(
grains:
  roles: [web, memcache]
  deployment: datacenter4
  cabinet: 13
  ssd: yes
grains_blacklist:
  - "*"
)",
                               k_minion);
  EXPECT_EQ(c.grains, (nlohmann::json{{"roles", {"web", "memcache"}},
                                      {"deployment", "datacenter4"},
                                      {"cabinet", 13},
                                      {"ssd", true}}));
  EXPECT_EQ(c.grains_blacklist, (std::vector<std::string>{"*"}));
  auto d = parse_minion_config("grains_blacklist: 'ip*'", k_minion);
  EXPECT_EQ(d.grains_blacklist, (std::vector<std::string>{"ip*"}));
  EXPECT_TRUE(parse_minion_config("", k_minion).grains.empty());
  EXPECT_EQ(error_of([] { parse_minion_config("grains: [a, b]", k_minion); }),
            "config /etc/brine/minion: line 1: grains must be a mapping of grain names to "
            "values, got a list of 2");
  EXPECT_EQ(error_of([] { parse_minion_config("grains_blacklist: {a: 1}", k_minion); }),
            "config /etc/brine/minion: line 1: grains_blacklist must be a list of globs of "
            "grain names, got a mapping");
}

TEST(LoadConfig, ReadsTheFileSetsSourceAndAnchorsPaths) {
  temp_dir dir;
  std::string path = dir.write("minion", "id: m1\nmaster: 127.0.0.1\npki_dir: pki\n");
  minion_config c = load_minion_config(path);
  EXPECT_EQ(c.source, path);
  EXPECT_EQ(c.id, "m1");
  EXPECT_EQ(c.masters, (std::vector<master_address>{{"127.0.0.1", 4506}}));
  EXPECT_EQ(c.pki_dir, (dir.path() / "pki").string());

  std::string master = dir.write("master", "port: 14506\n");
  master_config m = load_master_config(master);
  EXPECT_EQ(m.source, master);
  EXPECT_EQ(m.port, 14506);
}

TEST(LoadConfig, EmptyFileMeansDefaults) {
  temp_dir dir;
  EXPECT_EQ(load_master_config(dir.write("master", "")).port, 4506);
  EXPECT_EQ(load_minion_config(dir.write("minion", "# all defaults\n")).masters,
            (std::vector<master_address>{{"salt", 4506}}));
}

TEST(LoadConfig, ErrorsNameTheFile) {
  temp_dir dir;
  std::string path = dir.write("minion", "master_port: 0\n");
  EXPECT_EQ(error_of([&] { load_minion_config(path); }),
            "config " + path + ": line 1: master_port must be an integer 1..65535, got 0");
}

TEST(LoadConfig, MissingFile) {
  temp_dir dir;
  std::string path = (dir.path() / "nope").string();
  EXPECT_EQ(error_of([&] { load_master_config(path); }),
            "config " + path + ": cannot read: No such file or directory");
}

TEST(LoadConfig, DirectoryIsNotAConfigFile) {
  temp_dir dir;
  std::string path = dir.path().string();
  EXPECT_EQ(error_of([&] { load_minion_config(path); }),
            "config " + path + ": cannot read: Is a directory");
}

}  // namespace
}  // namespace brine::base

namespace brine::base {
namespace {

// The fast reading of a config file (no yaml-cpp) must give exactly what the
// parser gives, or decline.
TEST(Config, SimpleMappingAgreesWithTheParserOrDeclines) {
  struct sample {
    const char* text;
    bool simple;
  };
  const sample samples[] = {
      {"", true},
      {"# only a comment\n\n   \n", true},
      {"pki_dir: /tmp/pki\ncachedir: /tmp/c\n", true},
      {"port: 4506\nauto_accept: yes\ntimeout: 1.5\n", true},
      {"id: web-1   \nmaster: 127.0.0.1:4506\n", true},
      {"  # indented comment\nlog_level:    debug\n# end", true},
      {"interface: 0.0.0.0\nopen_mode: Off\nx: a b  c\n", true},
      {"v: 0x1f\nw: 0644\nz: 1e3\nq: .inf\n", true},
      {"id: a\n\nid2: b", true},
      {"key: 'quoted'\n", false},
      {"key: \"quoted\"\n", false},
      {"key: value # trailing comment\n", false},
      {"key: ~\n", false},
      {"key: null\n", false},
      {"key:\n  - a\n", false},
      {"key: [a, b]\n", false},
      {"key: {a: 1}\n", false},
      {"key: &anchor x\n", false},
      {"key: *anchor\n", false},
      {"key: !!str 1\n", false},
      {"key: |\n  text\n", false},
      {"key: -1\n", false},
      {"key: a: b\n", false},
      {"key: ::1\n", false},
      {"---\nkey: a\n", false},
      {" key: a\n", false},
      {"key:\ta\n", false},
      {"key: a\r\n", false},
      {"key: caf\xc3\xa9\n", false},
      {"\xef\xbb\xbfkey: a\n", false},
      {"key-name: a\n", false},
      {"key:a\n", false},
  };
  for (const auto& s : samples) {
    SCOPED_TRACE(s.text);
    auto simple = detail::simple_mapping(s.text);
    ASSERT_EQ(simple.has_value(), s.simple);
    if (!simple) continue;
    YAML::Node root = YAML::Load(s.text);
    if (simple->empty()) {
      EXPECT_TRUE(root.IsNull());
      continue;
    }
    ASSERT_TRUE(root.IsMap());
    ASSERT_EQ(root.size(), simple->size());
    size_t i = 0;
    for (const auto& kv : root) {
      const auto& o = (*simple)[i++];
      EXPECT_EQ(kv.first.Scalar(), o.name);
      EXPECT_EQ(kv.first.Mark().line + 1, o.line);
      ASSERT_TRUE(kv.second.IsScalar());
      EXPECT_EQ(kv.second.Scalar(), o.value);
      EXPECT_EQ(kv.second.Tag(), "?");
    }
  }
}

// The same options read either way: a duplicate is still refused with its lines.
TEST(Config, SimpleMappingKeepsTheChecks) {
  try {
    parse_master_config("port: 4506\nport: 4507\n", "m.yaml");
    FAIL() << "a duplicate was accepted";
  } catch (const error& e) {
    EXPECT_STREQ(e.what(), "config m.yaml: line 2: port is set twice (first on line 1); keep one");
  }
  try {
    parse_master_config("port: 70000\n", "m.yaml");
    FAIL() << "a bad port was accepted";
  } catch (const error& e) {
    EXPECT_STREQ(e.what(), "config m.yaml: line 1: port must be an integer 1..65535, got 70000");
  }
  auto c = parse_master_config("auto_accept: on\nport: 4600\n", "m.yaml");
  EXPECT_TRUE(c.auto_accept);
  EXPECT_EQ(c.port, 4600);
}

}  // namespace
}  // namespace brine::base

namespace brine::base {
namespace {

TEST(MinionConfig, StateCompilerOptions) {
  auto c = parse_minion_config(
      "file_client: local\nstate_top: site.sls\ntop_file_merging_strategy: same\n"
      "env_order: [base, dev]\nstate_auto_order: false\n",
      "m.yaml");
  EXPECT_EQ(c.file_client, "local");
  EXPECT_EQ(c.state_top, "site.sls");
  EXPECT_EQ(c.top_file_merging_strategy, "same");
  EXPECT_EQ(c.env_order, (std::vector<std::string>{"base", "dev"}));
  EXPECT_FALSE(c.state_auto_order);
  try {
    parse_minion_config("top_file_merging_strategy: union\n", "m.yaml");
    FAIL() << "an unknown strategy was accepted";
  } catch (const error& e) {
    EXPECT_STREQ(e.what(),
                 "config m.yaml: line 1: top_file_merging_strategy must be merge, same or "
                 "merge_all, got union");
  }
}

TEST(MinionConfig, PostgresOptionsAreKeptForTheModule) {
  auto c = parse_minion_config(
      "postgres.host: 127.0.0.1\npostgres.port: 5433\npostgres.user: admin\n"
      "postgres.pass: s3cret\npostgres.maintenance_db: template1\n",
      "m.yaml");
  EXPECT_EQ(c.module_options,
            nlohmann::json({{"postgres.host", "127.0.0.1"},
                            {"postgres.port", 5433},
                            {"postgres.user", "admin"},
                            {"postgres.pass", "s3cret"},
                            {"postgres.maintenance_db", "template1"}}));
  EXPECT_NE(minion_error("postgres.host: [a, b]\n")
                .find("line 1: postgres.host must be one value (a word or a number)"),
            std::string::npos);
}


// Salt keeps every option in opts; formulas read their own (`nginx.lookup`,
// `mysql.host`) with config.get. brine keeps every `module.option` as data
// (a map stays a map), in both parsers, and still warns about a plain name
// it does not know (a typo).
TEST(MinionConfig, ModuleOptionsOfAnyModuleAreKept) {
  auto plain = parse_minion_config("mysql.host: db1\nmysql.port: 3307\nid: m1\n", "m.yaml");
  EXPECT_EQ(plain.module_options, nlohmann::json({{"mysql.host", "db1"}, {"mysql.port", 3307}}));
  auto nested = parse_minion_config(
      "nginx.lookup:\n  package: nginx-full\n  ports: [80, 443]\nid: m1\n", "m.yaml");
  EXPECT_EQ(nested.module_options,
            nlohmann::json({{"nginx.lookup", {{"package", "nginx-full"}, {"ports", {80, 443}}}}}));
  auto typo = parse_minion_config("mysqlhost: db1\n.hidden: 1\ntrailing.: 2\n", "m.yaml");
  EXPECT_TRUE(typo.module_options.empty()) << typo.module_options.dump();
}

}  // namespace
}  // namespace brine::base

namespace brine::base {
namespace {

TEST(MasterConfig, ClusterOptions) {
  auto c = parse_master_config(
      "pki_dir: /etc/brine/pki/master\n"
      "store: postgresql://brine@db:5432/brine\n"
      "cluster_id: prod-1\n"
      "cluster_port: 4600\n"
      "cluster_peers: [m2, '10.0.0.3:4700', '[::1]:4601']\n",
      "/etc/brine/master");
  EXPECT_TRUE(c.clustered());
  EXPECT_EQ(c.cluster_id, "prod-1");
  EXPECT_EQ(c.cluster_pki_dir, "/etc/brine/pki/master/cluster");
  ASSERT_EQ(c.cluster_peers.size(), 3u);
  EXPECT_EQ(c.cluster_peers[0].text(), "m2:4600");  // cluster_port, even when set after
  EXPECT_EQ(c.cluster_peers[1].text(), "10.0.0.3:4700");
  EXPECT_EQ(c.cluster_peers[2].text(), "[::1]:4601");
  EXPECT_FALSE(parse_master_config("", "/etc/brine/master").clustered());
}

TEST(MasterConfig, ClusterMistakesNameTheOptionAndTheFix) {
  auto e = master_error("cluster_id: c1\n");
  EXPECT_NE(e.find("cluster_id is set but store is sqlite"), std::string::npos) << e;
  EXPECT_NE(e.find("store: postgresql://"), std::string::npos) << e;
  e = master_error("cluster_peers: [m2]\n");
  EXPECT_NE(e.find("cluster_peers is set but cluster_id is not"), std::string::npos) << e;
  e = master_error("store: postgresql://b@h/d\ncluster_id: 'a b'\n");
  EXPECT_NE(e.find("cluster_id"), std::string::npos) << e;
  EXPECT_NE(e.find("letters, digits"), std::string::npos) << e;
  e = master_error("store: postgresql://b@h/d\ncluster_id: c1\ncluster_peers: {a: 1}\n");
  EXPECT_NE(e.find("cluster_peers"), std::string::npos) << e;
}

TEST(MinionConfig, ScheduleAsSaltWritesIt) {
  auto c = parse_minion_config(
      "schedule:\n"
      "  highstate:\n"
      "    function: state.apply\n"
      "    minutes: 30\n"
      "    splay: 60\n"
      "    maxrunning: 2\n"
      "    run_on_start: true\n"
      "  uptime:\n"
      "    function: cmd.run\n"
      "    hours: 1\n"
      "    seconds: 30\n"
      "    job_args: [uptime]\n"
      "    job_kwargs: {python_shell: true}\n"
      "    splay: {start: 5, end: 10}\n"
      "    enabled: false\n",
      k_minion);
  ASSERT_EQ(c.schedule.size(), 2u);
  EXPECT_TRUE(c.schedule_enabled);
  const auto& h = c.schedule[0];
  EXPECT_EQ(h.name, "highstate");
  EXPECT_EQ(h.function, "state.apply");
  EXPECT_EQ(h.seconds, 1800u);
  EXPECT_EQ(h.splay_start, 0u);
  EXPECT_EQ(h.splay_end, 60u);
  EXPECT_EQ(h.maxrunning, 2u);
  EXPECT_TRUE(h.run_on_start);
  EXPECT_TRUE(h.enabled);
  EXPECT_EQ(h.line, 2);
  const auto& u = c.schedule[1];
  EXPECT_EQ(u.seconds, 3630u);
  EXPECT_EQ(u.args, nlohmann::json::array({"uptime"}));
  EXPECT_EQ(u.kwargs, (nlohmann::json{{"python_shell", true}}));
  EXPECT_EQ(u.splay_start, 5u);
  EXPECT_EQ(u.splay_end, 10u);
  EXPECT_FALSE(u.enabled);
  EXPECT_EQ(u.maxrunning, 1u);  // Salt's default
  EXPECT_FALSE(u.run_on_start);

  auto off = parse_minion_config("schedule:\n  enabled: false\n  a: {function: test.ping, seconds: 5}\n",
                                 k_minion);
  EXPECT_FALSE(off.schedule_enabled);
  EXPECT_EQ(off.schedule.size(), 1u);
  EXPECT_TRUE(parse_minion_config("schedule:\n", k_minion).schedule.empty());
}

TEST(MinionConfig, ScheduleFromThePillarIsCheckedAsTheConfigs) {
  bool enabled = true;
  auto jobs = parse_schedule(R"({"hs": {"function": "state.apply", "minutes": 30,
                                "job_args": ["web"], "kwargs": {"test": true},
                                "splay": {"start": 5, "end": 10}, "maxrunning": 2}})",
                             "the pillar's schedule", enabled);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_TRUE(enabled);
  EXPECT_EQ(jobs[0].name, "hs");
  EXPECT_EQ(jobs[0].function, "state.apply");
  EXPECT_EQ(jobs[0].seconds, 1800u);
  EXPECT_EQ(jobs[0].args, nlohmann::json::array({"web"}));
  EXPECT_EQ(jobs[0].kwargs, nlohmann::json({{"test", true}}));
  EXPECT_EQ(jobs[0].splay_start, 5u);
  EXPECT_EQ(jobs[0].splay_end, 10u);
  EXPECT_EQ(jobs[0].maxrunning, 2u);
  parse_schedule(R"({"enabled": false})", "p", enabled);
  EXPECT_FALSE(enabled);
  EXPECT_TRUE(parse_schedule("null", "p", enabled).empty());
  auto error_of = [](const char* json) {
    bool on = true;
    try {
      parse_schedule(json, "the pillar's schedule", on);
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of(R"({"hs": {"function": "state.apply", "minuts": 5}})"),
            "the pillar's schedule: schedule job hs: unknown key minuts (did you mean "
            "'minutes'?); a job takes function, args (or job_args), kwargs (or job_kwargs), "
            "seconds, minutes, hours, days, splay, run_on_start, maxrunning and enabled");
  EXPECT_EQ(error_of(R"(["hs"])"),
            "the pillar's schedule: schedule must be a mapping of job name to {function: ..., "
            "minutes: ...}, got a list of 1");
}

TEST(MinionConfig, ScheduleErrorsNameTheJobTheKeyAndTheFix) {
  std::string e = minion_error("schedule:\n  highstate:\n    function: state.apply\n    minuts: 30\n");
  EXPECT_EQ(e, std::string("config ") + k_minion + ": line 4: schedule job highstate: unknown key minuts (did "
               "you mean 'minutes'?); a job takes function, args (or job_args), kwargs (or "
               "job_kwargs), seconds, minutes, hours, days, splay, run_on_start, maxrunning and "
               "enabled");
  e = minion_error("schedule:\n  highstate:\n    function: state.apply\n    minutes: -5\n");
  EXPECT_EQ(e, std::string("config ") + k_minion + ": line 4: schedule job highstate: minutes must be a whole "
               "number of minutes >= 0 (the interval is their sum with the job's other units; at "
               "most a year), got -5; write e.g. minutes: 30");
  e = minion_error("schedule:\n  hs:\n    function: state.apply\n");
  EXPECT_EQ(e, std::string("config ") + k_minion + ": line 2: schedule job hs has no interval; add seconds, "
               "minutes, hours or days (e.g. minutes: 30)");
  e = minion_error("schedule:\n  hs:\n    minutes: 5\n");
  EXPECT_EQ(e, std::string("config ") + k_minion + ": line 2: schedule job hs has no function; add function: "
               "MODULE.FUNCTION (e.g. function: state.apply)");
  e = minion_error("schedule:\n  hs:\n    function: state.apply\n    seconds: 0\n");
  EXPECT_NE(e.find("line 2: schedule job hs: its interval is 0 seconds"), std::string::npos) << e;
  e = minion_error("schedule:\n  hs:\n    function: state.apply\n    cron: '*/5 * * * *'\n");
  EXPECT_NE(e.find("line 4: schedule job hs: cron is a Salt schedule key brine does not take"),
            std::string::npos)
      << e;
  e = minion_error("schedule:\n  hs:\n    function: stateapply\n    minutes: 5\n");
  EXPECT_NE(e.find("line 3: schedule job hs: function must be MODULE.FUNCTION"), std::string::npos)
      << e;
  e = minion_error("schedule:\n  hs:\n    function: state.apply\n    minutes: 5\n    maxrunning: 0\n");
  EXPECT_NE(e.find("line 5: schedule job hs: maxrunning must be an integer 1..1000, got 0"),
            std::string::npos)
      << e;
  e = minion_error(
      "schedule:\n  hs:\n    function: state.apply\n    minutes: 5\n    splay: {start: 9, end: 3}\n");
  EXPECT_NE(e.find("line 5: schedule job hs: splay: end (3) must not be less than start (9)"),
            std::string::npos)
      << e;
  e = minion_error("schedule:\n  hs:\n    function: state.apply\n    minutes: 5\n    args: 1\n    job_args: [2]\n");
  EXPECT_NE(e.find("line 6: schedule job hs: job_args is set twice (first on line 5)"),
            std::string::npos)
      << e;
  e = minion_error("schedule:\n  hs: state.apply\n");
  EXPECT_NE(e.find("line 2: schedule job hs must be a mapping"), std::string::npos) << e;
  e = minion_error("schedule: [a]\n");
  EXPECT_NE(e.find("line 1: schedule must be a mapping of job name"), std::string::npos) << e;
}

TEST(MasterConfig, ScheduledRunOptions) {
  auto d = parse_master_config("", k_master);
  EXPECT_EQ(d.max_concurrent_runs, 0u);
  EXPECT_EQ(d.run_retry_after, 10u);
  EXPECT_FALSE(d.schedule_harmonic);
  EXPECT_EQ(d.schedule_harmonic_base, 900u);
  auto c = parse_master_config(
      "max_concurrent_runs: 50\nrun_retry_after: 3\nschedule_harmonic: true\n"
      "schedule_harmonic_base: 600\n",
      k_master);
  EXPECT_EQ(c.max_concurrent_runs, 50u);
  EXPECT_EQ(c.run_retry_after, 3u);
  EXPECT_TRUE(c.schedule_harmonic);
  EXPECT_EQ(c.schedule_harmonic_base, 600u);
  EXPECT_NE(master_error("run_retry_after: 0\n").find("run_retry_after must be an integer 1..3600"),
            std::string::npos);
  EXPECT_NE(master_error("schedule_harmonic_base: 0\n").find("schedule_harmonic_base must be"),
            std::string::npos);
}

}  // namespace
}  // namespace brine::base
