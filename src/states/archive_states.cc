// Salt's archive.extracted (salt/states/archive.py): a tar or zip archive,
// local, salt:// or remote (http, https, ftp: cached by file.cached),
// extracted into a directory unless everything it holds is
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
#include "http/client.h"
#include "modules/context.h"
#include "modules/source_sum.h"
#include "modules/url_cache.h"
#include "states/file_states.h"
#include "states/file_util.h"
#include "states/python_text.h"
#include "states/registry.h"

namespace brine::states {
namespace archive_states {
namespace {

namespace fs = std::filesystem;
using plain_json = nlohmann::json;

std::string text_of(const json& v) { return v.is_string() ? v.get<std::string>() : py_text(v); }

std::string text_of_arg(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  return v == nullptr || v->is_null() ? "" : text_of(*v);
}

using modules::shell_quote;

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

// Ends the state at a step: `ret` with this comment, its result as the step
// left it (false unless set). True, for `if (stop_with(...)) co_return ret`.
bool stop_with(json& ret, const std::string& comment) {
  ret["comment"] = comment;
  return true;
}

// What archive.extracted was asked, checked as Salt checks it before the
// archive is cached.
struct request {
  std::string name;  // the destination, with one trailing '/'
  bool keep_source = true;
  std::optional<std::string> if_missing;
  std::optional<std::string> enforce_on;
  std::string user;
  std::string group;
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  std::string source;        // the (first) source as given
  std::string saltenv = "base";
  std::string source_match;  // what comments name: a local source's real path, or the URL
  bool source_is_local = false;
  std::string archive_format;
  std::string options;
  std::optional<long> strip_components;
  bool use_cmd_unzip = false;
  json trim_output = false;
  std::string source_hash;  // as given; want_hash is what it names
  std::optional<modules::source_sum> want_hash;
  bool skip_verify = false;

