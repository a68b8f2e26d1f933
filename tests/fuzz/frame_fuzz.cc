// libFuzzer target: arbitrary bytes from a peer through the frame decoder, fed
// in pieces as a socket would deliver them. Must never crash, hang or allocate
// beyond the frame limit.
#include <cstddef>
#include <cstdint>

#include "proto/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  brine::proto::frame_decoder decoder(64 * 1024);
  brine::proto::message m;
  size_t chunk = size > 0 ? (data[0] % 16) + 1 : 1;
  for (size_t off = 0; off < size; off += chunk) {
    size_t n = size - off < chunk ? size - off : chunk;
    decoder.feed({data + off, n});
    for (;;) {
      auto st = decoder.next(m);
      if (st != brine::proto::frame_decoder::status::ready) break;
    }
    if (decoder.error() != brine::base::errc::ok) break;
  }
  return 0;
}
