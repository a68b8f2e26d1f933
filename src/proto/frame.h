#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "proto/message.h"

namespace brine::proto {

// A frame is a 4-byte big-endian length followed by that many bytes of
// MessagePack: a map {"t": type, "id": request id, "b": body map}.
inline constexpr size_t k_frame_header = 4;

// Encodes `m` as one frame, header included. The result can be shared between
// many connections (publish encodes once for all targets).
std::vector<uint8_t> encode_frame(const message& m);

// The same with the body already encoded as a MessagePack map (a minion's
// spooled return is encoded once, kept, and sent as it is).
std::vector<uint8_t> encode_frame(msg_type type, uint64_t id, std::span<const uint8_t> body);

// A value as MessagePack bytes (`bin`) in its own key order. A map in a body
// decodes with its keys sorted; data whose order is Salt's (a pillar, a
// state function's return) travels so.
nlohmann::json ordered_bytes(const nlohmann::ordered_json& v);

// The value ordered_bytes carried, in its order; anything else as it is (a
// map's keys then sorted). nullopt for bytes that are not one MessagePack
// value.
std::optional<nlohmann::ordered_json> from_ordered_bytes(const nlohmann::json& v);

// The pillar message's body, {"pillar": bin}: the pillar as a MessagePack map
// in its own key order (Salt's, which templates iterate), carried as bytes
// because a body map decodes with its keys sorted.
// With `tops` (Salt's master_tops for this minion, {saltenv: [sls, ...]})
// when it is a non-empty mapping, as "tops".
nlohmann::json pillar_body(const nlohmann::ordered_json& pillar,
                           const nlohmann::json& tops = nlohmann::json());

// The master_tops of a pillar message's body: {} when it carries none (or
// a master older than master_tops sent it); only mappings of lists of names
// are kept.
nlohmann::json read_tops(const nlohmann::json& body);

// The pillar of a pillar message's body, in the order it was sent; nullopt
// with `detail` saying why when the body holds no pillar map.
std::optional<nlohmann::ordered_json> read_pillar(const nlohmann::json& body, std::string& detail);

// Incremental decoder for one connection's byte stream. The length is checked
// against the limit before any buffer for the body is allocated.
//
// Not thread-safe; owned by one connection's reader.
class frame_decoder {
 public:
  explicit frame_decoder(size_t max_frame_bytes) : max_(max_frame_bytes) {}

  // Appends bytes received from the peer.
  void feed(std::span<const uint8_t> bytes);

  enum class status { need_more, ready, error };

  // Extracts the next complete message into `out`. On error, `error()` says
  // what and `error_detail()` says why; the stream is unusable afterwards.
  status next(message& out);

  base::errc error() const { return error_; }
  const std::string& error_detail() const { return detail_; }
  // Bytes held waiting for the rest of a frame.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  status fail(base::errc e, std::string detail);

  size_t max_;
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;
  base::errc error_ = base::errc::ok;
  std::string detail_;
};

// Decodes one frame body (without its header). Used by the decoder and by tests.
base::errc decode_body(std::span<const uint8_t> body, message& out, std::string& detail);

}  // namespace brine::proto
