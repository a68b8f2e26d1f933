#pragma once

#include <stdexcept>
#include <string>
#include <system_error>

namespace brine::base {

// Errors that cross module boundaries as values (net, proto). Printable through
// brine_category(); the numeric values are stable and never reused.
enum class errc {
  ok = 0,
  frame_too_large = 1,
  frame_malformed = 2,
  unknown_message = 3,
  tls_handshake_failed = 4,
  peer_closed = 5,
  timed_out = 6,
  auth_refused = 7,
  fingerprint_mismatch = 8,
  protocol_violation = 9,
};

const std::error_category& brine_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), brine_category()};
}

// The exception caught at one clear boundary (daemon start, CLI command): a
// message that names the thing and the fix, printed as it is.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace brine::base

template <>
struct std::is_error_code_enum<brine::base::errc> : std::true_type {};
