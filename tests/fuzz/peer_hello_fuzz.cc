// libFuzzer target: arbitrary bytes from a peer port (a master's
// cluster_port): through the frame decoder, then every decoded message
// checked as a peer_hello. Must never crash, and must never admit a hello
// without a proof made with the cluster key (the fuzzer cannot forge one).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "cluster/identity.h"
#include "proto/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto cluster_key = brine::pki::keypair::generate();
  static const auto peer_key = brine::pki::keypair::generate();
  brine::proto::frame_decoder decoder(64 * 1024);
  decoder.feed({data, size});
  brine::proto::message m;
  while (decoder.next(m) == brine::proto::frame_decoder::status::ready) {
    auto why = brine::cluster::check_hello(m.body, peer_key.get(), cluster_key, "c1");
    if (why.empty()) std::abort();  // admitted without the cluster key
  }
  return 0;
}
