#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

// apt's one-line sources format (sources.list, sources.list.d/*.list) as
// Salt's aptpkg reads and writes it without python3-apt (its SourceEntry and
// SourcesList fallback): "[#] deb [opt=v ...] URI DIST [COMP...] [#comment]".
// Pure text in and out; the pkg module's repo functions do the file I/O.
namespace brine::modules::apt {

// One "key=value" of the bracketed options, as written.
struct source_option {
  std::string key;   // "arch", "signed-by", "trusted", ...
  std::string full;  // "arch=amd64,i386"
};

// One line of a sources file. A line that is not a source (blank, a
// comment, garbage) is `invalid` and written back unchanged.
struct source_entry {
  std::string line;  // as read, without its newline
  std::string file;
  bool invalid = false;
  bool disabled = false;  // the line starts with '#'
  std::string comment;    // after the first '#' past the start, without it
  std::string type;       // deb, deb-src (rpm, rpm-src: Salt accepts them too)
  std::string uri;
  std::string dist;
  std::vector<std::string> comps;
  std::vector<std::string> architectures;  // the arch= option
  std::string signedby;                    // the signed-by= option
  // Every bracketed option of `line` in its order (line_options).
  std::vector<source_option> options;

  // The line Salt writes for this entry (SourceEntry.repo_line), without a
  // newline: the options of `line` in their order, arch= and signed-by=
  // from the fields, then URI, dist, comps and "#comment".
  std::string render() const;
};

// Salt's SourceEntry(line): parses one line; never throws.
source_entry parse_line(std::string_view line, std::string file = "");

// Every line of a file's text, invalid ones included, in order.
std::vector<source_entry> parse_file(std::string_view text, const std::string& file);

// The options between the first '[' and the ']' that closes them (Salt's
// _get_opts), in order; a key given twice keeps its first place and its
// last value, and every arch= adds to the architectures.
std::vector<source_option> line_options(std::string_view line);

// "a,b" split on commas, each part trimmed, empty parts dropped.
std::vector<std::string> split_list(std::string_view text);

// Salt's salt.utils.pkg.deb.strip_uri: trailing slashes off http(s)/ftp URIs.
std::string strip_uri(std::string_view repo);

}  // namespace brine::modules::apt
