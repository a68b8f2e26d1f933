#include "states/file_source.h"

#include <filesystem>

#include "fileserver/client.h"
#include "fileserver/path.h"
#include "modules/context.h"
#include "states/file_util.h"

namespace brine::states {

namespace fs = std::filesystem;

asio::awaitable<fetched> fetch_source(const state_call& c, std::string source, std::string saltenv) {
  fetched out;
  if (auto u = fileserver::parse_url(source)) {
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) {
      out.error = "Source file " + source + ": " + checked.error;
      co_return out;
    }
    std::string env = u->saltenv.value_or(saltenv);
    if (c.context == nullptr) {
      out.error = "Source file " + source + ": salt:// needs a minion";
      co_return out;
    }
    std::vector<std::string> paths{checked.path};
    auto got = co_await c.context->files().cache(env, std::move(paths));
    if (!got[0].error.empty()) {
      out.missing = true;
      out.error = "Source file " + source + " not found in saltenv '" + env + "'";
      co_return out;
    }
    out.local = got[0].local;
  } else if (source.starts_with("file://") || source.starts_with("/")) {
    out.local = source.starts_with("file://") ? source.substr(7) : source;
    std::error_code ec;
    if (!fs::is_regular_file(out.local, ec)) {
      out.missing = true;
      out.error = "Local file source " + out.local + " does not exist";
      co_return out;
    }
  } else {
    out.error = "Source file " + source +
                ": brine fetches salt://, file:// and local paths; other schemes are not "
                "supported yet";
    co_return out;
  }
  out.text = read_file(out.local);
  if (!out.text) out.error = "Source file " + source + " cannot be read";
  co_return out;
}

}  // namespace brine::states
