// libFuzzer target: compile masters' bodies (catalog/request.h). Arbitrary
// bytes through the frame decoder, each message's body read as a
// compile_request (what a minion may send a master) and as a compile_reply
// (what a master sends a minion). Must never crash or throw; whatever is
// accepted must write a body that reads back the same (the same cache key
// for a request), and the salt:// files a reply's chunks name must be
// checked paths (no `..`, no absolute path).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "catalog/request.h"
#include "fileserver/path.h"
#include "proto/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace brine;
  proto::frame_decoder decoder(64 * 1024);
  decoder.feed({data, size});
  proto::message m;
  while (decoder.next(m) == proto::frame_decoder::status::ready) {
    std::string why;
    if (auto r = catalog::request_from_body(m.body, why)) {
      auto again = catalog::request_from_body(catalog::to_body(*r), why);
      if (!again) std::abort();
      std::map<std::string, std::string> revs{{"base", "r"}};
      if (catalog::key_of(*r, revs) != catalog::key_of(*again, revs)) std::abort();
    }
    if (auto r = catalog::reply_from_body(m.body, why)) {
      auto again = catalog::reply_from_body(catalog::to_body(*r), why);
      if (!again || again->what != r->what || again->chunks != r->chunks ||
          again->files.size() != r->files.size()) {
        std::abort();
      }
      for (const auto& [env, path] : catalog::files_named(r->chunks)) {
        if (!fileserver::check_path(path).error.empty() || path.starts_with("/")) std::abort();
      }
    }
  }
  return 0;
}
