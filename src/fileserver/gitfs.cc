#include "fileserver/gitfs.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "fileserver/git2.h"
#include "fileserver/roots.h"

namespace brine::fileserver {
namespace {

namespace fs = std::filesystem;

// How many symlinks one path may pass through (the kernel's ELOOP limit is
// 40; a served tree needs few).
constexpr int k_max_links = 8;

using git2::blob_ptr;
using git2::commit_ptr;
using git2::entry_ptr;
using git2::G;
using git2::last_error;
using git2::object_ptr;
using git2::oid_hex;
using git2::ref_ptr;
using git2::remote_ptr;
using git2::repo_ptr;
using git2::tree_ptr;

// "a/b" + "../c" -> "a/c"; nullopt when it climbs above the top.
std::optional<std::string> join_inside(const std::string& dir, const std::string& target) {
  std::vector<std::string> parts;
  auto push = [&](std::string_view text) {
    size_t at = 0;
    while (at <= text.size()) {
      size_t slash = text.find('/', at);
      std::string_view part = text.substr(at, slash == std::string_view::npos ? slash : slash - at);
      if (part == "..") {
        if (parts.empty()) return false;
        parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.emplace_back(part);
      }
      if (slash == std::string_view::npos) break;
      at = slash + 1;
    }
    return true;
  };
  if (!push(dir) || !push(target)) return std::nullopt;
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "/") + p;
  return out;
}

std::string dir_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// A bare repository (a clone of one remote) and the lock that its libgit2
// handle needs: a git_repository is not safe to use from two threads at once.
// Fetching uses a handle of its own, so that reads go on meanwhile (the
// object database finds the objects a fetch added by itself).
struct clone {
  std::string url;
  std::string dir;
  gitfs_auth auth;
  std::mutex read_mu;
  repo_ptr read_repo;
  std::mutex fetch_mu;
};

// A served file: which clone holds it and its blob.
struct file_ref {
  entry e;
  git_oid blob{};
  clone* from = nullptr;
};

// Everything served at one set of pins.
struct snapshot {
  std::vector<gitfs_pin> pins;
  std::map<std::string, std::shared_ptr<const manifest>> manifests;
  std::map<std::string, std::unordered_map<std::string, file_ref>> files;
};

}  // namespace

struct gitfs::state {
  std::string cachedir;
  std::map<std::string, std::unique_ptr<clone>> clones;  // by URL
  std::mutex swap_mu;                                    // one apply() at a time
  std::shared_ptr<const snapshot> current = std::make_shared<snapshot>();
  mutable std::mutex current_mu;
  std::mutex hash_mu;
  std::unordered_map<std::string, std::pair<std::string, uint64_t>> hashes;  // blob -> sha256, size

  std::shared_ptr<const snapshot> now() const {
    std::lock_guard lock(current_mu);
    return current;
  }

  // Opens (creating) the bare clone; the caller holds the lock of `h`.
  void open(clone& c, repo_ptr& h) {
    if (h.get() != nullptr) return;
    std::error_code ec;
    fs::create_directories(c.dir, ec);
    ::chmod(fs::path(c.dir).parent_path().c_str(), 0700);
    if (G->git_repository_open_bare(h.out(), c.dir.c_str()) == 0) return;
    if (G->git_repository_init(h.out(), c.dir.c_str(), 1) != 0) {
      throw base::error("gitfs remote " + c.url + ": cannot create its clone " + c.dir + ": " +
                        last_error() + "; check that the master's user may write its cachedir");
    }
  }

