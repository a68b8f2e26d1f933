// The OS grains, derived as Salt 3006's _linux_distribution_data does under a
// onedir install. There the `lsb_release` Python module cannot be imported (it
// lives in the system Python), so Salt always takes its "legacy" path: the
// lsb_distrib_* grains come from /etc/lsb-release or else from os-release, and
// os_family comes from _OS_FAMILY_MAP, not from ID_LIKE.

#include <algorithm>
#include <array>
#include <cctype>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grains/core.h"
#include "grains/text.h"

namespace brine::grains {
namespace {

using str_map = std::map<std::string, std::string, std::less<>>;

// Salt's _OS_NAME_MAP: the first ten characters of the de-"Linux"-ed,
// space-free, lowercased osfullname → the `os` grain.
const std::map<std::string_view, std::string_view>& os_name_map() {
  static const std::map<std::string_view, std::string_view> m = {
      {"redhatente", "RedHat"},
      {"gentoobase", "Gentoo"},
      {"archarm", "Arch ARM"},
      {"arch", "Arch"},
      {"debian", "Debian"},
      {"Junos", "Junos"},
      {"raspbian", "Raspbian"},
      {"fedoraremi", "Fedora"},
      {"chapeau", "Chapeau"},
      {"korora", "Korora"},
      {"amazonami", "Amazon"},
      {"alt", "ALT"},
      {"enterprise", "OEL"},
      {"oracleserv", "OEL"},
      {"cloudserve", "CloudLinux"},
      {"cloudlinux", "CloudLinux"},
      {"almalinux", "AlmaLinux"},
      {"pidora", "Fedora"},
      {"scientific", "ScientificLinux"},
      {"synology", "Synology"},
      {"nilrt", "NILinuxRT"},
      {"poky", "Poky"},
      {"manjaro", "Manjaro"},
      {"manjarolin", "Manjaro"},
      {"univention", "Univention"},
      {"antergos", "Antergos"},
      {"sles", "SUSE"},
      {"void", "Void"},
      {"slesexpand", "RES"},
      {"linuxmint", "Mint"},
      {"neon", "KDE neon"},
      {"pop", "Pop"},
      {"rocky", "Rocky"},
      {"alibabaclo", "Alinux"},
      {"mendel", "Mendel"},
  };
  return m;
}

// Salt's _ID_AND_NAME_TO_OS_NAME_MAP: (os-release ID, NAME) → `os`.
const std::map<std::pair<std::string_view, std::string_view>, std::string_view>& id_name_map() {
  static const std::map<std::pair<std::string_view, std::string_view>, std::string_view> m = {
      {{"astra", "Astra Linux (Orel)"}, "AstraLinuxCE"},
      {{"astra", "Astra Linux (Smolensk)"}, "AstraLinuxSE"},
      {{"pop", "Pop!_OS"}, "Pop"},
  };
  return m;
}

// Salt's _OS_FAMILY_MAP: `os` → `os_family`; `os` itself when absent.
const std::map<std::string_view, std::string_view>& os_family_map() {
  static const std::map<std::string_view, std::string_view> m = {
      {"Ubuntu", "Debian"},
      {"Fedora", "RedHat"},
      {"Chapeau", "RedHat"},
      {"Korora", "RedHat"},
      {"FedBerry", "RedHat"},
      {"CentOS", "RedHat"},
      {"CentOS Stream", "RedHat"},
      {"GoOSe", "RedHat"},
      {"Scientific", "RedHat"},
      {"Amazon", "RedHat"},
      {"CloudLinux", "RedHat"},
      {"AlmaLinux", "RedHat"},
      {"OVS", "RedHat"},
      {"OEL", "RedHat"},
      {"XCP", "RedHat"},
      {"XCP-ng", "RedHat"},
      {"XenServer", "RedHat"},
      {"RES", "RedHat"},
      {"Sangoma", "RedHat"},
      {"VMware Photon OS", "RedHat"},
      {"Mandrake", "Mandriva"},
      {"Mint", "Debian"},
      {"VMwareESX", "VMware"},
      {"Bluewhite64", "Bluewhite"},
      {"Slamd64", "Slackware"},
      {"SLES", "Suse"},
      {"SUSE Enterprise Server", "Suse"},
      {"SUSE  Enterprise Server", "Suse"},
      {"SLED", "Suse"},
      {"openSUSE", "Suse"},
      {"SUSE", "Suse"},
      {"openSUSE Leap", "Suse"},
      {"openSUSE Tumbleweed", "Suse"},
      {"SLES_SAP", "Suse"},
      {"Arch ARM", "Arch"},
      {"Manjaro", "Arch"},
      {"Manjaro ARM", "Arch"},
      {"Antergos", "Arch"},
      {"EndeavourOS", "Arch"},
      {"ALT", "RedHat"},
      {"Trisquel", "Debian"},
      {"GCEL", "Debian"},
      {"Linaro", "Debian"},
      {"elementary OS", "Debian"},
      {"elementary", "Debian"},
      {"Univention", "Debian"},
      {"ScientificLinux", "RedHat"},
      {"Raspbian", "Debian"},
      {"Devuan", "Debian"},
      {"antiX", "Debian"},
      {"Kali", "Debian"},
      {"Parrot OS", "Debian"},
      {"neon", "Debian"},
      {"Cumulus", "Debian"},
      {"Deepin", "Debian"},
      {"NILinuxRT", "NILinuxRT"},
      {"KDE neon", "Debian"},
      {"Void", "Void"},
      {"IDMS", "Debian"},
      {"Funtoo", "Gentoo"},
      {"TurnKey", "Debian"},
      {"Pop", "Debian"},
      {"Rocky", "RedHat"},
      {"AstraLinuxCE", "Debian"},
      {"AstraLinuxSE", "Debian"},
      {"Alinux", "RedHat"},
      {"Mendel", "Debian"},
      {"OSMC", "Debian"},
  };
  return m;
}

// Python 3.10's platform.freedesktop_os_release parser: NAME, ID and
// PRETTY_NAME default to Linux/linux/Linux; `KEY=value` with matching quotes
// stripped and \\ \$ \" \' \` unescaped.
str_map parse_os_release(std::string_view text) {
  str_map info{{"NAME", "Linux"}, {"ID", "linux"}, {"PRETTY_NAME", "Linux"}};
  for (std::string_view line : text::lines(text)) {
    size_t n = 0;
    while (n < line.size() && (text::is_ascii_alnum(line[n]) || line[n] == '_')) ++n;
    if (n == 0 || n >= line.size() || line[n] != '=') continue;
    std::string_view value = line.substr(n + 1);
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    std::string unescaped;
    for (size_t i = 0; i < value.size(); ++i) {
      if (value[i] == '\\' && i + 1 < value.size() &&
          std::string_view("\\$\"'`").find(value[i + 1]) != std::string_view::npos) {
        ++i;
      }
      unescaped += value[i];
    }
    info[std::string(line.substr(0, n))] = std::move(unescaped);
  }
  return info;
}

// Salt's _parse_lsb_release with its _LSB_REGEX: the value is the longest run
// of word characters, whitespace, '.', '-' after an optional quote, so
// `DISTRIB_DESCRIPTION="Debian GNU/Linux 12"` yields "Debian GNU".
str_map parse_lsb_release(std::string_view content) {
  static constexpr std::array<std::string_view, 4> keys = {"ID", "RELEASE", "CODENAME",
                                                           "DESCRIPTION"};
  str_map ret;
  for (std::string_view line : text::lines(content)) {
    if (!line.starts_with("DISTRIB_")) continue;
    std::string_view rest = line.substr(8);
    auto key = std::find_if(keys.begin(), keys.end(), [&](std::string_view k) {
      return rest.starts_with(k) && rest.size() > k.size() && rest[k.size()] == '=';
    });
    if (key == keys.end()) continue;
    rest = rest.substr(key->size() + 1);
    if (!rest.empty() && (rest.front() == '"' || rest.front() == '\'')) rest.remove_prefix(1);
    size_t n = 0;
    while (n < rest.size() && (text::is_word(rest[n]) || text::is_space(rest[n]) ||
                               rest[n] == '.' || rest[n] == '-')) {
      ++n;
    }
    if (n == 0) continue;
    ret["lsb_distrib_" + text::lower(*key)] = text::rstrip(rest.substr(0, n));
  }
  return ret;
}

// Salt's _REPLACE_LINUX_RE.sub("", s): drop every `\W(?:gnu/)?linux`, any case.
std::string replace_linux(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (!text::is_word(s[i])) {
      std::string_view after = s.substr(i + 1);
      if (text::istarts_with(after, "gnu/linux")) {
        i += 1 + 9;
        continue;
      }
      if (text::istarts_with(after, "linux")) {
        i += 1 + 5;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

// Salt's _derive_os_grain.
std::string derive_os(const std::string& osfullname, const std::string* os_id) {
  if (os_id != nullptr) {
    auto it = id_name_map().find({*os_id, osfullname});
    if (it != id_name_map().end()) return std::string(it->second);
  }
  std::string distroname = text::strip(replace_linux(osfullname));
  std::string shortname;
  for (char c : distroname) {
    if (c != ' ') shortname += c;
  }
  shortname = text::lower(shortname).substr(0, std::min<size_t>(10, shortname.size()));
  auto it = os_name_map().find(shortname);
  return it == os_name_map().end() ? distroname : std::string(it->second);
}

// Salt's _parse_cpe_name, reduced to the two fields Salt reads (vendor, version).
std::optional<std::pair<std::string, std::string>> parse_cpe(std::string_view cpe) {
  std::vector<std::string> p = text::split(cpe, ':');
  if (p.size() <= 4 || p[0] != "cpe") return std::nullopt;
  auto star = [](const std::string& x) { return x == "*" ? std::string() : x; };
  if (p[1].starts_with("/")) return std::pair{p[2], p[4]};
  if (p[1] == "2.3" && (p.size() == 6 || (p.size() > 7 && p.size() <= 13))) {
    return std::pair{star(p[3]), star(p[5])};
  }
  return std::nullopt;
}

// The `distro` package's _parse_distro_release_content: "<name> [release]
// <version> [(<codename>)]", matched on the reversed line.
struct release_content {
  std::string name, version, codename;
};

release_content parse_release_content(std::string_view line) {
  static const std::regex reversed(
      R"(^(?:[^)]*\)(.*)\()? *(?:STL )?([\d.+\-a-z]*\d) *(?:esaeler *)?(.+))");
  std::string s = text::strip(line);
  std::reverse(s.begin(), s.end());
  release_content out;
  std::smatch m;
  if (std::regex_search(s, m, reversed)) {
    auto rev = [](std::string x) {
      std::reverse(x.begin(), x.end());
      return x;
    };
    out.name = rev(m[3].str());
    out.version = rev(m[2].str());
    out.codename = rev(m[1].str());
  } else if (!s.empty()) {
    out.name = text::strip(line);
  }
  return out;
}

// What Salt's linux_distribution() gets from the `distro` package: name(),
// version(best=True), codename(). `distro` would run `lsb_release -a`; this
// reads /etc/lsb-release instead, and only /etc/centos-release or
// /etc/redhat-release as the distribution release file.
struct distro_info {
  std::string name, version, codename;
};

distro_info distro_fallback(const os_files& f, const str_map* osr, const str_map& lsb) {
  auto get = [](const str_map* m, std::string_view k) -> std::string {
    if (m == nullptr) return "";
    auto it = m->find(k);
    return it == m->end() ? "" : it->second;
  };
  release_content file;
  if (const auto& rf = f.centos_release ? f.centos_release : f.redhat_release; rf) {
    std::vector<std::string_view> lines = text::lines(*rf);
    if (!lines.empty()) file = parse_release_content(lines.front());
  }
  distro_info d;
  d.name = get(osr, "NAME");
  if (d.name.empty()) d.name = get(&lsb, "lsb_distrib_id");
  if (d.name.empty()) d.name = file.name;

  std::vector<std::string> versions = {
      get(osr, "VERSION_ID"),
      get(&lsb, "lsb_distrib_release"),
      file.version,
      parse_release_content(get(osr, "PRETTY_NAME")).version,
      parse_release_content(get(&lsb, "lsb_distrib_description")).version,
  };
  std::vector<std::string> like = text::split_ws(get(osr, "ID_LIKE"));
  if (get(osr, "ID") == "debian" || std::find(like.begin(), like.end(), "debian") != like.end()) {
    std::string dv;
    if (f.debian_version) {
      std::vector<std::string_view> lines = text::lines(*f.debian_version);
      if (!lines.empty()) dv = text::rstrip(lines.front());
    }
    versions.push_back(dv);
  }
  for (const std::string& v : versions) {
    if (d.version.empty() ||
        std::count(v.begin(), v.end(), '.') > std::count(d.version.begin(), d.version.end(), '.')) {
      d.version = v;
    }
  }

  if (osr != nullptr) {
    static const std::regex in_version(R"(\((\D+)\)|,\s*(\D+))");
    std::string version = get(osr, "VERSION");
    std::smatch m;
    if (std::regex_search(version, m, in_version)) d.codename = m[1].matched ? m[1] : m[2];
    if (osr->contains("VERSION_CODENAME")) {
      d.codename = get(osr, "VERSION_CODENAME");
    } else if (osr->contains("UBUNTU_CODENAME")) {
      d.codename = get(osr, "UBUNTU_CODENAME");
    }
  }
  if (d.codename.empty()) d.codename = get(&lsb, "lsb_distrib_codename");
  if (d.codename.empty()) d.codename = file.codename;

  auto unquote = [](const std::string& s) {
    return text::strip_chars(text::strip_chars(s, "\""), "'");
  };
  return {unquote(d.name), unquote(d.version), unquote(d.codename)};
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

}  // namespace

nlohmann::json osrelease_data(const std::string& os, const std::string& osfullname,
                              const std::string& osrelease) {
  nlohmann::json g = nlohmann::json::object();
  nlohmann::json info = nlohmann::json::array();
  for (const std::string& part : text::split(osrelease, '.')) {
    std::optional<int64_t> n = all_digits(part) ? text::py_int(part) : std::nullopt;
    if (n) {
      info.push_back(*n);
    } else {
      info.push_back(part);
    }
  }
  g["osrelease_info"] = info;
  const nlohmann::json& first = info.at(0);
  std::optional<int64_t> major = first.is_number_integer() ? std::optional(first.get<int64_t>())
                                                           : text::py_int(first.get<std::string>());
  if (major) g["osmajorrelease"] = *major;

  static constexpr std::array<std::string_view, 6> short_names = {"Debian", "FreeBSD", "OpenBSD",
                                                                  "NetBSD", "Mac",     "Raspbian"};
  bool use_os = std::find(short_names.begin(), short_names.end(), os) != short_names.end();
  std::string version = (os == "Ubuntu" || os == "Pop")
                            ? osrelease
                            : (first.is_string() ? first.get<std::string>() : first.dump());
  g["osfinger"] = (use_os ? os : osfullname) + "-" + version;
  return g;
}

nlohmann::json os_grains(const os_files& f) {
  str_map g;
  auto get = [&](std::string_view k) -> std::string {
    auto it = g.find(k);
    return it == g.end() ? "" : it->second;
  };

  str_map lsb;
  if (f.lsb_release) lsb = parse_lsb_release(*f.lsb_release);
  g.insert(lsb.begin(), lsb.end());

  std::optional<str_map> osr;
  if (f.os_release) {
    osr = parse_os_release(*f.os_release);
    g["os"] = derive_os(osr->at("NAME"), &osr->at("ID"));
    g["osfullname"] = text::strip(osr->at("NAME"));
  }

  if (text::lower(get("lsb_distrib_description")).starts_with("antergos")) {
    g["osfullname"] = "Antergos Linux";
  } else if (!g.contains("lsb_distrib_id")) {
    if (osr) {
      const str_map& o = *osr;
      g["lsb_distrib_id"] = text::strip(o.at("NAME"));
      if (o.contains("VERSION_ID")) g["lsb_distrib_release"] = o.at("VERSION_ID");
      if (o.contains("VERSION_CODENAME")) {
        g["lsb_distrib_codename"] = o.at("VERSION_CODENAME");
      } else if (o.contains("PRETTY_NAME")) {
        g["lsb_distrib_codename"] = o.at("PRETTY_NAME");
      }
      if (o.contains("CPE_NAME")) {
        auto cpe = parse_cpe(o.at("CPE_NAME"));
        if (cpe && (text::lower(cpe->first) == "suse" || text::lower(cpe->first) == "opensuse")) {
          g["os"] = "SUSE";
          if (o.contains("NAME") && o.at("NAME") == "openSUSE Leap") {
            g["osfullname"] = "Leap";
          } else if (o.contains("VERSION") && o.at("VERSION") == "Tumbleweed") {
            g["osfullname"] = o.at("VERSION");
          }
          if (!cpe->second.empty() && cpe->first == "opensuse") {
            g["lsb_distrib_release"] = cpe->second;
          }
        }
      }
      if (text::strip(o.at("ID")) == "mendel") {
        std::vector<std::string> words = text::split_ws(o.at("PRETTY_NAME"));
        if (words.size() >= 3) g["lsb_distrib_release"] = words[2];
      }
    } else if (f.centos_release) {
      g["lsb_distrib_id"] = "CentOS";
      for (std::string_view line : text::lines(*f.centos_release)) {
        static const std::regex release(R"(\d+\.\d+)");
        std::string l(line);
        std::smatch m;
        if (std::regex_search(l, m, release)) g["lsb_distrib_release"] = m.str();
        size_t open = l.find('(');
        size_t close = open == std::string::npos ? open : l.find(')', open + 1);
        if (close != std::string::npos) {
          g["lsb_distrib_codename"] = l.substr(open + 1, close - open - 1);
        }
      }
    }
  }

  distro_info d = distro_fallback(f, osr ? &*osr : nullptr, lsb);

  if (!g.contains("osfullname")) {
    if (text::lower(get("lsb_distrib_id")).starts_with("nilrt")) {
      g["osfullname"] = "nilrt";
    } else {
      g["osfullname"] = text::strip(g.contains("lsb_distrib_id") ? get("lsb_distrib_id") : d.name);
    }
  }

  std::string codename = get("lsb_distrib_codename");
  if (codename.find("CentOS Linux 7") != std::string::npos ||
      codename.find("CentOS Linux 8") != std::string::npos) {
    g.erase("lsb_distrib_release");
  }
  g["osrelease"] =
      text::strip(g.contains("lsb_distrib_release") ? get("lsb_distrib_release") : d.version);

  std::string os = get("os");
  if (!codename.empty() &&
      (os.find("Rocky") != std::string::npos || os.find("AlmaLinux") != std::string::npos ||
       os.find("AstraLinuxSE") != std::string::npos)) {
    size_t open = codename.find('(');
    if (open != std::string::npos) {
      std::string inner = codename.substr(open + 1);
      inner = inner.substr(0, inner.find(')'));
      if (os == "AstraLinuxSE") {
        std::vector<std::string> words = text::split_ws(inner);
        if (!words.empty()) g["lsb_distrib_codename"] = text::lower(words[0]);
      } else {
        g["lsb_distrib_codename"] = inner;
      }
    }
  }

  std::string oscodename = text::strip(get("lsb_distrib_codename"));
  if (oscodename.empty()) oscodename = d.codename;
  if (oscodename.find("Red Hat") != std::string::npos) oscodename = d.codename;
  g["oscodename"] = oscodename;

  if (!g.contains("os")) g["os"] = derive_os(g["osfullname"], nullptr);
  auto family = os_family_map().find(g["os"]);
  g["os_family"] = family == os_family_map().end() ? g["os"] : std::string(family->second);

  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : g) out[k] = v;
  if (!g["osrelease"].empty()) out.update(osrelease_data(g["os"], g["osfullname"], g["osrelease"]));
  return out;
}

os_files read_os_files(const fs_root& root) {
  os_files f;
  f.os_release = root.read("/etc/os-release");
  if (!f.os_release) f.os_release = root.read("/usr/lib/os-release");
  f.lsb_release = root.read("/etc/lsb-release");
  f.debian_version = root.read("/etc/debian_version");
  f.redhat_release = root.read("/etc/redhat-release");
  f.centos_release = root.read("/etc/centos-release");
  return f;
}

nlohmann::json os_grains(const fs_root& root) { return os_grains(read_os_files(root)); }

}  // namespace brine::grains
