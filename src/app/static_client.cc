// The fully static `brine` of release builds (BRINE_STATIC): it runs the
// client commands itself and hands every other command line to
// `brine-dynamic`, the same program linked against the shared glibc, which
// sits in the same directory.
//
// A client command lives about a millisecond, and a third of it went to the
// dynamic loader: mapping libc and libm, resolving some 380 symbols, the
// page faults on both. Linked fully static, `brine --version` costs about
// what /bin/true does (bench/run.py, "client start"). But a static glibc
// cannot do everything: NSS (getpwnam_r, getgrouplist, getaddrinfo, ...)
// loads the modules that /etc/nsswitch.conf names (systemd on Debian 12, sss,
// ldap, resolve, mdns) together with a second, shared, libc, and they crash
// there: libnss_systemd does on any user who is not in /etc/passwd. The
// PostgreSQL store loads libpq.so.5 the same way. The daemons and `brine
// call` look up users and host names, so they run in brine-dynamic.
//
// Which command line runs here is decided from argv alone, in
// .preinit_array, before any static initialiser, allocation or thread: the
// first argument that is not an option must be absent (`brine --help`,
// `--version`) or one of the client commands below, which need neither NSS
// nor a shared library unless their store is PostgreSQL. Anything else, the
// daemons, `call`, and any subcommand added later, goes to brine-dynamic
// with execve: same pid, same argv and environment (for the commands in
// k_huge_heap_commands, one malloc tunable added).
//
// Should a command that runs here reach NSS or dlopen all the same (key, job,
// report or store on a PostgreSQL store, which load libpq before they print or
// change anything), the link puts the functions at the end of this file in
// their place (-Wl,--wrap, src/app/CMakeLists.txt) and they hand the same
// command line over at that point. The link fails if anything else in the
// static brine needs a shared library at run time (--fatal-warnings turns
// glibc's link-time warning about it into an error).
//
// Threading: the command line is saved before main and any thread, and only
// read afterwards.

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>

namespace {

// Client commands that run in the static brine.
constexpr std::string_view k_static_commands[] = {"cmd", "events", "masters", "key",
                                                  "job", "store",  "report"};

// Client commands that build tens of megabytes of small objects (the
// inventory of 10,000 minions): brine-dynamic runs them with glibc's malloc
// asking for transparent huge pages for its heap (the tunable
// glibc.malloc.hugetlb=1; nothing changes where THP is off). On the bench
// VM, 4 KiB page faults were a third of `brine inventory`'s time: 85 ms
// against 59 ms with it, at 10,000 minions. They start no other program,
// so the setting goes no further; the daemons never get it.
constexpr std::string_view k_huge_heap_commands[] = {"inventory"};
constexpr std::string_view k_huge_heap_tunable = "glibc.malloc.hugetlb=1";

char** saved_argv = nullptr;
// What brine-dynamic gets: the environment, or a copy with the tunable.
char** saved_envp = nullptr;

// The first argument that is not an option ("" when none).
std::string_view command_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with('-')) return arg;
  }
  return "";
}

bool runs_here(int argc, char** argv) {
  std::string_view arg = command_of(argc, argv);
  if (arg.empty()) return true;
  for (std::string_view command : k_static_commands) {
    if (arg == command) return true;
  }
  return false;
}

// `envp` with GLIBC_TUNABLES holding k_huge_heap_tunable (added to the
// user's tunables, if any), in static storage: it runs before main and
// allocates nothing. `envp` itself when it does not fit.
char** with_huge_heap(char** envp) {
  static char* env[1024];
  static char tunables[4096];
  constexpr std::string_view k_name = "GLIBC_TUNABLES=";
  size_t n = 0;
  const char* old = nullptr;
  for (char** e = envp; *e != nullptr; ++e) {
    if (n + 2 >= std::size(env)) return envp;
    if (std::string_view(*e).starts_with(k_name)) {
      old = *e + k_name.size();
    } else {
      env[n++] = *e;
    }
  }
  std::string_view before = old != nullptr ? std::string_view(old) : "";
  size_t size = k_name.size() + before.size() + 1 + k_huge_heap_tunable.size();
  if (size + 1 > sizeof tunables) return envp;
  char* at = tunables;
  at = std::copy(k_name.begin(), k_name.end(), at);
  at = std::copy(before.begin(), before.end(), at);
  if (!before.empty()) *at++ = ':';
  at = std::copy(k_huge_heap_tunable.begin(), k_huge_heap_tunable.end(), at);
  *at = '\0';
  env[n++] = tunables;
  env[n] = nullptr;
  return env;
}

