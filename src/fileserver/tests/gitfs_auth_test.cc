// Salt's rules for gitfs credentials, and the answers the credential
// callback gives libgit2: pure, no network.
#include "fileserver/gitfs_auth.h"

#include <gtest/gtest.h>

#include "fileserver/tests/tree.h"

namespace brine::fileserver {
namespace {

using test_tree::temp_dir;
using test_tree::write;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GitfsAuth, TransportAsSaltReadsTheUrl) {
  EXPECT_EQ(transport_of("https://git.example/x.git"), git_transport::https);
  EXPECT_EQ(transport_of("HTTP://git.example/x.git"), git_transport::http);
  EXPECT_EQ(transport_of("ssh://git@git.example/x.git"), git_transport::ssh);
  EXPECT_EQ(transport_of("git+ssh://git@git.example/x.git"), git_transport::ssh);
  EXPECT_EQ(transport_of("git@github.com:org/x.git"), git_transport::ssh);
  EXPECT_EQ(transport_of("github.com:org/x.git"), git_transport::ssh);
  EXPECT_EQ(transport_of("git://git.example/x.git"), git_transport::git);
  EXPECT_EQ(transport_of("file:///srv/x"), git_transport::file);
  EXPECT_EQ(transport_of("/srv/x"), git_transport::local);
  EXPECT_EQ(transport_of("repos/x"), git_transport::local);
  EXPECT_EQ(transport_of("./x:y"), git_transport::local);  // a '/' before the ':'
  EXPECT_EQ(transport_of("svn://x/y"), git_transport::other);

  EXPECT_EQ(ssh_user("git@github.com:org/x.git"), "git");
  EXPECT_EQ(ssh_user("ssh://deploy@host:2222/x.git"), "deploy");
  EXPECT_EQ(ssh_user("ssh://host/x@y.git"), "");
  EXPECT_EQ(ssh_user("github.com:org/x.git"), "");
}

TEST(GitfsAuth, UserAndPasswordGoTogether) {
  EXPECT_EQ(check_auth("https://h/x.git", {}), "");
  EXPECT_EQ(check_auth("https://h/x.git", {.user = "u", .password = "hunter2"}), "");
  auto e = check_auth("https://h/x.git", {.user = "u"});
  EXPECT_TRUE(has(e,
                  "gitfs_remotes https://h/x.git: user 'u' is set but no password; set "
                  "gitfs_password (or the remote's password) too"))
      << e;
  e = check_auth("https://h/x.git", {.password = "hunter2"});
  EXPECT_TRUE(has(e, "a password is set but no user; set gitfs_user (or the remote's user)")) << e;
  EXPECT_FALSE(has(e, "hunter2")) << e;
}

TEST(GitfsAuth, APasswordOverPlainHttpNeedsInsecureAuth) {
  gitfs_auth a{.user = "u", .password = "hunter2"};
  auto e = check_auth("http://h/x.git", a);
  EXPECT_TRUE(has(e, "gitfs_remotes http://h/x.git: a password over plain http:// is refused"))
      << e;
  EXPECT_TRUE(has(e, "set gitfs_insecure_auth (or the remote's insecure_auth) to true")) << e;
  EXPECT_FALSE(has(e, "hunter2")) << e;
  a.insecure_auth = true;
  EXPECT_EQ(check_auth("http://h/x.git", a), "");
  // No password: nothing to protect, as in Salt.
  EXPECT_EQ(check_auth("http://h/x.git", {}), "");
  // The callback holds to the same rule.
  a.insecure_auth = false;
  auto c = choose_credential("http://h/x.git", a, "", GIT_CREDENTIAL_USERPASS_PLAINTEXT, 0);
  EXPECT_EQ(c.what, credential_choice::fail);
  EXPECT_TRUE(has(c.error, "gitfs_insecure_auth")) << c.error;
}

TEST(GitfsAuth, CredentialsATransportDoesNotUseAreIgnored) {
  gitfs_auth a{.user = "u", .password = "p", .pubkey = "/nonexistent.pub", .privkey = "/none"};
  EXPECT_EQ(check_auth("/srv/repo", a), "");
  EXPECT_EQ(check_auth("file:///srv/repo", a), "");
  EXPECT_EQ(check_auth("git://h/x.git", a), "");
  gitfs_auth password_only{.user = "u", .password = "p"};
  EXPECT_EQ(check_auth("git@h:x.git", password_only), "");  // SSH takes keys only
  gitfs_auth keys_only{.pubkey = "/nonexistent.pub", .privkey = "/none"};
  EXPECT_EQ(check_auth("https://h/x.git", keys_only), "");
  auto e = check_auth("svn://h/x", password_only);
  EXPECT_TRUE(has(e, "use an https://, http:// or ssh:// URL")) << e;
}

TEST(GitfsAuth, AnSshKeyNeedsBothFilesAndAUserInTheUrl) {
  temp_dir t;
  write(t.path() / "id.pub", "ssh-ed25519 AAAA test\n");
  write(t.path() / "id", "private\n");
  std::string pub = (t.path() / "id.pub").string();
  std::string priv = (t.path() / "id").string();
  EXPECT_EQ(check_auth("git@h:x.git", {.pubkey = pub, .privkey = priv}), "");
  EXPECT_EQ(check_auth("ssh://git@h/x.git", {.pubkey = pub, .privkey = priv, .passphrase = "s"}),
            "");
  auto e = check_auth("git@h:x.git", {.pubkey = pub});
  EXPECT_TRUE(has(e, "an SSH key needs both files; set gitfs_privkey (or the remote's privkey)"))
      << e;
  e = check_auth("git@h:x.git", {.passphrase = "secret"});
  EXPECT_TRUE(has(e, "set gitfs_pubkey")) << e;
  EXPECT_FALSE(has(e, "secret")) << e;
  e = check_auth("h:x.git", {.pubkey = pub, .privkey = priv});
  EXPECT_TRUE(has(e, "the URL names no user; write the user in it")) << e;
  e = check_auth("git@h:x.git", {.pubkey = pub, .privkey = priv + ".missing"});
  EXPECT_TRUE(has(e, "gitfs_privkey (or the remote's privkey) " + priv +
                         ".missing is not a file; give the path of the private key"))
      << e;
}

TEST(GitfsAuth, TheCallbackGivesCredentialsOnceThenNamesTheOptionToFix) {
  gitfs_auth a{.user = "alice", .password = "hunter2"};
  const std::string url = "https://h/x.git";
  auto c = choose_credential(url, a, "", GIT_CREDENTIAL_USERPASS_PLAINTEXT, 0);
  EXPECT_EQ(c.what, credential_choice::userpass);
  EXPECT_EQ(c.user, "alice");
  // libgit2 asks again after the server said 401: no second try.
  c = choose_credential(url, a, "", GIT_CREDENTIAL_USERPASS_PLAINTEXT, 1);
  EXPECT_EQ(c.what, credential_choice::fail);
  EXPECT_TRUE(has(c.error,
                  "gitfs remote https://h/x.git: the server refused user 'alice' with "
                  "the password given; fix gitfs_user (or the remote's user) and "
                  "gitfs_password (or the remote's password)"))
      << c.error;
  EXPECT_FALSE(has(c.error, "hunter2")) << c.error;
  // No credentials set: say which to set.
  c = choose_credential(url, {}, "", GIT_CREDENTIAL_USERPASS_PLAINTEXT, 0);
  EXPECT_EQ(c.what, credential_choice::fail);
  EXPECT_TRUE(has(c.error, "asks for a user and password and none is set; set gitfs_user"))
      << c.error;
  // A server that wants something else.
  c = choose_credential(url, a, "", GIT_CREDENTIAL_SSH_KEY, 0);
  EXPECT_EQ(c.what, credential_choice::fail);
}

TEST(GitfsAuth, TheCallbackGivesTheSshKeyOnce) {
  gitfs_auth a{.pubkey = "/k.pub", .privkey = "/k", .passphrase = "open sesame"};
  auto c = choose_credential("git@h:x.git", a, "git", GIT_CREDENTIAL_SSH_KEY, 0);
  EXPECT_EQ(c.what, credential_choice::ssh_key);
  EXPECT_EQ(c.user, "git");
  c = choose_credential("ssh://deploy@h/x.git", a, "", GIT_CREDENTIAL_USERNAME, 0);
  EXPECT_EQ(c.what, credential_choice::username);
  EXPECT_EQ(c.user, "deploy");
  c = choose_credential("git@h:x.git", a, "git", GIT_CREDENTIAL_SSH_KEY, 1);
  EXPECT_EQ(c.what, credential_choice::fail);
  EXPECT_TRUE(has(c.error, "the server refused the SSH key /k for user 'git'")) << c.error;
  EXPECT_TRUE(has(c.error, "gitfs_passphrase (or the remote's passphrase)")) << c.error;
  EXPECT_FALSE(has(c.error, "open sesame")) << c.error;
  c = choose_credential("git@h:x.git", {}, "git", GIT_CREDENTIAL_SSH_KEY, 0);
  EXPECT_EQ(c.what, credential_choice::fail);
  EXPECT_TRUE(has(c.error, "set gitfs_pubkey (or the remote's pubkey) and gitfs_privkey"))
      << c.error;
}

}  // namespace
}  // namespace brine::fileserver
