// The allocator of the brine executable: jemalloc for the daemons, glibc's
// malloc for client commands, chosen once per process from its command line.
//
// jemalloc pays off in a daemon (glibc's malloc, free and their chunk
// consolidation were a quarter of all CPU in a test.ping of 10,000 minions),
// but it sets up its arenas, caches and radix tree in every process that
// starts: 80 more pages touched than with glibc's malloc and 0.2-0.45 ms of
// CPU on the bench VM, about as much as a whole client command (`brine cmd`,
// `key`, `job`) may cost. glibc's malloc starts for next to nothing.
//
// src/app/CMakeLists.txt links jemalloc's archive with its malloc, free, ...
// and operator new/delete renamed to brine_je_* and its constructor (which
// would set jemalloc up in every process) dropped. The functions below take
// the standard names and send each call to one allocator or the other. The
// choice is made in .preinit_array, which the dynamic loader runs before any
// other initialiser of the process and so before the first allocation;
// should anything allocate before it all the same, that process stays with
// glibc (slower for a daemon, never wrong). A process never changes
// allocator, so every free() reaches the allocator that made the block.
//
// Threading: the choice is written once, before main and before any thread;
// afterwards it is only read.

#include <dlfcn.h>

#include <cerrno>
#include <cstddef>
#include <new>

#include "cli/cli.h"

extern "C" {

// jemalloc, renamed.
void* brine_je_malloc(std::size_t);
void brine_je_free(void*);
void* brine_je_calloc(std::size_t, std::size_t);
void* brine_je_realloc(void*, std::size_t);
int brine_je_posix_memalign(void**, std::size_t, std::size_t);
void* brine_je_aligned_alloc(std::size_t, std::size_t);
void* brine_je_memalign(std::size_t, std::size_t);
void* brine_je_valloc(std::size_t);
std::size_t brine_je_malloc_usable_size(void*);
void* brine_je__Znwm(std::size_t);
void* brine_je__Znam(std::size_t);
void* brine_je__ZnwmRKSt9nothrow_t(std::size_t, const std::nothrow_t&) noexcept;
void* brine_je__ZnamRKSt9nothrow_t(std::size_t, const std::nothrow_t&) noexcept;
void* brine_je__ZnwmSt11align_val_t(std::size_t, std::align_val_t);
void* brine_je__ZnamSt11align_val_t(std::size_t, std::align_val_t);
void* brine_je__ZnwmSt11align_val_tRKSt9nothrow_t(std::size_t, std::align_val_t,
                                                  const std::nothrow_t&) noexcept;
void* brine_je__ZnamSt11align_val_tRKSt9nothrow_t(std::size_t, std::align_val_t,
                                                  const std::nothrow_t&) noexcept;
void brine_je__ZdlPv(void*) noexcept;
void brine_je__ZdaPv(void*) noexcept;
void brine_je__ZdlPvRKSt9nothrow_t(void*, const std::nothrow_t&) noexcept;
void brine_je__ZdaPvRKSt9nothrow_t(void*, const std::nothrow_t&) noexcept;
void brine_je__ZdlPvm(void*, std::size_t) noexcept;
void brine_je__ZdaPvm(void*, std::size_t) noexcept;
void brine_je__ZdlPvSt11align_val_t(void*, std::align_val_t) noexcept;
void brine_je__ZdaPvSt11align_val_t(void*, std::align_val_t) noexcept;
void brine_je__ZdlPvSt11align_val_tRKSt9nothrow_t(void*, std::align_val_t,
                                                  const std::nothrow_t&) noexcept;
void brine_je__ZdaPvSt11align_val_tRKSt9nothrow_t(void*, std::align_val_t,
                                                  const std::nothrow_t&) noexcept;
void brine_je__ZdlPvmSt11align_val_t(void*, std::size_t, std::align_val_t) noexcept;
void brine_je__ZdaPvmSt11align_val_t(void*, std::size_t, std::align_val_t) noexcept;

// glibc's malloc under the second names libc.so exports for it.
void* __libc_malloc(std::size_t);
void __libc_free(void*);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* __libc_valloc(std::size_t);
}

