// The archive module, as far as archive.extracted needs it: Salt's
// archive.list, archive.unzip and archive.cmd_unzip. Tar archives are read
// with the tar tool (which finds gzip, bzip2 and xz compression itself), zip
// archives with unzip/zipinfo, so no archive parser runs in the minion.

#include <sys/stat.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/archive_listing.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/process.h"
#include "modules/registry.h"

namespace brine::modules {
namespace archive_mod {
namespace {

using json = nlohmann::json;

asio::awaitable<process_result> run_tool(const call& c, std::vector<std::string> argv,
                                         std::string cwd = "", std::string runas = "") {
  process_options opts;
  opts.argv = std::move(argv);
  opts.cwd = std::move(cwd);
  opts.runas = std::move(runas);
  opts.env = {{"LC_ALL", "C"}, {"LANGUAGE", "C"}};
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  co_return r;
}


// `tar -tv` of a local file: each member's type from its mode column.
asio::awaitable<listing> list_tar(const call& c, std::string name, std::string local) {
  std::vector<std::string> argv = {"tar", "--numeric-owner", "-tvf", local};
  process_result r = co_await run_tool(c, std::move(argv));
  if (r.retcode != 0) {
    throw tool_failure(
        "Unable to list contents of " + name +
        ". If this is an XZ-compressed tar archive, install XZ Utils to enable listing its "
        "contents. If it is compressed using something other than XZ, it may be necessary to "
        "specify CLI options to decompress the archive. See the documentation for details.");
  }
  listing out = parse_tar_listing(r.stdout_text);
  co_return out;
}

// zipinfo's long listing: the mode column gives directories and symlinks;
// every file's parent directories count as directories (Salt's _list_zip).
asio::awaitable<listing> list_zip(const call& c, std::string name, std::string local) {
  std::vector<std::string> argv = {"unzip", "-Z", "-l", local};
  process_result r = co_await run_tool(c, std::move(argv));
  if (r.retcode != 0) throw tool_failure(name + " is not a ZIP file");
  listing out = parse_zip_listing(r.stdout_text);
  co_return out;
}

// A salt:// URL (through the minion's file client) or a local path, as a
// path on this machine; nullopt when it cannot be had.
asio::awaitable<std::optional<std::string>> local_copy(const call& c, std::string name,
                                                       std::string saltenv) {
  if (auto u = fileserver::parse_url(name)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty() || c.context == nullptr) co_return std::nullopt;
    std::vector<std::string> paths{checked.path};
    std::string env = u->saltenv.value_or(saltenv);
    auto got = co_await c.context->files().cache(std::move(env), std::move(paths));
    if (!got[0].error.empty()) co_return std::nullopt;
    co_return got[0].local;
  }
  std::string path = name.starts_with("file://") ? name.substr(7) : name;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) co_return std::nullopt;
  co_return path;
}

asio::awaitable<outcome> list(call c) {
  arguments a("archive.list", c,
              {"name", "archive_format", "options", "strip_components", "clean", "verbose",
               "saltenv", "source_hash", "use_etag"});
  std::string name = a.scalar_text("name", "");
  if (name.empty()) a.fail("needs the archive: archive.list /path/to/archive.tar.gz");
  std::optional<std::string> local = co_await local_copy(c, name, a.scalar_text("saltenv", "base"));
  if (!local) throw tool_failure("Failed to cache " + name);
  long strip = 0;
  if (const json* s = a.get("strip_components")) {
    std::optional<double> n = as_number(*s);
    strip = n ? static_cast<long>(*n) : -1;
    if (strip <= 0) throw tool_failure("'strip_components' must be a positive integer");
  }
  std::optional<std::string> format = a.text("archive_format");
  if (!format || format->empty()) {
    std::string path = name;
    if (auto q = path.find('?'); q != std::string::npos) path.resize(q);
    format = guess_archive_type(path);
    if (!format) {
      throw tool_failure("Unable to guess archive format, please pass an 'archive_format' "
                         "argument.");
    }
  }
  listing l;
  if (*format == "tar") {
    l = co_await list_tar(c, name, *local);
  } else if (*format == "zip") {
    l = co_await list_zip(c, name, *local);
  } else {
    throw tool_failure("Unsupported archive format '" + *format + "'");
  }
  if (strip > 0) {
    for (auto* item : {&l.dirs, &l.files, &l.links}) {
      std::vector<std::string> kept;
      for (const auto& path : *item) {
        std::size_t at = 0;
        bool ok = true;
        for (long i = 0; i < strip; ++i) {
          at = path.find('/', at);
          if (at == std::string::npos) {
            ok = false;
            break;
          }
          ++at;
        }
        if (ok && at < path.size()) kept.push_back(path.substr(at));
      }
      std::sort(kept.begin(), kept.end());
      *item = kept;
    }
  }
  for (auto* item : {&l.dirs, &l.files, &l.links}) std::sort(item->begin(), item->end());
  if (!a.flag("verbose", false)) {
    std::vector<std::string> all = l.dirs;
    all.insert(all.end(), l.files.begin(), l.files.end());
    all.insert(all.end(), l.links.begin(), l.links.end());
    std::sort(all.begin(), all.end());
    co_return outcome{all};
  }
  json ret = json::object();
  ret["dirs"] = l.dirs;
  ret["files"] = l.files;
  ret["links"] = l.links;
  // Salt's top_level_dirs: one-slash dirs, and the common prefix's first
  // component when every dir shares one.
  json top_dirs = json::array();
  for (const auto& d : l.dirs) {
    if (std::count(d.begin(), d.end(), '/') == 1) top_dirs.push_back(d);
  }
  if (!l.dirs.empty()) {
    std::string prefix = l.dirs.front();
    for (const auto& d : l.dirs) {
      std::size_t i = 0;
      while (i < prefix.size() && i < d.size() && prefix[i] == d[i]) ++i;
      prefix.resize(i);
    }
    if (auto slash = prefix.find('/'); slash != std::string::npos) {
      std::string first = prefix.substr(0, slash) + "/";
      if (std::find(top_dirs.begin(), top_dirs.end(), first) == top_dirs.end()) {
        top_dirs.push_back(first);
      }
    }
  }
  ret["top_level_dirs"] = top_dirs;
  json top_files = json::array();
  for (const auto& f : l.files) {
    if (f.find('/') == std::string::npos) top_files.push_back(f);
  }
  ret["top_level_files"] = top_files;
  json top_links = json::array();
  for (const auto& f : l.links) {
    if (f.find('/') == std::string::npos) top_links.push_back(f);
  }
  ret["top_level_links"] = top_links;
  co_return outcome{ret};
}

// Salt's _trim_files: past `count` (100 for True) the list ends with a note.
json trim_files(std::vector<std::string> files, const json* trim) {
  if (trim == nullptr || (trim->is_boolean() && !trim->get<bool>())) return files;
  std::size_t count = 100;
  if (trim->is_number_integer()) count = static_cast<std::size_t>(std::max<long long>(0, trim->get<long long>()));
  if (files.size() > count) {
    files.resize(count);
    files.push_back("List trimmed after " + std::to_string(count) + " files.");
  }
  return files;
}

std::vector<std::string> excludes_of(const arguments& a) {
  std::vector<std::string> out;
  const json* e = a.get("excludes");
  if (e == nullptr) return out;
  if (e->is_array()) {
    for (const auto& x : *e) out.push_back(x.is_string() ? x.get<std::string>() : x.dump());
    return out;
  }
  std::string text = a.scalar_text("excludes", "");
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = text.find(',', start);
    out.push_back(trim(text.substr(start, comma == std::string::npos ? comma : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void refuse_password_and_template(const arguments& a) {
  if (a.get("password")) {
    a.fail("password= is not supported by brine (encrypted zip archives are not extracted)");
  }
  if (a.get("template")) a.fail("template= is not supported by brine");
}

// Salt's archive.unzip: every member but the excluded ones extracted into
// dest (existing files overwritten, modes as the archive has them); the
// members' names are the answer.
asio::awaitable<outcome> unzip(call c) {
  arguments a("archive.unzip", c,
              {"zip_file", "dest", "excludes", "options", "template", "runas", "trim_output",
               "password", "extract_perms"});
  refuse_password_and_template(a);
  std::string zip = a.scalar_text("zip_file", "");
  std::string dest = a.scalar_text("dest", "");
  if (zip.empty() || dest.empty()) a.fail("needs the archive and a destination: archive.unzip ZIP DEST");
  std::string runas = a.scalar_text("runas", "");
  std::vector<std::string> names_argv = {"unzip", "-Z1", zip};
  process_result names = co_await run_tool(c, std::move(names_argv));
  if (names.retcode != 0) {
    throw tool_failure("Exception encountered unpacking zipfile: " + tool_error("zipinfo", names));
  }
  std::vector<std::string> excludes = excludes_of(a);
  std::vector<std::string> files;
  for (const auto& n : output_lines(names.stdout_text)) {
    if (!n.empty() && std::find(excludes.begin(), excludes.end(), n) == excludes.end()) {
      files.push_back(n);
    }
  }
  std::vector<std::string> argv = {"unzip", "-o", "-qq", zip, "-d", dest};
  if (!excludes.empty()) {
    argv.push_back("-x");
    argv.insert(argv.end(), excludes.begin(), excludes.end());
  }
  process_result r = co_await run_tool(c, std::move(argv), "", runas);
  if (r.retcode != 0 && r.retcode != 1) {
    throw tool_failure("Exception encountered unpacking zipfile: " + tool_error("unzip", r));
  }
  co_return outcome{trim_files(files, a.get("trim_output"))};
}

// Salt's archive.cmd_unzip: `unzip [OPTIONS] ZIP -d DEST [-x EXCLUDES]`,
// its output lines the answer.
asio::awaitable<outcome> cmd_unzip(call c) {
  arguments a("archive.cmd_unzip", c,
              {"zip_file", "dest", "excludes", "options", "template", "runas", "trim_output",
               "password"});
  refuse_password_and_template(a);
  std::string zip = a.scalar_text("zip_file", "");
  std::string dest = a.scalar_text("dest", "");
  if (zip.empty() || dest.empty()) a.fail("needs the archive and a destination: archive.cmd_unzip ZIP DEST");
  std::vector<std::string> argv = {"unzip"};
  for (const auto& w : split_words(a.scalar_text("options", ""))) argv.push_back(w);
  argv.push_back(zip);
  argv.push_back("-d");
  argv.push_back(dest);
  if (a.get("excludes")) {
    argv.push_back("-x");
    for (auto& e : excludes_of(a)) argv.push_back(e);
  }
  process_options opts;
  opts.argv = std::move(argv);
  opts.runas = a.scalar_text("runas", "");
  opts.merge_stderr = true;
  opts.timeout = child_limit(c.timeout);
  process_result r = co_await run_process(std::move(opts));
  std::string out = trim(r.stdout_text);
  if (r.retcode != 0) throw tool_failure(out);
  co_return outcome{trim_files(output_lines(out), a.get("trim_output"))};
}

}  // namespace
}  // namespace archive_mod

void register_archive_module(registry& reg) {
  using namespace archive_mod;
  reg.add("archive.list", failures_as_outcomes<list>,
          "archive.list NAME [archive_format=tar|zip] [strip_components=] [verbose=False] "
          "[saltenv=]: the members of a tar or zip archive (a path or salt://), sorted; verbose: "
          "dirs, files, links and the top-level ones.");
  reg.add("archive.unzip", failures_as_outcomes<unzip>,
          "archive.unzip ZIP DEST [excludes=] [runas=] [trim_output=False]: extracts a zip "
          "archive (with unzip), returns the names of its members.");
  reg.add("archive.cmd_unzip", failures_as_outcomes<cmd_unzip>,
          "archive.cmd_unzip ZIP DEST [options=] [excludes=] [runas=] [trim_output=False]: "
          "unzip [OPTIONS] ZIP -d DEST, returns unzip's output lines.");
}

}  // namespace brine::modules
