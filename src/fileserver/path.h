#pragma once

#include <optional>
#include <string>
#include <string_view>

// salt:// URLs and the relative paths the file server serves.
namespace brine::fileserver {

// A salt:// URL split (Salt's salt.utils.url.parse): the path relative to
// the roots, and the saltenv its query names (`?saltenv=dev`), if any.
struct url {
  std::string path;
  std::optional<std::string> saltenv;
};

// `text` as a salt:// URL; nullopt when it is not one.
std::optional<url> parse_url(std::string_view text);

// A path as the file server takes it, checked and normalised: '/'-separated,
// leading '/' and "./" components dropped, repeated '/' collapsed. `error`
// is empty on success, else says why the path is refused: a ".." component
// (it could leave the roots), a NUL or other control byte, a backslash, an
// empty path (when !allow_empty: the roots themselves are no file).
struct checked_path {
  std::string path;
  std::string error;
};
checked_path check_path(std::string_view raw, bool allow_empty = false);

// A saltenv name as a directory component of the minion's cache: letters,
// digits, '_', '-', '.' (not "." or ".."); other names are refused.
bool valid_saltenv(std::string_view env);

}  // namespace brine::fileserver
