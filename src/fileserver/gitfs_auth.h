#pragma once

#include <git2.h>

#include <string>
#include <string_view>

// Credentials for private gitfs remotes, with Salt's rules (its
// verify_auth): HTTP(S) basic auth from user and password, SSH from a key
// pair. Internal to brine_gitfs, and pure but for acquire_credential.
namespace brine::fileserver {

// One remote's credentials: Salt's gitfs_user, gitfs_password,
// gitfs_insecure_auth, gitfs_pubkey, gitfs_privkey and gitfs_passphrase, or
// the remote's own user, password, ... An empty string is unset (as in Salt).
// The password and the passphrase are never put in a message.
struct gitfs_auth {
  std::string user;
  std::string password;
  bool insecure_auth = false;  // a password over plain http:// is allowed
  std::string pubkey;          // paths of the SSH key pair
  std::string privkey;
  std::string passphrase;  // of privkey
  bool operator==(const gitfs_auth&) const = default;
};

// How libgit2 reaches a remote, read as Salt reads it: by the URL's scheme;
// an absolute path is local; `[user@]host:path` (a ':' before any '/') is
// SSH; any other text is a (relative) local path.
enum class git_transport { local, file, git, ssh, http, https, other };
git_transport transport_of(std::string_view url);

// The user an SSH URL names (`git` of git@host:path or
// ssh://git@host/path); "" when it names none.
std::string ssh_user(std::string_view url);

// Salt's checks of a remote's credentials before any fetch: user and
// password go together, pubkey and privkey go together, a password over
// plain http needs insecure_auth, a key needs a user in the URL and its
// files must exist. "" when `auth` fits `url`, else the message (naming the
// remote, the option and the fix). Credentials of a kind the transport does
// not use (a password for an SSH remote, anything for a local path, file://
// or git://) are ignored.
std::string check_auth(const std::string& url, const gitfs_auth& auth);

// What to answer libgit2's credential callback with.
struct credential_choice {
  enum kind { userpass, ssh_key, username, fail } what = fail;
  std::string user;
  std::string error;  // for fail: names the remote and the option to fix
};
// The answer to a request for one of `allowed` (GIT_CREDENTIAL_* bits) when
// `answered` credentials were given already in this fetch. libgit2 asks
// again after the server refused what it was given; the second time is a
// failure that names the option to fix, so that wrong credentials never
// loop.
credential_choice choose_credential(const std::string& url, const gitfs_auth& auth,
                                    std::string_view username_from_url, unsigned allowed,
                                    int answered);

// The state of one fetch's credential callback (its payload).
struct credential_state {
  const std::string& url;
  const gitfs_auth& auth;
  int answered = 0;
  std::string error;  // set when the callback failed: the message to show
};
// A git_credential_acquire_cb over a credential_state.
int acquire_credential(git_credential** out, const char* url, const char* username_from_url,
                       unsigned int allowed_types, void* payload);

}  // namespace brine::fileserver
