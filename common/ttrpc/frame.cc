#include "common/ttrpc/frame.h"

#include <algorithm>

#include "common/error.h"

namespace nvproxy::ttrpc {

namespace {
void put_u32(std::uint8_t* p, std::uint32_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 24);
  p[1] = static_cast<std::uint8_t>(v >> 16);
  p[2] = static_cast<std::uint8_t>(v >> 8);
  p[3] = static_cast<std::uint8_t>(v);
}
std::uint32_t get_u32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
}
}  // namespace

std::array<std::uint8_t, kHeaderSize> encode_header(const FrameHeader& h) {
  std::array<std::uint8_t, kHeaderSize> b{};
  put_u32(b.data(), h.length);
  put_u32(b.data() + 4, h.stream_id);
  b[8] = h.type;
  b[9] = h.flags;
  return b;
}

FrameHeader decode_header(const std::uint8_t* p) {
  return FrameHeader{.length = get_u32(p), .stream_id = get_u32(p + 4), .type = p[8], .flags = p[9]};
}

std::string encode_frame(std::uint32_t stream_id, FrameType type, std::string_view payload, std::uint8_t flags,
                         std::uint32_t max_size) {
  if (payload.size() > max_size) {
    throw Error(Code::ResourceExhausted, "ttrpc message of " + std::to_string(payload.size()) + " bytes on stream " +
                                             std::to_string(stream_id) + " exceeds the maximum of " + std::to_string(max_size));
  }
  auto h = encode_header({.length = static_cast<std::uint32_t>(payload.size()),
                          .stream_id = stream_id,
                          .type = static_cast<std::uint8_t>(type),
                          .flags = flags});
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  out.append(reinterpret_cast<const char*>(h.data()), h.size());
  out.append(payload);
  return out;
}

void FrameParser::feed(std::string_view data, std::vector<Event>& out) {
  while (true) {
    switch (state_) {
      case State::Header: {
        if (data.empty()) return;
        std::size_t n = std::min(kHeaderSize - header_fill_, data.size());
        std::copy_n(data.data(), n, header_buf_.data() + header_fill_);
        header_fill_ += n;
        data.remove_prefix(n);
        if (header_fill_ < kHeaderSize) return;
        header_fill_ = 0;
        header_ = decode_header(header_buf_.data());
        remaining_ = header_.length;
        if (header_.length > max_size_) {
          state_ = State::Discard;  // refuse without allocating: skip the bytes as they come
        } else {
          payload_.clear();
          // Up front only what a typical message needs: a header alone must not buy 4 MiB (F9);
          // append() grows the rest as the bytes arrive.
          payload_.reserve(std::min<std::size_t>(header_.length, kInitialPayloadReserve));
          state_ = State::Payload;
        }
        break;
      }
      case State::Payload: {
        std::size_t n = std::min<std::size_t>(remaining_, data.size());
        payload_.append(data.data(), n);
        data.remove_prefix(n);
        remaining_ -= static_cast<std::uint32_t>(n);
        if (remaining_ > 0) return;
        out.push_back({Event::Kind::Frame, header_, std::move(payload_)});
        payload_ = std::string();  // release: a moved-from string's state is unspecified
        state_ = State::Header;
        break;
      }
      case State::Discard: {
        std::size_t n = std::min<std::size_t>(remaining_, data.size());
        data.remove_prefix(n);
        remaining_ -= static_cast<std::uint32_t>(n);
        if (remaining_ > 0) return;
        out.push_back({Event::Kind::Oversized, header_, {}});
        state_ = State::Header;
        break;
      }
    }
  }
}

}  // namespace nvproxy::ttrpc
