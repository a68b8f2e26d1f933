#pragma once

#include <string>

namespace brine::modules {

// Python's os.path.expanduser: "~" and "~user" at the start become the home
// directory ($HOME, else the passwd entry); anything else is left as it is.
// Shared by the file execution module and the file states.
std::string expand_user(const std::string& path);

}  // namespace brine::modules
