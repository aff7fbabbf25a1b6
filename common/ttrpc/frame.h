// ttrpc framing, free of sockets so it can be unit- and fuzz-tested on its own.
// A frame is a 10-byte header (u32 BE payload length, u32 BE stream id, u8 type, u8 flags)
// followed by the payload; see containerd/ttrpc channel.go.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nvproxy::ttrpc {

inline constexpr std::size_t kHeaderSize = 10;
inline constexpr std::uint32_t kMaxMessageSize = 4u << 20;  // Go ttrpc's messageLengthMax
// What a frame's payload buffer reserves before its bytes arrive: enough for every Task request,
// so a 10-byte header announcing a large frame costs no more than this until the payload comes.
inline constexpr std::size_t kInitialPayloadReserve = 64u << 10;

enum class FrameType : std::uint8_t { Request = 1, Response = 2, Data = 3 };

struct FrameHeader {
  std::uint32_t length = 0;  // payload bytes, header excluded
  std::uint32_t stream_id = 0;
  std::uint8_t type = 0;  // raw: unknown types must be tolerated (and ignored) by receivers
  std::uint8_t flags = 0;
};

std::array<std::uint8_t, kHeaderSize> encode_header(const FrameHeader& h);
FrameHeader decode_header(const std::uint8_t* p);  // reads exactly kHeaderSize bytes

// Header + payload in one buffer, ready to write. Throws Error(ResourceExhausted) when the
// payload exceeds max_size: the peer would refuse it anyway.
std::string encode_frame(std::uint32_t stream_id, FrameType type, std::string_view payload, std::uint8_t flags = 0,
                         std::uint32_t max_size = kMaxMessageSize);

// Incremental parser: feed it whatever the socket returned; it emits complete frames.
// A frame longer than max_size is never buffered: its payload bytes are skipped as they
// arrive and, once all are gone, an Oversized event tells the owner to refuse that stream
// (Go ttrpc answers ResourceExhausted and keeps the connection).
class FrameParser {
 public:
  struct Event {
    enum class Kind { Frame, Oversized } kind;
    FrameHeader header;
    std::string payload;  // empty for Oversized
  };

  explicit FrameParser(std::uint32_t max_size = kMaxMessageSize) : max_size_(max_size) {}

  // Consumes all of data, appending finished events to out.
  void feed(std::string_view data, std::vector<Event>& out);

  // True between frames: an EOF now is clean; otherwise the peer truncated a frame.
  [[nodiscard]] bool idle() const { return header_fill_ == 0 && state_ == State::Header; }

  // Capacity of the payload buffer (lets tests prove oversized frames are never stored).
  [[nodiscard]] std::size_t buffered() const { return payload_.capacity(); }

 private:
  enum class State { Header, Payload, Discard };

  std::uint32_t max_size_;
  State state_ = State::Header;
  std::array<std::uint8_t, kHeaderSize> header_buf_{};
  std::size_t header_fill_ = 0;
  FrameHeader header_;
  std::string payload_;
  std::uint32_t remaining_ = 0;  // payload bytes still to read or discard
};

}  // namespace nvproxy::ttrpc