void say(std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

// Replaces this process with brine-dynamic, given the same command line;
// `why` is what needs it. Allocates nothing: it may run before main.
[[noreturn]] void run_dynamic_brine(std::string_view why) {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path);
  constexpr std::string_view k_name = "brine-dynamic";
  std::string_view dir = n > 0 ? std::string_view(path, static_cast<size_t>(n)) : "";
  dir = dir.substr(0, dir.rfind('/') + 1);
  if (!dir.empty() && dir.size() + k_name.size() < sizeof path) {
    k_name.copy(path + dir.size(), k_name.size());
    path[dir.size() + k_name.size()] = '\0';
    ::execve(path, saved_argv, saved_envp != nullptr ? saved_envp : environ);
  } else {
    path[0] = '\0';
    errno = ENOENT;
  }
  const char* error = std::strerror(errno);
  say("brine: ");
  say(why);
  say(" needs brine-dynamic, which a release build installs beside brine: cannot run ");
  say(path[0] != '\0' ? std::string_view(path) : std::string_view("it"));
  say(": ");
  say(error);
  say("\n");
  ::_exit(127);
}

void choose(int argc, char** argv, char** envp) {
  saved_argv = argv;
  if (runs_here(argc, argv)) return;
  std::string_view command = command_of(argc, argv);
  for (std::string_view huge : k_huge_heap_commands) {
    if (command == huge) saved_envp = with_huge_heap(envp);
  }
  run_dynamic_brine("this command");
}

[[gnu::used, gnu::section(".preinit_array")]] void (*const choose_at_start)(int, char**,
                                                                            char**) = choose;

}  // namespace

// What the static link would take from glibc and could not do in a static
// process (see above). Declared without their parameters: they never return,
// so they never read them.
#define BRINE_NEEDS_DYNAMIC(function) \
  extern "C" [[noreturn]] void __wrap_##function() { run_dynamic_brine(#function "()"); }

BRINE_NEEDS_DYNAMIC(dlopen)
BRINE_NEEDS_DYNAMIC(getaddrinfo)
BRINE_NEEDS_DYNAMIC(gethostbyname)
BRINE_NEEDS_DYNAMIC(gethostbyaddr_r)
BRINE_NEEDS_DYNAMIC(getservbyname)
BRINE_NEEDS_DYNAMIC(getservbyport_r)
BRINE_NEEDS_DYNAMIC(getpwnam)
BRINE_NEEDS_DYNAMIC(getpwnam_r)
BRINE_NEEDS_DYNAMIC(getpwuid)
BRINE_NEEDS_DYNAMIC(getpwuid_r)
BRINE_NEEDS_DYNAMIC(setpwent)
BRINE_NEEDS_DYNAMIC(getpwent_r)
BRINE_NEEDS_DYNAMIC(endpwent)
BRINE_NEEDS_DYNAMIC(getgrnam)
BRINE_NEEDS_DYNAMIC(getgrnam_r)
BRINE_NEEDS_DYNAMIC(getgrgid)
BRINE_NEEDS_DYNAMIC(getgrgid_r)
BRINE_NEEDS_DYNAMIC(setgrent)
BRINE_NEEDS_DYNAMIC(getgrent_r)
BRINE_NEEDS_DYNAMIC(endgrent)
BRINE_NEEDS_DYNAMIC(getgrouplist)
BRINE_NEEDS_DYNAMIC(getspnam_r)
