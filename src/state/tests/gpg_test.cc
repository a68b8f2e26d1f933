// Salt's gpg renderer with the real gpg: a key made for the test in its own
// key directory (gpg's agent for it is stopped at the end), a value
// encrypted to it, then decrypted through a #!yaml|gpg pillar file and a
// #!yaml|gpg state file.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "pillar/pillar.h"
#include "state/gpg.h"
#include "state/highstate.h"
#include "support/temp_dir.h"

namespace brine::state {
namespace {

namespace fs = std::filesystem;

std::string run(const std::string& command) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> p(::popen(command.c_str(), "r"), ::pclose);
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p.get())) out.append(buf, n);
  return out;
}

void put(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

class gpg_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v gpg >/dev/null 2>&1") != 0) {
      GTEST_SKIP() << "needs gpg (apt-get install gnupg; scripts/deps.sh installs it)";
    }
    fs::create_directories(keys_);
    fs::permissions(keys_, fs::perms::owner_all);
    std::string gpg = "gpg --batch --homedir " + keys_ + " ";
    ASSERT_EQ(std::system((gpg + "--passphrase '' --quick-gen-key 'brine test <t@brine>' "
                                 "future-default default never >/dev/null 2>&1")
                              .c_str()),
              0);
    cipher_ = run("printf 's3cr3t' | " + gpg + "--trust-model always --armor -r t@brine "
                  "--encrypt 2>/dev/null");
    ASSERT_NE(cipher_.find("-----BEGIN PGP MESSAGE-----"), std::string::npos) << cipher_;
  }
  void TearDown() override {
    if (fs::exists(keys_)) {
      int rc = std::system(("gpgconf --homedir " + keys_ + " --kill all >/dev/null 2>&1").c_str());
      (void)rc;
    }
  }
  // The cipher as a YAML block scalar, indented under a key.
  std::string yaml_block(const std::string& indent) const {
    std::string out = "|\n";
    std::size_t at = 0;
    while (at < cipher_.size()) {
      std::size_t nl = cipher_.find('\n', at);
      if (nl == std::string::npos) nl = cipher_.size();
      out += indent + cipher_.substr(at, nl - at) + "\n";
      at = nl + 1;
    }
    return out;
  }

  test::temp_dir dir_{"brine-gpg"};
  std::string keys_ = dir_.file("gpgkeys");
  std::string cipher_;
};

TEST_F(gpg_test, a_yaml_gpg_pillar_file_is_decrypted) {
  std::string root = dir_.file("pillar");
  put(root + "/top.sls", "base:\n  '*':\n    - secrets\n");
  put(root + "/secrets.sls", "#!yaml|gpg\ndb:\n  user: app\n  password: " + yaml_block("    "));
  pillar::options o;
  o.roots = {{"base", {root}}};
  o.gpg = gpg_decryptor(keys_, false);
  auto c = pillar::compiler::load(o);
  nlohmann::json grains = nlohmann::json::object();
  auto r = c.compile("m1", &grains);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(r.pillar["db"]["password"], "s3cr3t");
  EXPECT_EQ(r.pillar["db"]["user"], "app");
}

TEST_F(gpg_test, a_block_gpg_cannot_decrypt_stays_or_fails_the_file) {
  std::string root = dir_.file("pillar");
  std::string bad = "-----BEGIN PGP MESSAGE-----\\n\\nbm90IGEgbWVzc2FnZQ==\\n-----END PGP MESSAGE-----";
  put(root + "/top.sls", "base:\n  '*':\n    - secrets\n");
  put(root + "/secrets.sls", "#!yaml|gpg\nkey: \"" + bad + "\"\n");
  pillar::options o;
  o.roots = {{"base", {root}}};
  o.gpg = gpg_decryptor(keys_, false);
  nlohmann::json grains = nlohmann::json::object();
  // Salt's default: the block is kept (its \n made newlines), with a warning.
  auto kept = pillar::compiler::load(o).compile("m1", &grains);
  EXPECT_TRUE(kept.errors.empty());
  EXPECT_EQ(kept.pillar["key"],
            "-----BEGIN PGP MESSAGE-----\n\nbm90IGEgbWVzc2FnZQ==\n-----END PGP MESSAGE-----");
  // gpg_decrypt_must_succeed: the file is an error naming it and the keys.
  o.gpg = gpg_decryptor(keys_, true);
  auto failed = pillar::compiler::load(o).compile("m1", &grains);
  ASSERT_EQ(failed.errors.size(), 1u);
  EXPECT_NE(failed.errors[0].find("secrets.sls: Could not decrypt cipher b'-----BEGIN PGP"),
            std::string::npos)
      << failed.errors[0];
  EXPECT_NE(failed.errors[0].find(keys_ + ": gpg_keydir"), std::string::npos) << failed.errors[0];
  EXPECT_FALSE(failed.pillar.contains("key"));
}

