#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fileserver/backend.h"
#include "fileserver/gitfs_auth.h"
#include "fileserver/path.h"

// Salt's gitfs: salt:// served from git remotes, at commits pinned by the
// caller (the master pins them in its store, so that every master of a
// store serves the same bytes).
namespace brine::fileserver {

// One entry of `gitfs_remotes`, with its per-remote options (or the global
// gitfs_root, gitfs_mountpoint, gitfs_base, and the gitfs_* credentials).
struct gitfs_remote {
  std::string url;              // a URL libgit2 fetches (https://, ssh://, file://) or a local path
  std::string root;             // the repository's directory served ("" = its top)
  std::string mountpoint;       // where its files appear under salt:// ("" = the top)
  std::string base = "master";  // the branch served as saltenv base
  gitfs_auth auth;              // for a private remote (see gitfs_auth.h)
};

// The commit a remote serves for one saltenv: what the store keeps.
struct gitfs_pin {
  std::string remote;   // the remote's URL
  std::string saltenv;  // a branch or tag name; gitfs_base's branch is "base"
  std::string ref;      // refs/heads/NAME or refs/tags/NAME
  std::string commit;   // 40 hex digits
  bool operator==(const gitfs_pin&) const = default;
};

// Branches and tags are saltenvs (the base branch is `base`); a remote's
// `root` directory is served under its `mountpoint`; with several remotes a
// path is served from the first remote (in order) that has it in the
// saltenv. Files are read from the pinned commit's tree in a bare clone per
// remote (<cachedir>/gitfs/<SHA-256 of the URL>), never checked out. A
// symlink is followed inside the served tree (as roots follows one inside
// its root); one that leads out of it, or is absolute, is not served. Paths
// that check_path refuses and submodules are left out.
//
// Everything served comes from one immutable snapshot of every remote's
// pins, replaced by one pointer swap in apply(): a listing and the reads
// after it never mix two revisions of a remote unless a swap came between
// (then the file's hash differs from the listing's and the minion says so).
//
// Threading: every method is safe from any thread. fetch() and apply() do
// network and disk I/O, list() and read() disk I/O: off I/O threads.
class gitfs final : public backend {
 public:
  // Throws base::error for a remote that no git URL or path could be (an
  // empty one, a mountpoint or root with `..`), naming gitfs_remotes, and
  // for credentials Salt would refuse (check_auth), naming the option.
  gitfs(std::vector<gitfs_remote> remotes, std::string cachedir);
  ~gitfs() override;
  gitfs(const gitfs&) = delete;
  gitfs& operator=(const gitfs&) = delete;

  struct fetched {
    std::vector<gitfs_pin> pins;       // every branch and tag of the remotes fetched
    std::vector<std::string> errors;   // one per remote that could not be fetched, with the fix
    std::vector<std::string> remotes;  // the URLs fetched (their pins are complete)
  };
  // Fetches every remote into its bare clone and resolves its branches and
  // tags to commits: the pins `brine fileserver update` writes.
  fetched fetch();

  // Serves `pins` from now on, in one swap. A remote whose pinned commits
  // this master lacks is fetched first; a remote that still lacks one keeps
  // serving what it served (its pins are left as they were). Returns one
  // message per such remote, naming it and the fix. Remotes with no pin at
  // all serve nothing.
  std::vector<std::string> apply(const std::vector<gitfs_pin>& pins);

  // The pins served now.
  std::vector<gitfs_pin> pins() const;
  const std::vector<gitfs_remote>& remotes() const { return remotes_; }

  std::vector<std::string> envs() override;
  std::shared_ptr<const manifest> list(const std::string& saltenv) override;
  file_chunk read(const std::string& saltenv, const std::string& path, uint64_t offset,
                  uint64_t max_bytes) override;

  // The cache directory of a remote's bare clone under `cachedir`.
  static std::string clone_dir(const std::string& cachedir, const std::string& url);

 private:
  struct state;
  std::vector<gitfs_remote> remotes_;
  std::unique_ptr<state> s_;
};

// A gitfs_mountpoint or gitfs_root as a relative path ("salt://" and
// leading or trailing '/' dropped); `error` when it could leave the tree.
checked_path gitfs_subdir(std::string_view raw);

}  // namespace brine::fileserver
