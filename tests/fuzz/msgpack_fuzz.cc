// libFuzzer target: arbitrary bytes through proto::msgpack's reader (what
// `brine inventory` reads of the master's rows). Must never crash, hang,
// recurse per nesting level or read past the end. Every value it reads
// whole is copied through the writer, and the copy, read and copied again,
// gives the same bytes (the writer's smallest forms are stable).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/error.h"
#include "proto/msgpack.h"

namespace msgpack = brine::proto::msgpack;

namespace {

// Copies one whole value from `r` to `out`, item by item (no recursion);
// false for binary and ext, which the writer does not write.
bool copy(msgpack::reader& r, std::vector<uint8_t>& out) {
  msgpack::writer w(out);
  uint64_t pending = 1;
  while (pending > 0) {
    auto it = r.next();
    --pending;
    switch (it.type) {
      case msgpack::kind::nil:
        w.nil();
        break;
      case msgpack::kind::boolean:
        w.boolean(it.boolean);
        break;
      case msgpack::kind::integer:
        w.integer(it.integer);
        break;
      case msgpack::kind::unsigned_integer:
        w.unsigned_integer(it.unsigned_integer);
        break;
      case msgpack::kind::floating:
        w.floating(it.floating);
        break;
      case msgpack::kind::string:
        w.string(it.bytes);
        break;
      case msgpack::kind::array:
        w.array(it.count);
        pending += it.count;
        break;
      case msgpack::kind::map:
        w.map(it.count);
        pending += uint64_t{2} * it.count;
        break;
      case msgpack::kind::binary:
      case msgpack::kind::ext:
        return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  msgpack::reader r({data, size});
  try {
    while (!r.done()) {
      auto whole = r.skip();
      msgpack::reader again(whole);
      std::vector<uint8_t> once;
      if (!copy(again, once)) continue;
      if (!again.done()) abort();  // skip() and next() disagree on where it ends
      msgpack::reader twice_r(once);
      std::vector<uint8_t> twice;
      if (!copy(twice_r, twice) || !twice_r.done() || twice != once) abort();
    }
  } catch (const brine::base::error&) {
    // Malformed or truncated: refused, as it must be.
  }
  return 0;
}
