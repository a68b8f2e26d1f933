// Salt's file_tree ext_pillar: a directory tree as pillar, for each minion
// ROOT/hosts/ID and the ROOT/nodegroups/GROUP of every nodegroup it is in;
// directories are keys, files are keys whose values are their contents.
#include <fnmatch.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/python_truth.h"
#include "ext_pillar/arguments.h"
#include "ext_pillar/ext_pillar.h"
#include "pillar/merge.h"

namespace brine::ext_pillar {

using nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace file_tree_impl {
namespace {

// Salt's merge_recurse: pillar's recurse merge without merge_lists.
void merge_recurse(ordered_json& dest, const ordered_json& upd) {
  pillar::detail::merge(dest, upd, pillar::strategy::recurse, false);
}

struct settings {
  bool follow_dir_links = false;
  // keep_newline: true/false, or globs over paths relative to the host or
  // nodegroup directory ("./name" for a file directly in it, as Salt's
  // os.path.join(".", name) makes it).
  bool keep_all = false;
  bool by_glob = false;
  std::vector<std::string> keep_globs;
};

// Salt's _check_newline: whether the file's one trailing newline goes.
bool strip_newline(const settings& s, const std::string& prefix, const std::string& name) {
  if (!s.by_glob) return !s.keep_all;
  std::string path = prefix + "/" + name;
  return std::none_of(s.keep_globs.begin(), s.keep_globs.end(), [&](const std::string& g) {
    return ::fnmatch(g.c_str(), path.c_str(), 0) == 0;
  });
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    auto lead = static_cast<unsigned char>(s[i]);
    size_t n = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// The file's bytes as the pillar value: text when it is UTF-8 (Salt keeps
// bytes, which its msgpack sends as a string to the minion).
ordered_json read_value(const fs::path& file, const settings& s, const std::string& prefix,
                        bool& ok) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  if (!in && !in.eof()) {
    spdlog::error("file_tree: Error reading {}: {}", file.string(), std::strerror(errno));
    ok = false;
    return nullptr;
  }
  std::string text = buf.str();
  if (!text.empty() && text.back() == '\n' && strip_newline(s, prefix, file.filename().string())) {
    text.pop_back();
  }
  ok = true;
  if (valid_utf8(text)) return text;
  // Salt keeps a file's bytes; a text that is not UTF-8 stays bytes here too
  // (MessagePack bin to the minion), not a string that cannot be encoded.
  return ordered_json::binary(std::vector<std::uint8_t>(text.begin(), text.end()));
}

// Salt's _construct_pillar: os.walk over `top`, top-down.
void construct(const fs::path& dir, const std::string& prefix, const settings& s,
               ordered_json& node) {
  std::error_code ec;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(*it);
  }
  if (ec) {
    spdlog::error("{}: {}", dir.string(), ec.message());
    return;
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  // os.walk: the directories' keys first, then the files', then down.
  std::vector<fs::path> subdirs;
  std::vector<const fs::directory_entry*> files;
  for (const auto& e : entries) {
    std::error_code dec;
    if (e.is_directory(dec)) {
      // os.walk lists a link to a directory among the directories, and
      // enters it only with followlinks.
      node[e.path().filename().string()] = ordered_json::object();
      if (!e.is_symlink(dec) || s.follow_dir_links) subdirs.push_back(e.path());
    } else {
      files.push_back(&e);
    }
  }
  for (const auto* e : files) {
    std::error_code dec;
    if (!e->is_regular_file(dec)) {
      spdlog::error("file_tree: {}: not a regular file", e->path().string());
      continue;
    }
    bool ok = false;
    ordered_json v = read_value(e->path(), s, prefix, ok);
    if (ok) node[e->path().filename().string()] = std::move(v);
  }
  for (const auto& d : subdirs) {
    std::string name = d.filename().string();
    construct(d, prefix == "." ? name : prefix + "/" + name, s, node[name]);
  }
}

ordered_json pillar_of(const fs::path& top, const settings& s) {
  ordered_json out = ordered_json::object();
  construct(top, ".", s, out);
  return out;
}

// Salt's _ext_pillar for one root: nodegroups first, the host's own over them.
ordered_json read_root(const pillar::options::ext_call& call, const fs::path& root,
                       const settings& s, const target::nodegroups& groups) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    spdlog::error("file_tree: root_dir {} does not exist or is not a directory", root.string());
    return ordered_json::object();
  }
  ordered_json out = ordered_json::object();
  fs::path ngroups = root / "nodegroups";
  if (fs::exists(ngroups, ec) && !groups.empty()) {
    std::vector<std::string> names;
    for (fs::directory_iterator it(ngroups, ec), end; !ec && it != end; it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    target::minion_data data{call.grains, {}};
    for (const auto& name : names) {
      if (!groups.contains(name)) continue;
      bool in = false;
      try {
        auto e = target::expression::parse(name, target::type::nodegroup, groups);
        in = e.matches(call.id, data, false);
      } catch (const std::exception& err) {
        spdlog::error("file_tree: nodegroup {}: {}", name, err.what());
      }
      if (in) merge_recurse(out, pillar_of(ngroups / name, s));
    }
  }
  fs::path host = root / "hosts" / std::string(call.id);
  if (!fs::exists(host, ec)) return out;
  if (!fs::is_directory(host, ec)) {
    spdlog::error("file_tree: {} exists, but is not a directory", host.string());
    return out;
  }
  merge_recurse(out, pillar_of(host, s));
  return out;
}

}  // namespace
}  // namespace file_tree_impl

pillar::options::ext_function file_tree(target::nodegroups groups) {
  return [groups = std::move(groups)](const pillar::options::ext_call& call) -> ordered_json {
    using namespace file_tree_impl;
    auto args = detail::bind(call.config, {{"root_dir", ordered_json(nullptr)},
                                           {"follow_dir_links", ordered_json(false)},
                                           {"debug", ordered_json(false)},
                                           {"keep_newline", ordered_json(false)},
                                           {"render_default", ordered_json(nullptr)},
                                           {"renderer_blacklist", ordered_json(nullptr)},
                                           {"renderer_whitelist", ordered_json(nullptr)},
                                           {"template", ordered_json(false)}});
    if (!base::python_truth(args[0])) {
      spdlog::error("file_tree: no root_dir specified");
      return ordered_json::object();
    }
    if (args[7] == true) {
      throw base::error(
          "template: True (rendering each file through a renderer pipe) is not in brine; "
          "render the data into pillar_roots sls files instead, or drop template");
    }
    settings s;
    s.follow_dir_links = base::python_truth(args[1]);
    if (args[3].is_boolean()) {
      s.keep_all = args[3].get<bool>();
    } else if (args[3].is_array()) {
      for (const auto& g : args[3]) s.keep_globs.push_back(detail::text_of(g));
      s.by_glob = true;
    } else {
      spdlog::error(
          "file_tree: keep_newline must be either True/False or a list of file globs. Skipping "
          "this ext_pillar for root_dir {}",
          detail::text_of(args[0]));
      return ordered_json::object();
    }
    fs::path root = detail::text_of(args[0]);
    if (root.is_relative()) {
      // Salt resolves it against the pillarenv's pillar_roots; brine's
      // masters compile every environment at once.
      spdlog::error("file_tree: root_dir is relative but pillarenv is not set");
      return ordered_json::object();
    }
    return read_root(call, root, s, groups);
  };
}

}  // namespace brine::ext_pillar
