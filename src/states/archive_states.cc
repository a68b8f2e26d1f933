// Salt's archive.extracted (salt/states/archive.py): a tar or zip archive,
// local or salt://, extracted into a directory unless everything it holds is
// already there. The archive is listed and unzipped through the archive
// execution functions and extracted by tar through cmd.run_all, as Salt's
// state does with options (Salt's own tarfile path, without options, gives
// the same files: tar finds gzip, bzip2 and xz itself).

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "base/error.h"
#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/archive_listing.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "states/file_util.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace archive_states {
namespace {

namespace fs = std::filesystem;
using plain_json = nlohmann::json;

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : py_text(v); }

using modules::shell_quote;

// source_hash as "type=hex" or a bare hex digest (its type by length).
struct wanted_hash {
  std::string type;
  std::string hex;
};
std::optional<wanted_hash> parse_hash(std::string text) {
  wanted_hash h;
  if (auto eq = text.find('='); eq != std::string::npos) {
    h.type = text.substr(0, eq);
    h.hex = text.substr(eq + 1);
  } else {
    h.hex = text;
    switch (text.size()) {
      case 32: h.type = "md5"; break;
      case 40: h.type = "sha1"; break;
      case 56: h.type = "sha224"; break;
      case 64: h.type = "sha256"; break;
      case 96: h.type = "sha384"; break;
      case 128: h.type = "sha512"; break;
      default: return std::nullopt;
    }
  }
  for (auto& ch : h.hex) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (h.hex.empty() || h.hex.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return std::nullopt;
  }
  return h;
}

// Salt's rm_rf: whatever is there, gone.
std::string remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec ? path + ": " + ec.message() : "";
}

// Ownership of `path` (and, for a directory, everything under it) set to
// uid/gid (-1 keeps one); whether anything changed. Failures land in
// `failed`.
bool chown_tree(const std::string& path, uid_t uid, gid_t gid, bool recurse,
                std::vector<std::string>& failed) {
  bool changed = false;
  auto one = [&](const std::string& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    if ((uid != static_cast<uid_t>(-1) && st.st_uid != uid) ||
        (gid != static_cast<gid_t>(-1) && st.st_gid != gid)) {
      if (::lchown(p.c_str(), uid, gid) == 0) {
        changed = true;
      } else {
        failed.push_back(p);
      }
    }
  };
  one(path);
  std::error_code ec;
  if (recurse && fs::is_directory(fs::symlink_status(path, ec))) {
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      one(it->path().string());
    }
  }
  return changed;
}

