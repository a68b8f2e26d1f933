#pragma once

#include <optional>
#include <string>
#include <vector>

// The member lists of an archive as its tools print them: GNU tar's
// `tar --numeric-owner -tv` and zipinfo's `unzip -Z -l`. The names come from
// the archive, so from whoever made it: pure functions, fuzzed
// (tests/fuzz/archive_listing_fuzz.cc).
namespace brine::modules {

// Salt's archive.list split: directories (with a trailing '/'), files and
// symlinks, in the order listed.
struct listing {
  std::vector<std::string> dirs;
  std::vector<std::string> files;
  std::vector<std::string> links;
};

// Each line's type from its mode column ('d', 'l', anything else a file),
// its name after five columns, GNU tar's escapes (\\, \n, \ooo ...) undone,
// a directory's trailing slashes dropped and one added back.
listing parse_tar_listing(const std::string& text);

// Each line's type from its mode column, its name after nine columns; the
// parent directories of the files count as directories (Salt's _list_zip),
// sorted and unique.
listing parse_zip_listing(const std::string& text);

// Salt's guess_archive_type: "tar", "zip" or "rar" by the name's ending
// (case-insensitive), nullopt for any other.
std::optional<std::string> guess_archive_type(std::string name);

// A tool's output split at '\n' (a line's trailing '\r' dropped; no empty
// last line for a final newline): what the listings and tar's verbose
// output are read line by line from.
std::vector<std::string> output_lines(const std::string& text);

// GNU tar's "escape" quoting undone.
std::string tar_unescape(const std::string& s);

}  // namespace brine::modules
