#pragma once

// Internal to brine_gitfs: libgit2, loaded at run time (dlopen), and owned
// handles to its objects.

#include <git2.h>

#include <string>

namespace brine::fileserver::git2 {

// libgit2 is loaded at run time (dlopen), as libpq is (pq/libpq.h): a
// brine process that serves no gitfs (every CLI command, most masters)
// maps neither it nor its libraries (mbedTLS, libssh2, Kerberos' GSSAPI),
// and Debian has no static libgit2 for BRINE_STATIC (its libgit2.a needs
// GSSAPI, which exists only shared). The soname is the one of the headers
// built against: libgit2 changes its ABI with every minor version.
// clang-format off
#define BRINE_GIT2_FUNCTIONS(X) \
  X(git_libgit2_init) X(git_error_last) X(git_repository_free) X(git_remote_free) \
  X(git_commit_free) X(git_tree_free) X(git_tree_entry_free) X(git_blob_free) \
  X(git_object_free) X(git_reference_free) X(git_oid_tostr) X(git_repository_open_bare) \
  X(git_repository_init) X(git_remote_create_anonymous) X(git_remote_fetch) X(git_remote_ls) \
  X(git_oid_fromstr) X(git_commit_lookup) X(git_blob_lookup) X(git_blob_rawsize) \
  X(git_blob_rawcontent) X(git_reference_lookup) X(git_reference_peel) X(git_object_id) \
  X(git_commit_tree) X(git_tree_dup) X(git_tree_entry_bypath) X(git_tree_entry_type) \
  X(git_tree_lookup) X(git_tree_entry_id) X(git_tree_entrycount) X(git_tree_entry_byindex) \
  X(git_tree_entry_name) X(git_tree_entry_filemode) X(git_credential_userpass_plaintext_new) \
  X(git_credential_ssh_key_new) X(git_credential_username_new)
// clang-format on

struct api {
#define BRINE_GIT2_MEMBER(f) decltype(&::f) f = nullptr;
  BRINE_GIT2_FUNCTIONS(BRINE_GIT2_MEMBER)
#undef BRINE_GIT2_MEMBER
};

// The loaded functions; null until load() succeeded.
extern const api* G;

// Loads libgit2 once per process (thread-safe) and sets G; throws
// base::error saying which package to install.
void load();

// libgit2's message for the last error on this thread.
std::string last_error();

void release(git_repository* p);
void release(git_remote* p);
void release(git_commit* p);
void release(git_tree* p);
void release(git_tree_entry* p);
void release(git_blob* p);
void release(git_object* p);
void release(git_reference* p);

// An owned libgit2 object, freed through the loaded library.
template <class T>
struct ptr {
  T* p = nullptr;
  ptr() = default;
  ptr(const ptr&) = delete;
  ptr& operator=(const ptr&) = delete;
  ~ptr() {
    if (p != nullptr) release(p);
  }
  T** out() { return &p; }
  T* get() const { return p; }
};
using repo_ptr = ptr<git_repository>;
using remote_ptr = ptr<git_remote>;
using commit_ptr = ptr<git_commit>;
using tree_ptr = ptr<git_tree>;
using entry_ptr = ptr<git_tree_entry>;
using blob_ptr = ptr<git_blob>;
using object_ptr = ptr<git_object>;
using ref_ptr = ptr<git_reference>;

std::string oid_hex(const git_oid* oid);

}  // namespace brine::fileserver::git2