asio::awaitable<json> extracted(state_call c) {
  std::string name = c.name();
  json ret = result_first_ret(name, false);
  auto fail = [&ret](const std::string& msg) {
    ret["comment"] = msg;
    return ret;
  };
  if (c.flag("skip_files_list_verify") && c.flag("skip_verify")) {
    co_return fail("Only one of \"skip_files_list_verify\" and \"skip_verify\" can be set to True");
  }
  bool keep_source = true;
  if (c.arg("keep_source") != nullptr && c.arg("keep") != nullptr) {
    ret["warnings"] = json::array({"Both 'keep_source' and 'keep' were used. Since these both do "
                                   "the same thing, 'keep' was ignored."});
    keep_source = c.flag("keep_source");
  } else if (c.arg("keep_source") != nullptr) {
    keep_source = c.flag("keep_source");
  } else if (c.arg("keep") != nullptr) {
    keep_source = c.flag("keep");
  }
  if (!name.starts_with("/")) co_return fail(name + " is not an absolute path");
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  {
    std::error_code ec;
    if (fs::is_regular_file(name, ec)) co_return fail(name + " exists and is not a directory");
  }
  name += "/";
  std::optional<std::string> if_missing;
  if (const json* v = c.arg("if_missing"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !v->get<std::string>().starts_with("/")) {
      co_return fail("Value for 'if_missing' is not an absolute path");
    }
    if_missing = v->get<std::string>();
  }
  std::optional<std::string> enforce_on;
  if (const json* v = c.arg("enforce_ownership_on"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !v->get<std::string>().starts_with("/")) {
      co_return fail("Value for 'enforce_ownership_on' is not an absolute path");
    }
    enforce_on = v->get<std::string>();
    std::string rel = fs::path(*enforce_on).lexically_relative(name).string();
    if (rel.empty() || rel.starts_with("../") || rel == "..") {
      co_return fail("Value for 'enforce_ownership_on' must be within " + name);
    }
  }
  std::error_code ec;
  if (if_missing && fs::exists(*if_missing, ec)) {
    ret["result"] = true;
    co_return fail("Path " + *if_missing + " exists");
  }
  std::string user;
  std::string group;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  if (const json* u = c.arg("user"); u != nullptr && c.flag("user")) {
    user = text_of(*u);
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      co_return fail("User " + user + " does not exist");
    }
    uid = pw.pw_uid;
  }
  if (const json* g = c.arg("group"); g != nullptr && c.flag("group")) {
    group = text_of(*g);
    struct group gr {};
    struct group* found = nullptr;
    std::vector<char> buf(65536);
    if (::getgrnam_r(group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) {
      co_return fail("Group " + group + " does not exist");
    }
    gid = gr.gr_gid;
  }
  const json* source_arg = c.arg("source");
  if (source_arg == nullptr || source_arg->is_null()) {
    throw base::error("archive.extracted needs source=: salt://..., a path or file://");
  }
  std::string source;
  if (source_arg->is_array()) {
    if (source_arg->empty()) co_return fail("Invalid source \"[]\"");
    const json& first = (*source_arg)[0];
    source = first.is_object() && !first.empty() ? first.begin().key() : text_of(first);
  } else {
    source = text_of(*source_arg);
  }
  std::string saltenv = "base";
  if (const json* e = c.arg("__env__"); e != nullptr && e->is_string() && !e->empty()) {
    saltenv = e->get<std::string>();
  }
  std::string source_match = source;
  bool source_is_local = false;
  std::string basename_path = source;
  if (auto u = fileserver::parse_url(source)) {
    basename_path = u->path;
  } else if (source.starts_with("/") || source.starts_with("file://")) {
    source_is_local = true;
    std::string path = source.starts_with("file://") ? source.substr(7) : source;
    basename_path = path;
    std::error_code rec;
    fs::path real = fs::weakly_canonical(expand_user(path), rec);
    source_match = rec ? path : real.string();
    if (!fs::is_regular_file(source_match, rec)) {
      co_return fail("Source file '" + source_match + "' does not exist");
    }
  } else {
    co_return fail("Invalid source \"" + source +
                   "\": brine extracts salt:// and local archives (file:// or a path)");
  }
  std::string archive_format;
  if (const json* f = c.arg("archive_format"); f != nullptr && c.flag("archive_format")) {
    archive_format = text_of(*f);
    for (auto& ch : archive_format) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  } else {
    auto guessed = modules::guess_archive_type(basename_path);
    if (!guessed) {
      co_return fail("Could not guess archive_format from the value of the 'source' argument. "
                     "Please set this archive_format to one of the following: tar, rar, zip");
    }
    archive_format = *guessed;
  }
  if (archive_format != "tar" && archive_format != "rar" && archive_format != "zip") {
    co_return fail("Invalid archive_format '" + archive_format +
                   "'. Either set it to a supported value (tar, rar, zip) or remove this "
                   "argument and the archive format will be guessed based on file extension.");
  }
  std::string options;
  if (const json* o = c.arg("options"); o != nullptr && !o->is_null()) options = text_of(*o);
  std::optional<long> strip_components;
  if (!options.empty() && archive_format == "tar") {
    static const std::regex k_strip(R"(--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?)");
    std::smatch m;
    if (std::regex_search(options, m, k_strip)) strip_components = std::stol(m[1].str());
  }
  bool use_cmd_unzip = false;
  if (const json* v = c.arg("use_cmd_unzip"); v != nullptr && !v->is_null()) {
    use_cmd_unzip = c.flag("use_cmd_unzip");
  }
  if (archive_format == "zip") {
    if (!options.empty()) {
      if (const json* v = c.arg("use_cmd_unzip"); v != nullptr && !v->is_null() && !use_cmd_unzip) {
        co_return fail("'use_cmd_unzip' cannot be set to False if CLI options are being "
                       "specified (via the 'options' argument). Either remove 'use_cmd_unzip', "
                       "or set it to True.");
      }
      use_cmd_unzip = true;
    }
    if (c.flag("password")) {
      co_return fail("brine does not extract password-protected zip archives (password=)");
    }
  } else if (c.flag("password")) {
    co_return fail("The 'password' argument is only supported for zip archives");
  }
  if (archive_format == "rar") {
    co_return fail("archive.unrar function not available, rar/unrar might not be installed on "
                   "minion");
  }
  json trim_output = false;
  if (const json* t = c.arg("trim_output"); t != nullptr && c.flag("trim_output")) {
    if (t->is_boolean()) {
      trim_output = 100;
    } else if (t->is_number_integer()) {
      trim_output = *t;
    } else if (t->is_string()) {
      try {
        trim_output = std::stol(t->get<std::string>());
      } catch (const std::exception&) {
        co_return fail("Invalid value for trim_output, must be True/False or an integer");
      }
    } else {
      co_return fail("Invalid value for trim_output, must be True/False or an integer");
    }
  }
  std::optional<wanted_hash> want_hash;
  if (const json* h = c.arg("source_hash"); h != nullptr && c.flag("source_hash")) {
    want_hash = parse_hash(text_of(*h));
    if (!want_hash) {
      co_return fail("Unable to verify source_hash " + text_of(*h) +
                     ": brine takes a hash as TYPE=HEX or a bare hex digest");
    }
  }
  const bool skip_verify = c.flag("skip_verify");
  std::string cached;
  if (source_is_local) {
    cached = source_match;
  } else {
    if (c.test) {
      ret["result"] = nullptr;
      co_return fail("Archive " + source_match +
                     " would be cached (if necessary) and checked to discover if extraction is "
                     "needed");
    }
    if (c.context == nullptr) co_return fail("Unable to cache " + source_match + ": no minion");
    auto u = fileserver::parse_url(source);
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) co_return fail("Source file " + source + ": " + checked.error);
    std::vector<std::string> paths{checked.path};
    std::string env = u->saltenv.value_or(saltenv);
    auto got = co_await c.context->files().cache(std::move(env), std::move(paths));
    if (!got[0].error.empty()) {
      co_return fail("Unable to cache " + source_match + ": " + got[0].error);
    }
    cached = got[0].local;
    if (want_hash && !skip_verify) {
      std::string fun = "file.get_hash";
      plain_json args = plain_json::array({cached});
      plain_json kwargs = {{"form", want_hash->type}};
      json digest = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      if (!digest.is_string() || digest.get<std::string>() != want_hash->hex) {
        co_return fail("File sum set for file " + source_match + " of " +
                       (digest.is_string() ? digest.get<std::string>() : std::string()) +
                       " does not match real sum of " + want_hash->hex);
      }
    }
  }
  // What the archive holds.
  json contents;
  {
    plain_json kwargs = {{"archive_format", archive_format}, {"verbose", true}};
    if (strip_components) kwargs["strip_components"] = *strip_components;
    std::string fun = "archive.list";
    plain_json args = plain_json::array({cached});
    try {
      contents = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
    } catch (const base::error& e) {
      std::vector<std::string> errors;
      if (!if_missing) errors.push_back("'if_missing' must be set");
      if (!enforce_on && (!user.empty() || !group.empty())) {
        errors.push_back("Ownership cannot be managed without setting 'enforce_ownership_on'.");
      }
      std::string msg = e.what();
      if (!errors.empty()) {
        msg += "\n\n";
        if (archive_format == "tar") {
          msg += "If the source archive is a tar archive compressed using a compression type not "
                 "natively supported by the tar command, then setting the 'list_options' "
                 "argument may allow the contents to be listed. Otherwise, if Salt is unable to "
                 "determine the files/directories in the archive, the following workaround(s) "
                 "would need to be used for this state to proceed";
        } else {
          msg += "The following workarounds must be used for this state to proceed";
        }
        msg += " (assuming the source file is a valid " + archive_format + " archive):\n";
        for (const auto& err : errors) msg += "\n- " + err;
      }
      co_return fail(msg);
    }
  }
  if (c.flag("enforce_toplevel", true) &&
      (contents["top_level_dirs"].size() > 1 || !contents["top_level_files"].empty())) {
    co_return fail("Archive does not have a single top-level directory. To allow this archive "
                   "to be extracted, set 'enforce_toplevel' to False. To avoid a '" +
                   archive_format + "-bomb' it may also be advisable to set a top-level "
                   "directory by adding it to the 'name' value (for example, setting 'name' to " +
                   name + "some_dir instead of " + name + ").");
  }
  const bool clean = c.flag("clean");
  const bool clean_parent = c.flag("clean_parent");
  if (clean && clean_parent) {
    co_return fail("Only one of 'clean' and 'clean_parent' can be set to True");
  }
  bool extraction_needed = c.flag("overwrite");
  bool contents_missing = false;
  const bool force = c.flag("force");
  {
    std::vector<std::string> incorrect;
    auto check = [&](const json& list, int kind) {
      for (const auto& p : list) {
        std::string full = name + p.get<std::string>();
        while (full.size() > 1 && full.back() == '/') full.pop_back();
        struct stat st {};
        if (::lstat(full.c_str(), &st) != 0) {
          if (errno == ENOENT) {
            extraction_needed = true;
            contents_missing = true;
          }
          continue;
        }
        bool ok = kind == 0   ? S_ISDIR(st.st_mode)
                  : kind == 1 ? !S_ISLNK(st.st_mode) && !S_ISDIR(st.st_mode)
                              : S_ISLNK(st.st_mode);
        if (!ok) incorrect.push_back(p.get<std::string>());
      }
    };
    check(contents["dirs"], 0);
    check(contents["files"], 1);
    check(contents["links"], 2);
    if (!incorrect.empty()) {
      std::string paths = "\n\n";
      for (std::size_t i = 0; i < incorrect.size(); ++i) {
        paths += (i ? "\n" : "") + std::string("- ") + incorrect[i];
      }
      std::string msg = "The below paths (relative to " + name +
                        ") exist, but are the incorrect type (file instead of directory, symlink "
                        "instead of file, etc.).";
      if (c.test && clean) {
        ret["result"] = nullptr;
        co_return fail(msg + " Since the 'clean' option is enabled, the destination paths would "
                             "be cleared and the archive would be extracted." + paths);
      }
      if (c.test && clean_parent) {
        ret["result"] = nullptr;
        co_return fail(msg + " Since the 'clean_parent' option is enabled, the destination "
                             "parent directory would be removed first and then re-created and "
                             "the archive would be extracted");
      }
      if (!clean) {
        if (!force) {
          co_return fail(msg + " To proceed with extraction, set 'force' to True. Note that this "
                               "will remove these paths before extracting." + paths);
        }
        std::vector<std::string> errors;
        for (const auto& p : incorrect) {
          std::string full = name + p;
          while (full.size() > 1 && full.back() == '/') full.pop_back();
          std::string err = remove_all(full);
          if (err.empty()) {
            ret["changes"]["removed"].push_back(name + p);
            extraction_needed = true;
          } else {
            errors.push_back(err);
          }
        }
        if (!errors.empty()) {
          std::string m = "One or more paths existed by were the incorrect type (i.e. file "
                          "instead of directory or vice-versa), but could not be removed. The "
                          "following errors were observed:\n";
          for (const auto& e : errors) m += "\n- " + e;
          co_return fail(m);
        }
      }
    }
  }
  auto explain = [&](std::string comment) {
    if (contents_missing) comment += ", due to absence of one or more files/dirs";
    return comment;
  };
  bool created_destdir = false;
  json files = json::array();
  if (extraction_needed) {
    if (source_is_local && want_hash && !skip_verify) {
      std::string fun = "file.get_hash";
      plain_json args = plain_json::array({source_match});
      plain_json kwargs = {{"form", want_hash->type}};
      json digest = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      if (!digest.is_string() || digest.get<std::string>() != want_hash->hex) {
        co_return fail(source_match + " does not match the desired source_hash " + want_hash->hex);
      }
    }
    if (c.test) {
      ret["result"] = nullptr;
      std::string comment = "Archive " + source_match + " would be extracted to " + name;
      if (clean) comment += ", after cleaning destination path(s)";
      co_return fail(explain(comment));
    }
    if (clean_parent) {
      std::string err = remove_all(name.substr(0, name.size() - 1));
      if (!err.empty()) {
        co_return fail("Unable to remove the directory " + name +
                       ". The following errors were observed:\n\n- " + err);
      }
      if (!ret["changes"].contains("removed")) {
        ret["changes"]["removed"] = "Directory " + name + " was removed prior to the extraction";
      }
    }
    if (clean) {
      std::vector<std::string> errors;
      json top = contents["top_level_dirs"];
      for (const auto& f : contents["top_level_files"]) top.push_back(f);
      for (const auto& p : top) {
        std::string full = name + p.get<std::string>();
        std::string bare = full;
        while (bare.size() > 1 && bare.back() == '/') bare.pop_back();
        std::string err = remove_all(bare);
        if (err.empty()) {
          ret["changes"]["removed"].push_back(full);
        } else {
          errors.push_back(err);
        }
      }
      if (!errors.empty()) {
        std::string m = "One or more paths could not be cleaned. The following errors were "
                        "observed:\n";
        for (const auto& e : errors) m += "\n- " + e;
        co_return fail(m);
      }
    }
    std::string dest = name.substr(0, name.size() - 1);
    if (!fs::is_directory(dest, ec)) {
      fs::create_directories(dest, ec);
      if (ec) co_return fail("Unable to create " + dest + ": " + ec.message());
      if (uid != static_cast<uid_t>(-1)) {
        [[maybe_unused]] int r = ::chown(dest.c_str(), uid, static_cast<gid_t>(-1));
      }
      created_destdir = true;
    }
    auto trimmed = [&](std::vector<std::string> list) {
      if (trim_output.is_number_integer()) {
        auto n = static_cast<std::size_t>(std::max<long long>(0, trim_output.get<long long>()));
        if (list.size() > n) list.resize(n);
      }
      return list;
    };
    try {
      if (archive_format == "zip") {
        plain_json args = plain_json::array({cached, name});
        plain_json kwargs = plain_json::object();
        if (!options.empty()) kwargs["options"] = options;
        kwargs["trim_output"] = plain_json(trim_output);
        std::string fun = use_cmd_unzip ? "archive.cmd_unzip" : "archive.unzip";
        files = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      } else if (options.empty()) {
        // Salt's tarfile.extractall: the members' names, in archive order.
        std::string list_fun = "cmd.run_all";
        plain_json list_kwargs = {{"cmd", "tar -tf " + shell_quote(cached)}};
        plain_json no_args = plain_json::array();
        json names = co_await c.run(std::move(list_fun), std::move(no_args),
                                    std::move(list_kwargs));
        std::string fun = "cmd.run_all";
        plain_json kwargs = {{"cmd", "tar -xf " + shell_quote(cached)}, {"cwd", dest}};
        plain_json none = plain_json::array();
        json r = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
        if (r.value("retcode", 1) != 0) {
          if (created_destdir) fs::remove(dest, ec);
          ret["result"] = false;
          co_return fail(
              "Failed to read from tar archive using Python's native tar file support. If "
              "archive is compressed using something other than gzip or bzip2, the 'options' "
              "argument may be required to pass the correct options to the tar command in order "
              "to extract the archive.");
        }
        std::vector<std::string> list;
        std::string out = names.value("stdout", "");
        std::size_t start = 0;
        while (start < out.size()) {
          std::size_t end = out.find('\n', start);
          if (end == std::string::npos) end = out.size();
          std::string n = out.substr(start, end - start);
          while (n.size() > 1 && n.back() == '/') n.pop_back();
          if (!n.empty()) list.push_back(n);
          start = end + 1;
        }
        files = trimmed(list);
      } else {
        // Salt's tar command line: xv plus the first option word's letters
        // (without x and f), the other words as they are.
        std::vector<std::string> words;
        {
          std::string cur;
          for (char ch : options) {
            if (ch == ' ' || ch == '\t') {
              if (!cur.empty()) words.push_back(cur);
              cur.clear();
            } else {
              cur += ch;
            }
          }
          if (!cur.empty()) words.push_back(cur);
        }
        std::string shortopts = "xv";
        std::vector<std::string> longopts;
        std::size_t position = 0;
        for (const auto& w : words) {
          if (w == "v" || w == "-v" || w == "--verbose") continue;
          if (w.starts_with("-") || position > 0) {
            longopts.push_back(w);
          } else {
            for (char ch : w) {
              if (ch != 'x' && ch != 'f') shortopts += ch;
            }
          }
          ++position;
        }
        std::string cmd = "tar " + shortopts;
        for (const auto& w : longopts) cmd += " " + shell_quote(w);
        cmd += " -f " + shell_quote(cached);
        std::string fun = "cmd.run_all";
        plain_json kwargs = {{"cmd", cmd}, {"cwd", dest}};
        plain_json none = plain_json::array();
        json r = co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
        if (r.value("retcode", 1) != 0) {
          ret["result"] = false;
          ret["changes"] = r;
          co_return ret;
        }
        std::vector<std::string> list;
        std::string out = r.value("stdout", "");
        std::size_t start = 0;
        while (start < out.size()) {
          std::size_t end = out.find('\n', start);
          if (end == std::string::npos) end = out.size();
          list.push_back(out.substr(start, end - start));
          start = end + 1;
        }
        if (list.empty()) {
          files = "no tar output so far";
        } else {
          files = trimmed(list);
        }
      }
    } catch (const base::error& e) {
      co_return fail(e.what());
    }
  }
  std::vector<std::string> enforce_missing;
  std::vector<std::string> enforce_failed;
  if (!user.empty() || !group.empty()) {
    std::vector<std::string> dirs;
    std::vector<std::string> plain_files;
    if (enforce_on) {
      if (fs::is_directory(*enforce_on, ec)) {
        dirs.push_back(*enforce_on);
      } else {
        plain_files.push_back(*enforce_on);
      }
    } else {
      for (const auto& d : contents["top_level_dirs"]) dirs.push_back(name + d.get<std::string>());
      for (const auto& f : contents["top_level_files"]) plain_files.push_back(name + f.get<std::string>());
      for (const auto& f : contents["top_level_links"]) plain_files.push_back(name + f.get<std::string>());
    }
    for (const auto& d : dirs) {
      if (!fs::is_directory(d, ec)) {
        if (!c.test) enforce_missing.push_back(d);
        continue;
      }
      bool changed = false;
      if (c.test) {
        // Under test nothing changes: the directory itself is compared.
        struct stat st {};
        changed = ::lstat(d.c_str(), &st) == 0 &&
                  ((uid != static_cast<uid_t>(-1) && st.st_uid != uid) ||
                   (gid != static_cast<gid_t>(-1) && st.st_gid != gid));
      } else {
        changed = chown_tree(d, uid, gid, true, enforce_failed);
      }
      if (changed) ret["changes"]["updated ownership"] = true;
    }
    for (const auto& f : plain_files) {
      struct stat st {};
      if (::lstat(f.c_str(), &st) != 0) {
        if (!c.test) {
          if (errno == ENOENT) enforce_missing.push_back(f);
          enforce_failed.push_back(f);
        }
        continue;
      }
      if ((uid != static_cast<uid_t>(-1) && st.st_uid != uid) ||
          (gid != static_cast<gid_t>(-1) && st.st_gid != gid)) {
        if (c.test) {
          ret["changes"]["updated ownership"] = true;
        } else if (::lchown(f.c_str(), uid, gid) == 0) {
          ret["changes"]["updated ownership"] = true;
        } else {
          enforce_failed.push_back(f);
        }
      }
    }
  }
  if (extraction_needed) {
    if (!files.empty()) {
      if (created_destdir) ret["changes"]["directories_created"] = json::array({name});
      ret["changes"]["extracted_files"] = files;
      ret["comment"] = explain(source_match + " extracted to " + name) +
                       ". Output was trimmed to " + py_text(trim_output) + " number of lines";
      ret["result"] = true;
    } else {
      ret["result"] = false;
      ret["comment"] = "No files were extracted from " + source_match;
    }
  } else {
    ret["result"] = true;
    ret["comment"] = "All files in archive are already present";
    if (c.test && ret["changes"].contains("updated ownership")) {
      ret["result"] = nullptr;
      ret["comment"] = ret["comment"].get<std::string>() +
                       ". Ownership would be updated on one or more files/directories.";
    }
  }
  if (!enforce_missing.empty()) {
    if (!if_missing) ret["result"] = false;
    std::string comment = ret["comment"].get<std::string>() +
                          "\n\nWhile trying to enforce user/group ownership, the following paths "
                          "were missing:\n";
    for (const auto& m : enforce_missing) comment += "\n- " + m;
    ret["comment"] = comment;
  }
  if (!enforce_failed.empty()) {
    ret["result"] = false;
    std::string comment = ret["comment"].get<std::string>() +
                          "\n\nWhile trying to enforce user/group ownership, Salt was unable to "
                          "change ownership on the following paths:\n";
    for (const auto& m : enforce_failed) comment += "\n- " + m;
    ret["comment"] = comment;
  }
  // keep_source: False drops a copy fetched from a master; a masterless
  // minion's salt:// file is the file root's own and stays.
  if (!source_is_local && !keep_source && c.context != nullptr && c.context->files().remote()) {
    fs::remove(cached, ec);
  }
  co_return ret;
}

}  // namespace
}  // namespace archive_states

void register_archive_states(registry& reg) {
  using namespace archive_states;
  reg.add("archive.extracted", extracted, {"name", "source"},
          "archive.extracted name=DIR source=salt://|PATH [archive_format=tar|zip] "
          "[source_hash=] [skip_verify=] [options=] [enforce_toplevel=True] [if_missing=] "
          "[user=] [group=] [enforce_ownership_on=] [overwrite=] [clean=] [clean_parent=] "
          "[force=] [trim_output=] [keep_source=True] [use_cmd_unzip=]: the archive's files "
          "are in DIR");
}

}  // namespace brine::states
