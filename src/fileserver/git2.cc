#include "fileserver/git2.h"

#include <dlfcn.h>

#include "base/error.h"

namespace brine::fileserver::git2 {

namespace {
constexpr const char* k_libgit2 = "libgit2.so.1.5";
}  // namespace

const api* G = nullptr;

void load() {
  struct loaded {
    api functions;
    std::string error;
  };
  static const loaded lib = [] {
    loaded l;
    void* handle = ::dlopen(k_libgit2, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* e = ::dlerror();
      l.error = e ? e : std::string(k_libgit2) + ": cannot load";
      return l;
    }
#define BRINE_GIT2_RESOLVE(f)                                            \
  l.functions.f = reinterpret_cast<decltype(&::f)>(::dlsym(handle, #f)); \
  if (l.functions.f == nullptr && l.error.empty())                       \
    l.error = std::string(k_libgit2) +                                   \
              " has "                                                    \
              "no " #f;
    BRINE_GIT2_FUNCTIONS(BRINE_GIT2_RESOLVE)
#undef BRINE_GIT2_RESOLVE
    if (l.error.empty() && l.functions.git_libgit2_init() < 0) l.error = "git_libgit2_init failed";
    return l;
  }();
  if (!lib.error.empty()) {
    throw base::error(
        "gitfs: cannot load libgit2 (" + lib.error +
        "); install the libgit2-1.5 package, or remove gitfs from fileserver_backend");
  }
  G = &lib.functions;
}

std::string last_error() {
  const git_error* e = G->git_error_last();
  return e != nullptr && e->message != nullptr ? e->message : "unknown libgit2 error";
}

void release(git_repository* p) { G->git_repository_free(p); }
void release(git_remote* p) { G->git_remote_free(p); }
void release(git_commit* p) { G->git_commit_free(p); }
void release(git_tree* p) { G->git_tree_free(p); }
void release(git_tree_entry* p) { G->git_tree_entry_free(p); }
void release(git_blob* p) { G->git_blob_free(p); }
void release(git_object* p) { G->git_object_free(p); }
void release(git_reference* p) { G->git_reference_free(p); }

std::string oid_hex(const git_oid* oid) {
  char buf[GIT_OID_HEXSZ + 1] = {};
  G->git_oid_tostr(buf, sizeof buf, oid);
  return buf;
}

}  // namespace brine::fileserver::git2