namespace {

enum class allocator : unsigned char { undecided, glibc, jemalloc };

allocator chosen = allocator::undecided;

bool jemalloc() {
  if (chosen == allocator::undecided) [[unlikely]] {
    chosen = allocator::glibc;
  }
  return chosen == allocator::jemalloc;
}

void choose(int argc, char** argv, char**) {
  if (chosen != allocator::undecided) return;
  chosen = brine::cli::runs_daemon(argc, argv) ? allocator::jemalloc : allocator::glibc;
}

[[gnu::used, gnu::section(".preinit_array")]] void (*const choose_at_start)(int, char**,
                                                                            char**) = choose;

// What libstdc++'s operator new does, on glibc's malloc.
void* glibc_new(std::size_t size, std::size_t alignment) {
  for (;;) {
    void* p = alignment != 0 ? __libc_memalign(alignment, size) : __libc_malloc(size);
    if (p != nullptr) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* glibc_new_nothrow(std::size_t size, std::size_t alignment) noexcept {
  try {
    return glibc_new(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

std::size_t alignment_of(std::align_val_t a) { return static_cast<std::size_t>(a); }

}  // namespace

extern "C" {

void* malloc(std::size_t size) { return jemalloc() ? brine_je_malloc(size) : __libc_malloc(size); }

void free(void* p) { jemalloc() ? brine_je_free(p) : __libc_free(p); }

void* calloc(std::size_t n, std::size_t size) {
  return jemalloc() ? brine_je_calloc(n, size) : __libc_calloc(n, size);
}

void* realloc(void* p, std::size_t size) {
  return jemalloc() ? brine_je_realloc(p, size) : __libc_realloc(p, size);
}

void* memalign(std::size_t alignment, std::size_t size) {
  return jemalloc() ? brine_je_memalign(alignment, size) : __libc_memalign(alignment, size);
}

void* aligned_alloc(std::size_t alignment, std::size_t size) {
  // glibc's aligned_alloc is its memalign.
  return jemalloc() ? brine_je_aligned_alloc(alignment, size) : __libc_memalign(alignment, size);
}

void* valloc(std::size_t size) { return jemalloc() ? brine_je_valloc(size) : __libc_valloc(size); }

int posix_memalign(void** out, std::size_t alignment, std::size_t size) {
  if (jemalloc()) return brine_je_posix_memalign(out, alignment, size);
  if (alignment == 0 || alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) {
    return EINVAL;
  }
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

std::size_t malloc_usable_size(void* p) {
  if (jemalloc()) return brine_je_malloc_usable_size(p);
  // glibc exports it under this name only; nothing in brine calls it.
  using function = std::size_t (*)(void*);
  static const auto glibc = reinterpret_cast<function>(::dlsym(RTLD_NEXT, "malloc_usable_size"));
  return glibc(p);
}

}  // extern "C"

void* operator new(std::size_t size) {
  return jemalloc() ? brine_je__Znwm(size) : glibc_new(size, 0);
}
void* operator new[](std::size_t size) {
  return jemalloc() ? brine_je__Znam(size) : glibc_new(size, 0);
}
void* operator new(std::size_t size, const std::nothrow_t& t) noexcept {
  return jemalloc() ? brine_je__ZnwmRKSt9nothrow_t(size, t) : glibc_new_nothrow(size, 0);
}
void* operator new[](std::size_t size, const std::nothrow_t& t) noexcept {
  return jemalloc() ? brine_je__ZnamRKSt9nothrow_t(size, t) : glibc_new_nothrow(size, 0);
}
void* operator new(std::size_t size, std::align_val_t a) {
  return jemalloc() ? brine_je__ZnwmSt11align_val_t(size, a) : glibc_new(size, alignment_of(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return jemalloc() ? brine_je__ZnamSt11align_val_t(size, a) : glibc_new(size, alignment_of(a));
}
void* operator new(std::size_t size, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return jemalloc() ? brine_je__ZnwmSt11align_val_tRKSt9nothrow_t(size, a, t)
                    : glibc_new_nothrow(size, alignment_of(a));
}
void* operator new[](std::size_t size, std::align_val_t a, const std::nothrow_t& t) noexcept {
  return jemalloc() ? brine_je__ZnamSt11align_val_tRKSt9nothrow_t(size, a, t)
                    : glibc_new_nothrow(size, alignment_of(a));
}

void operator delete(void* p) noexcept { jemalloc() ? brine_je__ZdlPv(p) : __libc_free(p); }
void operator delete[](void* p) noexcept { jemalloc() ? brine_je__ZdaPv(p) : __libc_free(p); }
void operator delete(void* p, const std::nothrow_t& t) noexcept {
  jemalloc() ? brine_je__ZdlPvRKSt9nothrow_t(p, t) : __libc_free(p);
}
void operator delete[](void* p, const std::nothrow_t& t) noexcept {
  jemalloc() ? brine_je__ZdaPvRKSt9nothrow_t(p, t) : __libc_free(p);
}
void operator delete(void* p, std::size_t size) noexcept {
  jemalloc() ? brine_je__ZdlPvm(p, size) : __libc_free(p);
}
void operator delete[](void* p, std::size_t size) noexcept {
  jemalloc() ? brine_je__ZdaPvm(p, size) : __libc_free(p);
}
void operator delete(void* p, std::align_val_t a) noexcept {
  jemalloc() ? brine_je__ZdlPvSt11align_val_t(p, a) : __libc_free(p);
}
void operator delete[](void* p, std::align_val_t a) noexcept {
  jemalloc() ? brine_je__ZdaPvSt11align_val_t(p, a) : __libc_free(p);
}
void operator delete(void* p, std::align_val_t a, const std::nothrow_t& t) noexcept {
  jemalloc() ? brine_je__ZdlPvSt11align_val_tRKSt9nothrow_t(p, a, t) : __libc_free(p);
}
void operator delete[](void* p, std::align_val_t a, const std::nothrow_t& t) noexcept {
  jemalloc() ? brine_je__ZdaPvSt11align_val_tRKSt9nothrow_t(p, a, t) : __libc_free(p);
}
void operator delete(void* p, std::size_t size, std::align_val_t a) noexcept {
  jemalloc() ? brine_je__ZdlPvmSt11align_val_t(p, size, a) : __libc_free(p);
}
void operator delete[](void* p, std::size_t size, std::align_val_t a) noexcept {
  jemalloc() ? brine_je__ZdaPvmSt11align_val_t(p, size, a) : __libc_free(p);
}