  // Fetches every branch and tag of `c`; returns the remote's ref names
  // (refs/heads/*, refs/tags/*) as it advertised them, so that branches
  // deleted there are not served. Throws base::error naming the remote.
  std::set<std::string> fetch_clone(clone& c) {
    std::lock_guard lock(c.fetch_mu);
    repo_ptr repo;
    open(c, repo);
    remote_ptr remote;
    if (G->git_remote_create_anonymous(remote.out(), repo.get(), c.url.c_str()) != 0) {
      throw base::error("gitfs remote " + c.url + ": not a git URL or path (" + last_error() +
                        "); fix its entry in gitfs_remotes");
    }
    const char* specs[] = {"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"};
    git_strarray refspecs{const_cast<char**>(specs), 2};
    git_fetch_options opts = GIT_FETCH_OPTIONS_INIT;
    opts.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;  // the refspec has them
    credential_state credentials{c.url, c.auth};
    opts.callbacks.credentials = acquire_credential;
    opts.callbacks.payload = &credentials;
    if (G->git_remote_fetch(remote.get(), &refspecs, &opts, "brine gitfs fetch") != 0) {
      // The callback's own message names the option to fix.
      if (!credentials.error.empty()) throw base::error(credentials.error);
      throw base::error("gitfs remote " + c.url + ": cannot fetch: " + last_error() +
                        "; check the URL in gitfs_remotes and that this master can reach it");
    }
    const git_remote_head** heads = nullptr;
    size_t n = 0;
    std::set<std::string> names;
    if (G->git_remote_ls(&heads, &n, remote.get()) == 0) {
      for (size_t i = 0; i < n; ++i) {
        std::string name = heads[i]->name;
        if (name.ends_with("^{}")) continue;
        if (name.starts_with("refs/heads/") || name.starts_with("refs/tags/")) names.insert(name);
      }
    }
    return names;
  }

  bool has_commit(clone& c, const std::string& hex) {
    git_oid oid;
    if (G->git_oid_fromstr(&oid, hex.c_str()) != 0) return false;
    std::lock_guard lock(c.read_mu);
    open(c, c.read_repo);
    commit_ptr commit;
    return G->git_commit_lookup(commit.out(), c.read_repo.get(), &oid) == 0;
  }

  std::pair<std::string, uint64_t> blob_hash(clone& c, const git_oid& oid) {
    std::string key = oid_hex(&oid);
    {
      std::lock_guard lock(hash_mu);
      auto it = hashes.find(key);
      if (it != hashes.end()) return it->second;
    }
    blob_ptr blob;
    if (G->git_blob_lookup(blob.out(), c.read_repo.get(), &oid) != 0) {
      throw base::error("gitfs remote " + c.url + ": blob " + key + " is missing from " + c.dir +
                        " (" + last_error() + "); delete that directory to clone again");
    }
    auto size = static_cast<uint64_t>(G->git_blob_rawsize(blob.get()));
    std::string_view bytes(static_cast<const char*>(G->git_blob_rawcontent(blob.get())), size);
    std::pair<std::string, uint64_t> out{hash_bytes(bytes), size};
    std::lock_guard lock(hash_mu);
    hashes.emplace(key, out);
    return out;
  }
};

checked_path gitfs_subdir(std::string_view raw) {
  if (raw.starts_with("salt://")) raw.remove_prefix(7);
  while (!raw.empty() && raw.back() == '/') raw.remove_suffix(1);
  return check_path(raw, true);
}

std::string gitfs::clone_dir(const std::string& cachedir, const std::string& url) {
  return cachedir + "/gitfs/" + hash_bytes(url).substr(0, 32);
}

gitfs::gitfs(std::vector<gitfs_remote> remotes, std::string cachedir)
    : remotes_(std::move(remotes)), s_(std::make_unique<state>()) {
  git2::load();
  s_->cachedir = std::move(cachedir);
  for (auto& r : remotes_) {
    if (r.url.empty())
      throw base::error("gitfs_remotes: an entry has no URL; give each a URL or path");
    auto root = gitfs_subdir(r.root);
    if (!root.error.empty()) {
      throw base::error("gitfs_remotes " + r.url + ": root '" + r.root + "' " + root.error +
                        "; give a directory inside the repository");
    }
    r.root = root.path;
    auto mount = gitfs_subdir(r.mountpoint);
    if (!mount.error.empty()) {
      throw base::error("gitfs_remotes " + r.url + ": mountpoint '" + r.mountpoint + "' " +
                        mount.error + "; give a relative path such as salt://formulas/x");
    }
    r.mountpoint = mount.path;
    if (r.base.empty()) r.base = "master";
    if (auto why = check_auth(r.url, r.auth); !why.empty()) throw base::error(why);
    auto& c = s_->clones[r.url];
    if (!c) {
      c = std::make_unique<clone>();
      c->url = r.url;
      c->dir = clone_dir(s_->cachedir, r.url);
      c->auth = r.auth;
    } else if (!(c->auth == r.auth)) {
      // One clone per URL, fetched with one set of credentials.
      throw base::error("gitfs_remotes " + r.url +
                        ": listed twice with different credentials; give every entry of one "
                        "URL the same user, password, pubkey, privkey and passphrase");
    }
  }
}

