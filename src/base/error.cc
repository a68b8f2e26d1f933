#include "base/error.h"

namespace brine::base {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "brine"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::ok: return "success";
      case errc::frame_too_large: return "frame larger than max_frame_bytes";
      case errc::frame_malformed: return "malformed frame";
      case errc::unknown_message: return "unknown message type";
      case errc::tls_handshake_failed: return "TLS handshake failed";
      case errc::peer_closed: return "peer closed the connection";
      case errc::timed_out: return "timed out";
      case errc::auth_refused: return "authentication refused";
      case errc::fingerprint_mismatch: return "peer key fingerprint mismatch";
      case errc::protocol_violation: return "protocol violation";
    }
    return "unknown brine error " + std::to_string(value);
  }
};

}  // namespace

const std::error_category& brine_category() noexcept {
  static const category instance;
  return instance;
}

}  // namespace brine::base
