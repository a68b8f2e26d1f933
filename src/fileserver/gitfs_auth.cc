#include "fileserver/gitfs_auth.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "fileserver/git2.h"

namespace brine::fileserver {
namespace {

// "gitfs_NAME (or the remote's NAME)": a credential may come from either.
std::string option(const std::string& name) {
  return "gitfs_" + name + " (or the remote's " + name + ")";
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace

git_transport transport_of(std::string_view url) {
  if (auto end = url.find("://"); end != std::string_view::npos) {
    std::string scheme = lower(url.substr(0, end));
    if (scheme == "file") return git_transport::file;
    if (scheme == "git") return git_transport::git;
    if (scheme == "http") return git_transport::http;
    if (scheme == "https") return git_transport::https;
    if (scheme == "ssh" || scheme == "ssh+git" || scheme == "git+ssh") return git_transport::ssh;
    return git_transport::other;
  }
  if (url.starts_with('/')) return git_transport::local;
  auto colon = url.find(':');
  auto slash = url.find('/');
  if (colon != std::string_view::npos && (slash == std::string_view::npos || colon < slash)) {
    return git_transport::ssh;  // scp-like: [user@]host:path
  }
  return git_transport::local;
}

std::string ssh_user(std::string_view url) {
  std::string_view host_part;
  if (auto end = url.find("://"); end != std::string_view::npos) {
    host_part = url.substr(end + 3);
    host_part = host_part.substr(0, host_part.find('/'));
  } else {
    host_part = url.substr(0, url.find(':'));
  }
  auto at = host_part.rfind('@');
  if (at == std::string_view::npos) return "";
  std::string_view user = host_part.substr(0, at);
  return std::string(user.substr(0, user.find(':')));
}

std::string check_auth(const std::string& url, const gitfs_auth& a) {
  std::string who = "gitfs_remotes " + url + ": ";
  switch (transport_of(url)) {
    case git_transport::http:
    case git_transport::https: {
      bool user = !a.user.empty();
      bool password = !a.password.empty();
      if (!user && !password) return "";
      if (!user) return who + "a password is set but no user; set " + option("user") + " too";
      if (!password) {
        return who + "user '" + a.user + "' is set but no password; set " + option("password") +
               " too, or remove the user";
      }
      if (transport_of(url) == git_transport::http && !a.insecure_auth) {
        return who +
               "a password over plain http:// is refused, as anyone on the way could read it; "
               "use an https:// URL, or set " +
               option("insecure_auth") + " to true to send it anyway";
      }
      return "";
    }
    case git_transport::ssh: {
      bool pub = !a.pubkey.empty();
      bool priv = !a.privkey.empty();
      if (!pub && !priv && a.passphrase.empty()) return "";
      if (!pub || !priv) {
        std::string missing = pub ? "privkey" : "pubkey";
        return who + "an SSH key needs both files; set " + option(missing) + " too";
      }
      if (ssh_user(url).empty()) {
        return who +
               "an SSH key is set but the URL names no user; write the user in it "
               "(ssh://git@host/path or git@host:path)";
      }
      for (const auto& [name, path] : {std::pair{"pubkey", &a.pubkey}, {"privkey", &a.privkey}}) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(*path, ec)) {
          return who + option(name) + " " + *path + " is not a file; give the path of the " +
                 (std::string(name) == "pubkey" ? "public" : "private") + " key";
        }
      }
      return "";
    }
    case git_transport::other:
      if (a.user.empty() && a.password.empty() && a.pubkey.empty() && a.privkey.empty()) return "";
      return who +
             "credentials are set but this URL's scheme takes none that brine gives; use an "
             "https://, http:// or ssh:// URL";
    default:
      return "";  // local paths, file:// and git:// take no credentials
  }
}

credential_choice choose_credential(const std::string& url, const gitfs_auth& auth,
                                    std::string_view username_from_url, unsigned allowed,
                                    int answered) {
  credential_choice c;
  std::string who = "gitfs remote " + url + ": ";
  auto fail = [&](std::string why) {
    c.what = credential_choice::fail;
    c.error = who + why;
    return c;
  };
  git_transport t = transport_of(url);
  if (t == git_transport::ssh) {
    c.user = username_from_url.empty() ? ssh_user(url) : std::string(username_from_url);
    if ((allowed & GIT_CREDENTIAL_SSH_KEY) == 0 && (allowed & GIT_CREDENTIAL_USERNAME) != 0) {
      if (c.user.empty())
        return fail("the server asks for a user; write it in the URL (git@host:path)");
      c.what = credential_choice::username;
      return c;
    }
    if (auth.pubkey.empty() || auth.privkey.empty()) {
      return fail("the server asks for an SSH key and none is set; set " + option("pubkey") +
                  " and " + option("privkey"));
    }
    if ((allowed & GIT_CREDENTIAL_SSH_KEY) == 0) {
      return fail("the server takes no SSH key; check the URL in gitfs_remotes");
    }
    if (answered > 0) {
      return fail("the server refused the SSH key " + auth.privkey + " for user '" + c.user +
                  "'; check that its public key is authorised there, and " + option("privkey") +
                  ", " + option("pubkey") + " and " + option("passphrase"));
    }
    c.what = credential_choice::ssh_key;
    return c;
  }
  if (auth.user.empty() || auth.password.empty()) {
    return fail("the server asks for a user and password and none is set; set " + option("user") +
                " and " + option("password"));
  }
  if (t == git_transport::http && !auth.insecure_auth) {
    return fail("a password over plain http:// is refused; use an https:// URL, or set " +
                option("insecure_auth") + " to true");
  }
  if ((allowed & GIT_CREDENTIAL_USERPASS_PLAINTEXT) == 0) {
    return fail("the server takes no user and password; check the URL in gitfs_remotes");
  }
  if (answered > 0) {
    return fail("the server refused user '" + auth.user + "' with the password given; fix " +
                option("user") + " and " + option("password"));
  }
  c.what = credential_choice::userpass;
  c.user = auth.user;
  return c;
}

int acquire_credential(git_credential** out, const char* /*url*/, const char* username_from_url,
                       unsigned int allowed_types, void* payload) {
  auto& s = *static_cast<credential_state*>(payload);
  try {
    auto c = choose_credential(s.url, s.auth, username_from_url ? username_from_url : "",
                               allowed_types, s.answered);
    const auto* G = git2::G;
    int rc = -1;
    switch (c.what) {
      case credential_choice::userpass:
        ++s.answered;
        rc = G->git_credential_userpass_plaintext_new(out, c.user.c_str(), s.auth.password.c_str());
        break;
      case credential_choice::ssh_key:
        ++s.answered;
        rc = G->git_credential_ssh_key_new(
            out, c.user.c_str(), s.auth.pubkey.c_str(), s.auth.privkey.c_str(),
            s.auth.passphrase.empty() ? nullptr : s.auth.passphrase.c_str());
        break;
      case credential_choice::username:
        rc = G->git_credential_username_new(out, c.user.c_str());
        break;
      case credential_choice::fail:
        s.error = std::move(c.error);
        return GIT_EAUTH;
    }
    if (rc != 0) {
      s.error =
          "gitfs remote " + s.url + ": cannot make its credentials (" + git2::last_error() + ")";
    }
    return rc;
  } catch (const std::exception& e) {
    s.error = "gitfs remote " + s.url + ": " + e.what();
    return -1;
  }
}

}  // namespace brine::fileserver