gitfs::~gitfs() = default;

gitfs::fetched gitfs::fetch() {
  fetched out;
  for (auto& [url, c] : s_->clones) {
    std::set<std::string> names;
    try {
      names = s_->fetch_clone(*c);
    } catch (const std::exception& e) {
      out.errors.push_back(e.what());
      continue;
    }
    // Every gitfs_remotes entry of this URL may name its own base branch.
    std::set<std::string> bases;
    for (const auto& r : remotes_) {
      if (r.url == url) bases.insert(r.base);
    }
    std::lock_guard lock(c->read_mu);
    s_->open(*c, c->read_repo);
    std::map<std::string, std::pair<int, gitfs_pin>> by_env;
    for (const auto& name : names) {
      bool branch = name.starts_with("refs/heads/");
      std::string short_name = name.substr(branch ? 11 : 10);
      ref_ptr ref;
      object_ptr commit;
      if (G->git_reference_lookup(ref.out(), c->read_repo.get(), name.c_str()) != 0 ||
          G->git_reference_peel(commit.out(), ref.get(), GIT_OBJECT_COMMIT) != 0) {
        continue;  // a tag of a tree or blob: no saltenv
      }
      std::string env = branch && bases.contains(short_name) ? "base" : short_name;
      if (!valid_saltenv(env)) continue;
      // The base branch wins over a branch or tag named "base", a branch
      // over a tag of the same name.
      int rank = env == "base" && branch && bases.contains(short_name) ? 3 : branch ? 2 : 1;
      auto it = by_env.find(env);
      if (it == by_env.end() || it->second.first < rank) {
        by_env[env] = {rank, gitfs_pin{url, env, name, oid_hex(G->git_object_id(commit.get()))}};
      }
    }
    if (!by_env.contains("base")) {
      std::string have;
      for (const auto& name : names) {
        if (name.starts_with("refs/heads/")) have += (have.empty() ? "" : ", ") + name.substr(11);
      }
      out.errors.push_back("gitfs remote " + url + ": branch '" + *bases.begin() +
                           "' (gitfs_base) not found, so saltenv base has nothing from it; set "
                           "gitfs_base or the remote's base to one of its branches (" +
                           (have.empty() ? "it has none" : have) + ")");
    }
    for (auto& [env, ranked] : by_env) out.pins.push_back(std::move(ranked.second));
    out.remotes.push_back(url);
  }
  return out;
}

std::vector<gitfs_pin> gitfs::pins() const { return s_->now()->pins; }