TEST_F(gpg_test, a_yaml_gpg_state_file_is_decrypted) {
  std::string root = dir_.file("salt");
  put(root + "/top.sls", "base:\n  '*':\n    - app\n");
  put(root + "/app.sls",
      "#!yaml|gpg\n/tmp/brine-gpg-never:\n  file.managed:\n    - contents: " + yaml_block("        "));
  nlohmann::json opts = {{"id", "m1"}, {"file_client", "local"}, {"gpg_keydir", keys_}};
  opts["file_roots"]["base"] = {root};
  options o = options::from_opts(opts);
  minion m;
  m.id = "m1";
  m.opts = json(opts);
  compiler c(o, std::move(m));
  result r = c.show_sls("app");
  ASSERT_EQ(r.retcode, 0) << r.ret.dump();
  ASSERT_TRUE(r.ret.is_object()) << r.ret.dump();
  // Salt's high data: the function's arguments and its name in one list.
  const json& args = r.ret["/tmp/brine-gpg-never"]["file"];
  ASSERT_TRUE(args.is_array()) << r.ret.dump();
  EXPECT_EQ(args[0], json({{"contents", "s3cr3t"}})) << r.ret.dump();
}

TEST_F(gpg_test, a_block_is_decrypted_once_for_every_render) {
  auto decrypt = gpg_decryptor(keys_, true);
  EXPECT_EQ(decrypt(cipher_), "s3cr3t");
  // The keys gone: the block decrypted before needs no gpg run again,
  // where a block not seen yet does (and fails, must_succeed).
  std::string gpg = "gpg --batch --homedir " + keys_ + " ";
  std::string other = run("printf 'other' | " + gpg + "--trust-model always --armor -r t@brine "
                          "--encrypt 2>/dev/null");
  ASSERT_NE(other.find("-----BEGIN PGP MESSAGE-----"), std::string::npos);
  int rc = std::system(("gpgconf --homedir " + keys_ + " --kill all >/dev/null 2>&1").c_str());
  (void)rc;
  fs::rename(keys_, keys_ + ".away");
  EXPECT_EQ(decrypt(cipher_), "s3cr3t");
  EXPECT_THROW(decrypt(other), base::error);
  fs::rename(keys_ + ".away", keys_);
}

TEST(gpg_decryptor, no_gpg_on_path_is_gpg_unavailable) {
  const char* saved = std::getenv("PATH");
  std::string path = saved != nullptr ? saved : "";
  ::setenv("PATH", "/nonexistent-brine-dir", 1);
  std::string error;
  try {
    gpg_decryptor("/tmp", false)("-----BEGIN PGP MESSAGE-----\n-----END PGP MESSAGE-----");
  } catch (const base::error& e) {
    error = e.what();
  }
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_NE(error.find("GPG unavailable: exec 'gpg': not found in PATH"), std::string::npos)
      << error;
  EXPECT_NE(error.find("apt-get install gnupg"), std::string::npos) << error;
}

TEST(gpg_keydir, salts_default_is_gpgkeys_beside_the_config) {
  EXPECT_EQ(gpg_keydir_of({{"config_dir", "/etc/brine"}}), "/etc/brine/gpgkeys");
  EXPECT_EQ(gpg_keydir_of({{"conf_file", "/opt/b/minion"}}), "/opt/b/gpgkeys");
  EXPECT_EQ(gpg_keydir_of({{"gpg_keydir", "/k"}, {"config_dir", "/etc/brine"}}), "/k");
  // An empty option is unset (the master passes its config's value as is).
  EXPECT_EQ(gpg_keydir_of({{"gpg_keydir", ""}, {"conf_file", "/opt/b/master"}}), "/opt/b/gpgkeys");
}

}  // namespace
}  // namespace brine::state
