#include "proto/frame.h"

#include <cstring>

namespace brine::proto {

std::optional<msg_type> to_msg_type(uint64_t raw) {
  switch (raw) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9:
    case 100: case 101: case 102: case 103:
      return static_cast<msg_type>(raw);
    default:
      return std::nullopt;
  }
}

std::string_view to_string(msg_type t) {
  switch (t) {
    case msg_type::error: return "error";
    case msg_type::auth: return "auth";
    case msg_type::auth_reply: return "auth_reply";
    case msg_type::publish: return "publish";
    case msg_type::job_ack: return "job_ack";
    case msg_type::job_return: return "job_return";
    case msg_type::return_ack: return "return_ack";
    case msg_type::ping: return "ping";
    case msg_type::pong: return "pong";
    case msg_type::api_request: return "api_request";
    case msg_type::api_reply: return "api_reply";
    case msg_type::api_event: return "api_event";
    case msg_type::api_end: return "api_end";
  }
  return "?";
}

std::vector<uint8_t> encode_frame(const message& m) {
  nlohmann::json envelope = {
      {"t", static_cast<uint64_t>(m.type)}, {"id", m.id}, {"b", m.body}};
  std::vector<uint8_t> out(k_frame_header);
  nlohmann::json::to_msgpack(envelope, out);
  size_t n = out.size() - k_frame_header;
  out[0] = static_cast<uint8_t>(n >> 24);
  out[1] = static_cast<uint8_t>(n >> 16);
  out[2] = static_cast<uint8_t>(n >> 8);
  out[3] = static_cast<uint8_t>(n);
  return out;
}

base::errc decode_body(std::span<const uint8_t> body, message& out, std::string& detail) {
  nlohmann::json envelope = nlohmann::json::from_msgpack(body.begin(), body.end(), true, false);
  if (envelope.is_discarded()) {
    detail = "body is not valid MessagePack";
    return base::errc::frame_malformed;
  }
  if (!envelope.is_object()) {
    detail = "body is not a MessagePack map";
    return base::errc::frame_malformed;
  }
  auto t = envelope.find("t");
  auto id = envelope.find("id");
  if (t == envelope.end() || !t->is_number_unsigned() || id == envelope.end() ||
      !id->is_number_unsigned()) {
    detail = "map lacks an unsigned 't' (type) or 'id' (request id)";
    return base::errc::frame_malformed;
  }
  auto type = to_msg_type(t->get<uint64_t>());
  if (!type) {
    detail = "message type " + std::to_string(t->get<uint64_t>()) + " is not known";
    return base::errc::unknown_message;
  }
  out.type = *type;
  out.id = id->get<uint64_t>();
  auto b = envelope.find("b");
  if (b == envelope.end() || b->is_null()) {
    out.body = nlohmann::json::object();
  } else if (b->is_object()) {
    out.body = std::move(*b);
  } else {
    detail = "body 'b' is not a map";
    return base::errc::frame_malformed;
  }
  return base::errc::ok;
}

void frame_decoder::feed(std::span<const uint8_t> bytes) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
}

frame_decoder::status frame_decoder::fail(base::errc e, std::string detail) {
  error_ = e;
  detail_ = std::move(detail);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  return status::error;
}

frame_decoder::status frame_decoder::next(message& out) {
  if (error_ != base::errc::ok) return status::error;
  size_t avail = buf_.size() - pos_;
  if (avail < k_frame_header) return status::need_more;
  const uint8_t* p = buf_.data() + pos_;
  uint32_t len = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (len > max_) {
    return fail(base::errc::frame_too_large, "frame of " + std::to_string(len) +
                                                 " bytes exceeds max_frame_bytes " +
                                                 std::to_string(max_));
  }
  if (len == 0) return fail(base::errc::frame_malformed, "empty frame");
  if (avail < k_frame_header + len) return status::need_more;
  std::string detail;
  base::errc e = decode_body({p + k_frame_header, len}, out, detail);
  pos_ += k_frame_header + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
    // An idle connection keeps no large buffer around after a big frame.
    if (buf_.capacity() > 64 * 1024) buf_.shrink_to_fit();
  } else if (pos_ > 64 * 1024) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  if (e != base::errc::ok) return fail(e, std::move(detail));
  return status::ready;
}

}  // namespace brine::proto