std::vector<std::string> gitfs::apply(const std::vector<gitfs_pin>& pins) {
  std::lock_guard swap(s_->swap_mu);
  auto old = s_->now();
  std::vector<std::string> problems;
  std::map<std::string, std::vector<gitfs_pin>> wanted;  // by URL
  for (const auto& p : pins) {
    if (s_->clones.contains(p.remote)) wanted[p.remote].push_back(p);
  }
  // Each remote's pins: the new ones when every commit is here (fetched if
  // need be), else the ones served until now.
  std::vector<gitfs_pin> chosen;
  for (auto& [key, owned] : s_->clones) {
    const std::string& url = key;
    clone& c = *owned;
    auto it = wanted.find(url);
    if (it == wanted.end()) continue;
    auto missing = [&] {
      for (const auto& p : it->second) {
        if (!s_->has_commit(c, p.commit)) return p;
      }
      return gitfs_pin{};
    };
    auto lacking = missing();
    std::string why;
    if (!lacking.commit.empty()) {
      try {
        s_->fetch_clone(c);
        lacking = missing();
        if (!lacking.commit.empty()) why = "the remote no longer has it";
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (lacking.commit.empty()) {
      chosen.insert(chosen.end(), it->second.begin(), it->second.end());
      continue;
    }
    problems.push_back("gitfs remote " + url + ": cannot serve the pinned commit " +
                       lacking.commit + " of saltenv " + lacking.saltenv + " (" + why +
                       "); this master keeps serving its current revision; make the remote "
                       "reachable from it, or run `brine fileserver update` to pin what the "
                       "remote has now");
    for (const auto& p : old->pins) {
      if (p.remote == url) chosen.push_back(p);
    }
  }

  auto next = std::make_shared<snapshot>();
  next->pins = chosen;
  // saltenv -> files by path, remotes in order (the first has a path).
  std::map<std::string, std::map<std::string, entry>> env_files;
  std::map<std::string, std::set<std::string>> env_dirs;
  for (const auto& r : remotes_) {
    clone& c = *s_->clones.at(r.url);
    std::lock_guard lock(c.read_mu);
    s_->open(c, c.read_repo);
    git_repository* repo = c.read_repo.get();
    for (const auto& p : chosen) {
      if (p.remote != r.url) continue;
      git_oid oid;
      commit_ptr commit;
      tree_ptr top;
      if (G->git_oid_fromstr(&oid, p.commit.c_str()) != 0 ||
          G->git_commit_lookup(commit.out(), repo, &oid) != 0 ||
          G->git_commit_tree(top.out(), commit.get()) != 0) {
        problems.push_back("gitfs remote " + r.url + ": commit " + p.commit + " cannot be read (" +
                           last_error() + ")");
        continue;
      }
      tree_ptr root_tree;
      if (r.root.empty()) {
        G->git_tree_dup(root_tree.out(), top.get());
      } else {
        entry_ptr e;
        if (G->git_tree_entry_bypath(e.out(), top.get(), r.root.c_str()) != 0 ||
            G->git_tree_entry_type(e.get()) != GIT_OBJECT_TREE ||
            G->git_tree_lookup(root_tree.out(), repo, G->git_tree_entry_id(e.get())) != 0) {
          continue;  // no such directory at this commit: nothing served from it
        }
      }
      auto& files = env_files[p.saltenv];
      auto& dirs = env_dirs[p.saltenv];
      auto& refs = next->files[p.saltenv];
      std::string mount = r.mountpoint;
      // Walks `tree` (at `rel` inside the root), following symlinks inside
      // the root up to k_max_links deep.
      auto add_file = [&](const std::string& rel, const git_oid& blob, git_filemode_t mode) {
        std::string path = mount.empty() ? rel : mount + "/" + rel;
        if (!check_path(path).error.empty() || files.contains(path)) return;
        auto [hash, size] = s_->blob_hash(c, blob);
        entry e{path, hash, size, mode == GIT_FILEMODE_BLOB_EXECUTABLE ? 0755u : 0644u};
        files.emplace(path, e);
        refs.emplace(path, file_ref{e, blob, &c});
      };
      std::function<void(git_tree*, const std::string&, int)> walk;
      walk = [&](git_tree* tree, const std::string& rel, int links) {
        size_t n = G->git_tree_entrycount(tree);
        for (size_t i = 0; i < n; ++i) {
          const git_tree_entry* e = G->git_tree_entry_byindex(tree, i);
          std::string child = (rel.empty() ? "" : rel + "/") + G->git_tree_entry_name(e);
          git_filemode_t mode = G->git_tree_entry_filemode(e);
          const git_oid* id = G->git_tree_entry_id(e);
          if (mode == GIT_FILEMODE_LINK) {
            // Resolve inside the root: its target's entry, then that one's.
            std::string at = child;
            int hops = links;
            git_oid target_id = *id;
            for (;;) {
              if (++hops > k_max_links) break;
              blob_ptr link;
              if (G->git_blob_lookup(link.out(), repo, &target_id) != 0) break;
              std::string target(static_cast<const char*>(G->git_blob_rawcontent(link.get())),
                                 static_cast<size_t>(G->git_blob_rawsize(link.get())));
              if (target.empty() || target.front() == '/') break;  // absolute: not served
              auto resolved = join_inside(dir_of(at), target);
              if (!resolved || resolved->empty()) break;  // leaves the root
              entry_ptr te;
              if (G->git_tree_entry_bypath(te.out(), root_tree.get(), resolved->c_str()) != 0)
                break;
              git_filemode_t tmode = G->git_tree_entry_filemode(te.get());
              if (tmode == GIT_FILEMODE_LINK) {
                at = *resolved;
                target_id = *G->git_tree_entry_id(te.get());
                continue;
              }
              if (tmode == GIT_FILEMODE_TREE) {
                // A link to a directory that holds it would be walked
                // forever: not followed.
                if (child.starts_with(*resolved + "/")) break;
                tree_ptr sub;
                if (G->git_tree_lookup(sub.out(), repo, G->git_tree_entry_id(te.get())) == 0) {
                  if (check_path(child).error.empty()) {
                    dirs.insert(mount.empty() ? child : mount + "/" + child);
                  }
                  walk(sub.get(), child, hops);
                }
              } else if (tmode == GIT_FILEMODE_BLOB || tmode == GIT_FILEMODE_BLOB_EXECUTABLE) {
                add_file(child, *G->git_tree_entry_id(te.get()), tmode);
              }
              break;
            }
          } else if (mode == GIT_FILEMODE_TREE) {
            tree_ptr sub;
            if (G->git_tree_lookup(sub.out(), repo, id) != 0) continue;
            if (check_path(child).error.empty()) {
              dirs.insert(mount.empty() ? child : mount + "/" + child);
            }
            walk(sub.get(), child, links);
          } else if (mode == GIT_FILEMODE_BLOB || mode == GIT_FILEMODE_BLOB_EXECUTABLE) {
            add_file(child, *id, mode);
          }
          // GIT_FILEMODE_COMMIT: a submodule, not served (as Salt's gitfs).
        }
      };
      try {
        walk(root_tree.get(), "", 0);
      } catch (const std::exception& e) {
        problems.push_back(e.what());
      }
    }
  }
  for (auto& [env, files] : env_files) {
    next->manifests[env] = make_manifest(env, std::move(files), std::move(env_dirs[env]));
  }
  std::lock_guard lock(s_->current_mu);
  s_->current = std::move(next);
  return problems;
}

std::vector<std::string> gitfs::envs() {
  std::vector<std::string> out;
  for (const auto& [env, m] : s_->now()->manifests) out.push_back(env);
  return out;
}

std::shared_ptr<const manifest> gitfs::list(const std::string& saltenv) {
  auto snap = s_->now();
  auto it = snap->manifests.find(saltenv);
  if (it != snap->manifests.end()) return it->second;
  return make_manifest(saltenv, {}, {});
}

file_chunk gitfs::read(const std::string& saltenv, const std::string& path, uint64_t offset,
                       uint64_t max_bytes) {
  file_chunk out;
  auto snap = s_->now();
  auto env = snap->files.find(saltenv);
  const file_ref* f = nullptr;
  if (env != snap->files.end()) {
    auto it = env->second.find(path);
    if (it != env->second.end()) f = &it->second;
  }
  if (f == nullptr) {
    out.error = "no such file in saltenv " + saltenv;
    return out;
  }
  std::lock_guard lock(f->from->read_mu);
  blob_ptr blob;
  if (G->git_blob_lookup(blob.out(), f->from->read_repo.get(), &f->blob) != 0) {
    out.error = "cannot be read";
    return out;
  }
  out.hash = f->e.hash;
  out.size = static_cast<uint64_t>(G->git_blob_rawsize(blob.get()));
  out.mode = f->e.mode;
  if (offset > out.size) offset = out.size;
  uint64_t n = std::min<uint64_t>(max_bytes, out.size - offset);
  out.data.assign(static_cast<const char*>(G->git_blob_rawcontent(blob.get())) + offset, n);
  return out;
}

}  // namespace brine::fileserver

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRINE_GITFS_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(BRINE_GITFS_ASAN)
// Debian 12's PCRE2 (10.42) leaks the heap frames of every regexec() that
// libgit2 runs on its config (fixed upstream in 10.43); LeakSanitizer would
// fail every sanitized process that fetched. Only that library's leaks are
// ignored. (The hook is weak in the sanitizer runtime; this object is linked
// into every program that uses gitfs.)
extern "C" const char* __lsan_default_suppressions() { return "leak:libpcre2-8.so\n"; }
#endif
