// libFuzzer target: arbitrary bytes as a DNS reply to an SRV query, through
// the parser that reads TTLs and targets (names with compression pointers)
// out of it. The bytes come from the network: it must never crash, hang or
// read outside the buffer, whatever the lengths and pointers say.
#include <cstddef>
#include <cstdint>
#include <span>

#include "net/dns.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = brine::net::parse_srv_reply(std::span<const uint8_t>(data, size));
  // Either records or an error, never both.
  if (!r.error.empty() && !r.records.empty()) __builtin_trap();
  return 0;
}