  bool owned() const { return !user.empty() || !group.empty(); }
  bool changes_owner(const struct stat& st) const {
    return (uid != static_cast<uid_t>(-1) && st.st_uid != uid) ||
           (gid != static_cast<gid_t>(-1) && st.st_gid != gid);
  }
};

// The destination, if_missing, enforce_ownership_on, keep/keep_source.
bool read_destination(const state_call& c, request& r, json& ret) {
  if (c.flag("skip_files_list_verify") && c.flag("skip_verify")) {
    return stop_with(ret,
                     "Only one of \"skip_files_list_verify\" and \"skip_verify\" can be set to True");
  }
  if (c.arg("keep_source") != nullptr && c.arg("keep") != nullptr) {
    ret["warnings"] = json::array({"Both 'keep_source' and 'keep' were used. Since these both do "
                                   "the same thing, 'keep' was ignored."});
    r.keep_source = c.flag("keep_source");
  } else if (c.arg("keep_source") != nullptr) {
    r.keep_source = c.flag("keep_source");
  } else if (c.arg("keep") != nullptr) {
    r.keep_source = c.flag("keep");
  }
  std::string name = c.name();
  if (!name.starts_with("/")) return stop_with(ret, name + " is not an absolute path");
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  std::error_code ec;
  if (fs::is_regular_file(name, ec)) return stop_with(ret, name + " exists and is not a directory");
  r.name = name + "/";
  if (const json* v = c.arg("if_missing"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !v->get<std::string>().starts_with("/")) {
      return stop_with(ret, "Value for 'if_missing' is not an absolute path");
    }
    r.if_missing = v->get<std::string>();
  }
  if (const json* v = c.arg("enforce_ownership_on"); v != nullptr && !v->is_null()) {
    if (!v->is_string() || !v->get<std::string>().starts_with("/")) {
      return stop_with(ret, "Value for 'enforce_ownership_on' is not an absolute path");
    }
    r.enforce_on = v->get<std::string>();
    std::string rel = fs::path(*r.enforce_on).lexically_relative(r.name).string();
    if (rel.empty() || rel.starts_with("../") || rel == "..") {
      return stop_with(ret, "Value for 'enforce_ownership_on' must be within " + r.name);
    }
  }
  if (r.if_missing && fs::exists(*r.if_missing, ec)) {
    ret["result"] = true;
    return stop_with(ret, "Path " + *r.if_missing + " exists");
  }
  return false;
}

// user and group, which must exist.
bool read_owner(const state_call& c, request& r, json& ret) {
  if (const json* u = c.arg("user"); u != nullptr && c.flag("user")) {
    r.user = text_of(*u);
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    if (::getpwnam_r(r.user.c_str(), &pw, buf.data(), buf.size(), &found) != 0 ||
        found == nullptr) {
      return stop_with(ret, "User " + r.user + " does not exist");
    }
    r.uid = pw.pw_uid;
  }
  if (const json* g = c.arg("group"); g != nullptr && c.flag("group")) {
    r.group = text_of(*g);
    struct group gr {};
    struct group* found = nullptr;
    std::vector<char> buf(65536);
    if (::getgrnam_r(r.group.c_str(), &gr, buf.data(), buf.size(), &found) != 0 ||
        found == nullptr) {
      return stop_with(ret, "Group " + r.group + " does not exist");
    }
    r.gid = gr.gr_gid;
  }
  return false;
}

// The source (the first of a list), local or salt://, and the format it
// has or is guessed to have.
bool read_source(const state_call& c, request& r, json& ret) {
  const json* source_arg = c.arg("source");
  if (source_arg == nullptr || source_arg->is_null()) {
    throw base::error("archive.extracted needs source=: salt://..., a path or file://");
  }
  if (source_arg->is_array()) {
    if (source_arg->empty()) return stop_with(ret, "Invalid source \"[]\"");
    const json& first = (*source_arg)[0];
    r.source = first.is_object() && !first.empty() ? first.begin().key() : text_of(first);
  } else {
    r.source = text_of(*source_arg);
  }
  if (const json* e = c.arg("__env__"); e != nullptr && e->is_string() && !e->empty()) {
    r.saltenv = e->get<std::string>();
  }
  r.source_match = r.source;
  std::string basename_path = r.source;
  if (auto u = fileserver::parse_url(r.source)) {
    basename_path = u->path;
  } else if (r.source.starts_with("/") || r.source.starts_with("file://")) {
    r.source_is_local = true;
    std::string path = r.source.starts_with("file://") ? r.source.substr(7) : r.source;
    basename_path = path;
    std::error_code rec;
    fs::path real = fs::weakly_canonical(expand_user(path), rec);
    r.source_match = rec ? path : real.string();
    if (!fs::is_regular_file(r.source_match, rec)) {
      return stop_with(ret, "Source file '" + r.source_match + "' does not exist");
    }
  } else if (modules::is_remote_url(r.source)) {
    // The URL's path names the archive (its query and fragment do not).
    std::string rest = r.source.substr(r.source.find("://") + 3);
    auto slash = rest.find('/');
    basename_path = slash == std::string::npos ? "" : rest.substr(slash);
    basename_path = basename_path.substr(0, basename_path.find_first_of("?#"));
  } else {
    return stop_with(ret, "Invalid source \"" + r.source +
                              "\": brine extracts salt://, http(s)://, ftp:// and local archives "
                              "(file:// or a path)");
  }
  if (const json* f = c.arg("archive_format"); f != nullptr && c.flag("archive_format")) {
    r.archive_format = text_of(*f);
    for (auto& ch : r.archive_format) {
      ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  } else {
    auto guessed = modules::guess_archive_type(basename_path);
    if (!guessed) {
      return stop_with(ret,
                       "Could not guess archive_format from the value of the 'source' argument. "
                       "Please set this archive_format to one of the following: tar, rar, zip");
    }
    r.archive_format = *guessed;
  }
  if (r.archive_format != "tar" && r.archive_format != "rar" && r.archive_format != "zip") {
    return stop_with(ret, "Invalid archive_format '" + r.archive_format +
                              "'. Either set it to a supported value (tar, rar, zip) or remove "
                              "this argument and the archive format will be guessed based on "
                              "file extension.");
  }
  return false;
}

// options, use_cmd_unzip, password, trim_output and source_hash, as the
// format allows them.
bool read_extraction_options(const state_call& c, request& r, json& ret) {
  if (const json* o = c.arg("options"); o != nullptr && !o->is_null()) r.options = text_of(*o);
  if (!r.options.empty() && r.archive_format == "tar") {
    static const std::regex k_strip(R"(--strip(?:-components)?(?:\s+|=)["']?(\d+)["']?)");
    std::smatch m;
    if (std::regex_search(r.options, m, k_strip)) r.strip_components = std::stol(m[1].str());
  }
  const json* cmd_unzip = c.arg("use_cmd_unzip");
  if (cmd_unzip != nullptr && !cmd_unzip->is_null()) r.use_cmd_unzip = c.flag("use_cmd_unzip");
  if (r.archive_format == "zip") {
    if (!r.options.empty()) {
      if (cmd_unzip != nullptr && !cmd_unzip->is_null() && !r.use_cmd_unzip) {
        return stop_with(ret,
                         "'use_cmd_unzip' cannot be set to False if CLI options are being "
                         "specified (via the 'options' argument). Either remove 'use_cmd_unzip', "
                         "or set it to True.");
      }
      r.use_cmd_unzip = true;
    }
    if (c.flag("password")) {
      return stop_with(ret, "brine does not extract password-protected zip archives (password=)");
    }
  } else if (c.flag("password")) {
    return stop_with(ret, "The 'password' argument is only supported for zip archives");
  }
  if (r.archive_format == "rar") {
    return stop_with(ret, "archive.unrar function not available, rar/unrar might not be "
                          "installed on minion");
  }
  if (const json* t = c.arg("trim_output"); t != nullptr && c.flag("trim_output")) {
    if (t->is_boolean()) {
      r.trim_output = 100;
    } else if (t->is_number_integer()) {
      r.trim_output = *t;
    } else if (t->is_string()) {
      try {
        r.trim_output = std::stol(t->get<std::string>());
      } catch (const std::exception&) {
        return stop_with(ret, "Invalid value for trim_output, must be True/False or an integer");
      }
    } else {
      return stop_with(ret, "Invalid value for trim_output, must be True/False or an integer");
    }
  }
  if (const json* h = c.arg("source_hash"); h != nullptr && c.flag("source_hash")) {
    r.source_hash = text_of(*h);
  }
  r.skip_verify = c.flag("skip_verify");
  return false;
}

// file.get_hash of `path` in the wanted hash's type ("" if none came back).
asio::awaitable<std::string> digest_of(const state_call& c, const std::string& path,
                                       const modules::source_sum& want) {
  std::string fun = "file.get_hash";
  plain_json args = plain_json::array({path});
  plain_json kwargs = {{"form", want.hash_type}};
  json digest = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
  co_return digest.is_string() ? digest.get<std::string>() : std::string();
}

// file.get_source_sum of source_hash (Salt's comment when it names none).
asio::awaitable<bool> read_source_sum(const state_call& c, request& r, json& ret) {
  if (r.source_hash.empty()) co_return false;
  std::string error;
  std::string no_file;
  std::string hash_name = text_of_arg(c, "source_hash_name");
  try {
    if (c.context != nullptr) {
      r.want_hash = co_await modules::get_source_sum(*c.context, no_file, r.source_match,
                                                     r.source_hash, hash_name, r.saltenv);
    } else {
      r.want_hash = modules::parse_hash_expression(r.source_hash);
    }
  } catch (const base::error& e) {
    error = e.what();
  }
  if (!error.empty()) co_return stop_with(ret, error);
  co_return false;
}

// The archive on local disk: a local source as it is, a salt:// or remote
// one cached by file.cached (checked against source_hash there). Under
// test it is not fetched: the state ends.
asio::awaitable<bool> cache_source(const state_call& c, const request& r, json& ret,
                                   std::string& cached) {
  if (r.source_is_local) {
    cached = r.source_match;
    co_return false;
  }
  std::string shown = http::redact_url(r.source_match);
  if (c.test) {
    ret["result"] = nullptr;
    co_return stop_with(ret, "Archive " + shown +
                                 " would be cached (if necessary) and checked to discover if "
                                 "extraction is needed");
  }
  if (c.context == nullptr) co_return stop_with(ret, "Unable to cache " + shown + ": no minion");
  if (auto u = fileserver::parse_url(r.source)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) {
      co_return stop_with(ret, "Source file " + r.source + ": " + checked.error);
    }
  }
  state_call fetch = c;
  fetch.low = {{"name", r.source_match}, {"saltenv", r.saltenv}, {"skip_verify", r.skip_verify},
               {"use_etag", c.flag("use_etag")}};
  if (!r.source_hash.empty()) fetch.low["source_hash"] = r.source_hash;
  if (const json* n = c.arg("source_hash_name"); n != nullptr) fetch.low["source_hash_name"] = *n;
  json result = co_await file_cached(std::move(fetch));
  if (result["result"] != true) {
    ret = std::move(result);
    co_return true;
  }
  plain_json args = plain_json::array({r.source_match});
  plain_json kwargs = {{"saltenv", r.saltenv}};
  json local = co_await c.run("cp.is_cached", std::move(args), std::move(kwargs));
  cached = local.is_string() ? local.get<std::string>() : "";
  if (cached.empty()) co_return stop_with(ret, "Unable to cache " + shown);
  co_return false;
}

// archive.list of the archive (verbose: dirs, files, links, top-level
// names); when it cannot be listed, Salt's workarounds are named.
asio::awaitable<bool> list_contents(const state_call& c, const request& r,
                                    const std::string& cached, json& ret, json& contents) {
  plain_json kwargs = {{"archive_format", r.archive_format}, {"verbose", true}};
  if (r.strip_components) kwargs["strip_components"] = *r.strip_components;
  std::string fun = "archive.list";
  plain_json args = plain_json::array({cached});
  std::string error;
  try {
    contents = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
    co_return false;
  } catch (const base::error& e) {
    error = e.what();
  }
  std::vector<std::string> workarounds;
  if (!r.if_missing) workarounds.push_back("'if_missing' must be set");
  if (!r.enforce_on && r.owned()) {
    workarounds.push_back("Ownership cannot be managed without setting 'enforce_ownership_on'.");
  }
  if (!workarounds.empty()) {
    error += "\n\n";
    if (r.archive_format == "tar") {
      error += "If the source archive is a tar archive compressed using a compression type not "
               "natively supported by the tar command, then setting the 'list_options' "
               "argument may allow the contents to be listed. Otherwise, if Salt is unable to "
               "determine the files/directories in the archive, the following workaround(s) "
               "would need to be used for this state to proceed";
    } else {
      error += "The following workarounds must be used for this state to proceed";
    }
    error += " (assuming the source file is a valid " + r.archive_format + " archive):\n";
    for (const auto& w : workarounds) error += "\n- " + w;
  }
  co_return stop_with(ret, error);
}

// `name` + an archive member's path, without trailing slashes.
std::string member_path(const std::string& name, const std::string& member) {
  std::string full = name + member;
  while (full.size() > 1 && full.back() == '/') full.pop_back();
  return full;
}

// What the destination holds against the archive's list: extraction is
// needed when a member is missing (or overwrite is set); a member of the
// wrong type (a file where the archive has a directory, ...) stops the
// state unless clean, clean_parent or force say what to do with it.
struct destination_check {
  bool extraction_needed = false;
  bool contents_missing = false;
};
bool check_destination(const state_call& c, const request& r, const json& contents, json& ret,
                       destination_check& d) {
  const bool clean = c.flag("clean");
  const bool clean_parent = c.flag("clean_parent");
  d.extraction_needed = c.flag("overwrite");
  std::vector<std::string> incorrect;
  auto check = [&](const json& list, int kind) {
    for (const auto& p : list) {
      std::string full = member_path(r.name, p.get<std::string>());
      struct stat st {};
      if (::lstat(full.c_str(), &st) != 0) {
        if (errno == ENOENT) {
          d.extraction_needed = true;
          d.contents_missing = true;
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
  if (incorrect.empty()) return false;
  std::string paths = "\n\n";
  for (std::size_t i = 0; i < incorrect.size(); ++i) {
    paths += (i ? "\n" : "") + std::string("- ") + incorrect[i];
  }
  std::string msg = "The below paths (relative to " + r.name +
                    ") exist, but are the incorrect type (file instead of directory, symlink "
                    "instead of file, etc.).";
  if (c.test && clean) {
    ret["result"] = nullptr;
    return stop_with(ret, msg + " Since the 'clean' option is enabled, the destination paths "
                                "would be cleared and the archive would be extracted." + paths);
  }
  if (c.test && clean_parent) {
    ret["result"] = nullptr;
    return stop_with(ret, msg + " Since the 'clean_parent' option is enabled, the destination "
                                "parent directory would be removed first and then re-created "
                                "and the archive would be extracted");
  }
  if (clean) return false;
  if (!c.flag("force")) {
    return stop_with(ret, msg + " To proceed with extraction, set 'force' to True. Note that "
                                "this will remove these paths before extracting." + paths);
  }
  std::vector<std::string> errors;
  for (const auto& p : incorrect) {
    std::string err = remove_all(member_path(r.name, p));
    if (err.empty()) {
      ret["changes"]["removed"].push_back(r.name + p);
      d.extraction_needed = true;
    } else {
      errors.push_back(err);
    }
  }
  if (errors.empty()) return false;
  std::string m = "One or more paths existed by were the incorrect type (i.e. file "
                  "instead of directory or vice-versa), but could not be removed. The "
                  "following errors were observed:\n";
  for (const auto& e : errors) m += "\n- " + e;
  return stop_with(ret, m);
}

// clean_parent: the destination removed first; clean: the archive's
// top-level members in it.
bool clean_destination(const state_call& c, const request& r, const json& contents, json& ret) {
  if (c.flag("clean_parent")) {
    std::string err = remove_all(r.name.substr(0, r.name.size() - 1));
    if (!err.empty()) {
      return stop_with(ret, "Unable to remove the directory " + r.name +
                                ". The following errors were observed:\n\n- " + err);
    }
    if (!ret["changes"].contains("removed")) {
      ret["changes"]["removed"] = "Directory " + r.name + " was removed prior to the extraction";
    }
  }
  if (!c.flag("clean")) return false;
  std::vector<std::string> errors;
  json top = contents["top_level_dirs"];
  for (const auto& f : contents["top_level_files"]) top.push_back(f);
  for (const auto& p : top) {
    std::string err = remove_all(member_path(r.name, p.get<std::string>()));
    if (err.empty()) {
      ret["changes"]["removed"].push_back(r.name + p.get<std::string>());
    } else {
      errors.push_back(err);
    }
  }
  if (errors.empty()) return false;
  std::string m = "One or more paths could not be cleaned. The following errors were "
                  "observed:\n";
  for (const auto& e : errors) m += "\n- " + e;
  return stop_with(ret, m);
}

// tar -t's names: without trailing '/', empty lines dropped.
std::vector<std::string> member_names(const std::string& out) {
  std::vector<std::string> names;
  for (std::string& line : modules::output_lines(out)) {
    while (line.size() > 1 && line.back() == '/') line.pop_back();
    if (!line.empty()) names.push_back(std::move(line));
  }
  return names;
}

// Salt's tar command line for `options`: xv plus the first option word's
// letters (without x and f), the other words as they are, then -f ARCHIVE.
std::string tar_command(const std::string& options, const std::string& cached) {
  std::vector<std::string> words;
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
  return cmd + " -f " + shell_quote(cached);
}

asio::awaitable<json> run_all(const state_call& c, std::string cmd, std::string cwd = "") {
  std::string fun = "cmd.run_all";
  plain_json kwargs = {{"cmd", std::move(cmd)}};
  if (!cwd.empty()) kwargs["cwd"] = std::move(cwd);
  plain_json none = plain_json::array();
  co_return co_await c.run(std::move(fun), std::move(none), std::move(kwargs));
}

// The extraction itself into `dest` (made, owned by user, when missing):
// unzip, tar without options (Salt's tarfile: the members' names), or
// Salt's tar command line. `files` gets what was extracted, trimmed to
// trim_output.
asio::awaitable<bool> extract(const state_call& c, const request& r, const std::string& cached,
                              json& ret, json& files, bool& created_destdir) {
  std::string dest = r.name.substr(0, r.name.size() - 1);
  std::error_code ec;
  if (!fs::is_directory(dest, ec)) {
    fs::create_directories(dest, ec);
    if (ec) co_return stop_with(ret, "Unable to create " + dest + ": " + ec.message());
    if (r.uid != static_cast<uid_t>(-1)) {
      [[maybe_unused]] int rc = ::chown(dest.c_str(), r.uid, static_cast<gid_t>(-1));
    }
    created_destdir = true;
  }
  auto trimmed = [&r](std::vector<std::string> list) {
    if (r.trim_output.is_number_integer()) {
      auto n = static_cast<std::size_t>(std::max<long long>(0, r.trim_output.get<long long>()));
      if (list.size() > n) list.resize(n);
    }
    return list;
  };
  std::string error;
  try {
    if (r.archive_format == "zip") {
      plain_json args = plain_json::array({cached, r.name});
      plain_json kwargs = plain_json::object();
      if (!r.options.empty()) kwargs["options"] = r.options;
      kwargs["trim_output"] = plain_json(r.trim_output);
      std::string fun = r.use_cmd_unzip ? "archive.cmd_unzip" : "archive.unzip";
      files = co_await c.run(std::move(fun), std::move(args), std::move(kwargs));
      co_return false;
    }
    if (r.options.empty()) {
      // Named commands: GCC 12 mishandles temporaries inside co_await.
      std::string list_cmd = "tar -tf " + shell_quote(cached);
      std::string extract_cmd = "tar -xf " + shell_quote(cached);
      json names = co_await run_all(c, std::move(list_cmd));
      json done = co_await run_all(c, std::move(extract_cmd), dest);
      if (done.value("retcode", 1) != 0) {
        if (created_destdir) fs::remove(dest, ec);
        ret["result"] = false;
        co_return stop_with(
            ret,
            "Failed to read from tar archive using Python's native tar file support. If "
            "archive is compressed using something other than gzip or bzip2, the 'options' "
            "argument may be required to pass the correct options to the tar command in order "
            "to extract the archive.");
      }
      files = trimmed(member_names(names.value("stdout", "")));
      co_return false;
    }
    std::string cmd = tar_command(r.options, cached);
    json done = co_await run_all(c, std::move(cmd), dest);
    if (done.value("retcode", 1) != 0) {
      ret["result"] = false;
      ret["changes"] = done;
      co_return true;
    }
    std::vector<std::string> list = modules::output_lines(done.value("stdout", ""));
    if (list.empty()) {
      files = "no tar output so far";
    } else {
      files = trimmed(list);
    }
    co_return false;
  } catch (const base::error& e) {
    error = e.what();
  }
  co_return stop_with(ret, error);
}

// user/group over enforce_ownership_on, or over the archive's top-level
// members (directories recursively). Under test nothing changes: what
// would is a change. Paths missing or left unchanged are collected.
struct ownership {
  std::vector<std::string> missing;
  std::vector<std::string> failed;
};
ownership enforce_ownership(const state_call& c, const request& r, const json& contents,
                            json& ret) {
  ownership o;
  if (!r.owned()) return o;
  std::error_code ec;
  std::vector<std::string> dirs;
  std::vector<std::string> plain_files;
  if (r.enforce_on) {
    if (fs::is_directory(*r.enforce_on, ec)) {
      dirs.push_back(*r.enforce_on);
    } else {
      plain_files.push_back(*r.enforce_on);
    }
  } else {
    for (const auto& d : contents["top_level_dirs"]) dirs.push_back(r.name + d.get<std::string>());
    for (const char* kind : {"top_level_files", "top_level_links"}) {
      for (const auto& f : contents[kind]) plain_files.push_back(r.name + f.get<std::string>());
    }
  }
  for (const auto& d : dirs) {
    if (!fs::is_directory(d, ec)) {
      if (!c.test) o.missing.push_back(d);
      continue;
    }
    bool changed = false;
    if (c.test) {
      // Under test nothing changes: the directory itself is compared.
      struct stat st {};
      changed = ::lstat(d.c_str(), &st) == 0 && r.changes_owner(st);
    } else {
      changed = chown_tree(d, r.uid, r.gid, true, o.failed);
    }
    if (changed) ret["changes"]["updated ownership"] = true;
  }
  for (const auto& f : plain_files) {
    struct stat st {};
    if (::lstat(f.c_str(), &st) != 0) {
      if (!c.test) {
        if (errno == ENOENT) o.missing.push_back(f);
        o.failed.push_back(f);
      }
      continue;
    }
    if (!r.changes_owner(st)) continue;
    if (c.test || ::lchown(f.c_str(), r.uid, r.gid) == 0) {
      ret["changes"]["updated ownership"] = true;
    } else {
      o.failed.push_back(f);
    }
  }
  return o;
}

// Salt's reason added to an extraction's comment when members were missing.
std::string explained(const destination_check& d, std::string comment) {
  if (d.contents_missing) comment += ", due to absence of one or more files/dirs";
  return comment;
}

// The result and comment of a run that got this far, as Salt words them.
void finish(const state_call& c, const request& r, const destination_check& d,
            const json& files, bool created_destdir, const ownership& o, json& ret) {
  if (d.extraction_needed) {
    if (!files.empty()) {
      if (created_destdir) ret["changes"]["directories_created"] = json::array({r.name});
      ret["changes"]["extracted_files"] = files;
      ret["comment"] = explained(d, r.source_match + " extracted to " + r.name) +
                       ". Output was trimmed to " + py_text(r.trim_output) + " number of lines";
      ret["result"] = true;
    } else {
      ret["result"] = false;
      ret["comment"] = "No files were extracted from " + r.source_match;
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
  auto add_list = [&ret](const std::string& intro, const std::vector<std::string>& paths) {
    std::string comment = ret["comment"].get<std::string>() + "\n\n" + intro + "\n";
    for (const auto& p : paths) comment += "\n- " + p;
    ret["comment"] = comment;
  };
  if (!o.missing.empty()) {
    if (!r.if_missing) ret["result"] = false;
    add_list("While trying to enforce user/group ownership, the following paths were missing:",
             o.missing);
  }
  if (!o.failed.empty()) {
    ret["result"] = false;
    add_list("While trying to enforce user/group ownership, Salt was unable to change ownership "
             "on the following paths:",
             o.failed);
  }
}

asio::awaitable<json> extracted(state_call c) {
  json ret = result_first_ret(c.name(), false);
  request r;
  if (read_destination(c, r, ret) || read_owner(c, r, ret) || read_source(c, r, ret) ||
      read_extraction_options(c, r, ret)) {
    co_return ret;
  }
  if (co_await read_source_sum(c, r, ret)) co_return ret;
  std::string cached;
  if (co_await cache_source(c, r, ret, cached)) co_return ret;
  json contents;
  if (co_await list_contents(c, r, cached, ret, contents)) co_return ret;
  if (c.flag("enforce_toplevel", true) &&
      (contents["top_level_dirs"].size() > 1 || !contents["top_level_files"].empty())) {
    stop_with(ret, "Archive does not have a single top-level directory. To allow this archive "
                   "to be extracted, set 'enforce_toplevel' to False. To avoid a '" +
                       r.archive_format +
                       "-bomb' it may also be advisable to set a top-level directory by adding "
                       "it to the 'name' value (for example, setting 'name' to " +
                       r.name + "some_dir instead of " + r.name + ").");
    co_return ret;
  }
  if (c.flag("clean") && c.flag("clean_parent")) {
    stop_with(ret, "Only one of 'clean' and 'clean_parent' can be set to True");
    co_return ret;
  }
  destination_check d;
  if (check_destination(c, r, contents, ret, d)) co_return ret;
  bool created_destdir = false;
  json files = json::array();
  if (d.extraction_needed) {
    if (r.source_is_local && r.want_hash && !r.skip_verify) {
      std::string digest = co_await digest_of(c, r.source_match, *r.want_hash);
      if (digest != r.want_hash->hsum) {
        stop_with(ret, r.source_match + " does not match the desired source_hash " +
                           r.want_hash->hsum);
        co_return ret;
      }
    }
    if (c.test) {
      ret["result"] = nullptr;
      std::string comment = "Archive " + r.source_match + " would be extracted to " + r.name;
      if (c.flag("clean")) comment += ", after cleaning destination path(s)";
      stop_with(ret, explained(d, comment));
      co_return ret;
    }
    if (clean_destination(c, r, contents, ret)) co_return ret;
    if (co_await extract(c, r, cached, ret, files, created_destdir)) co_return ret;
  }
  ownership o = enforce_ownership(c, r, contents, ret);
  finish(c, r, d, files, created_destdir, o, ret);
  // keep_source: False drops a copy fetched from a master; a masterless
  // minion's salt:// file is the file root's own and stays.
  if (!r.source_is_local && !r.keep_source && c.context != nullptr &&
      (modules::is_remote_url(r.source) || c.context->files().remote())) {
    std::error_code ec;
    fs::remove(cached, ec);
  }
  co_return ret;
}

}  // namespace
}  // namespace archive_states

void register_archive_states(registry& reg) {
  using namespace archive_states;
  reg.add("archive.extracted", extracted, {"name", "source"},
          "archive.extracted name=DIR source=salt://|URL|PATH [archive_format=tar|zip] "
          "[source_hash=] [source_hash_name=] [skip_verify=] [options=] [enforce_toplevel=True] [if_missing=] "
          "[user=] [group=] [enforce_ownership_on=] [overwrite=] [clean=] [clean_parent=] "
          "[force=] [trim_output=] [keep_source=True] [use_cmd_unzip=]: the archive's files "
          "are in DIR");
}

}  // namespace brine::states
