// ttrpc framing: FrameParser fed the input in fuzz-chosen chunks, then every complete request frame
// decoded as the server does (ttrpc.Request envelope, metadata, timeout).
//
// Input: byte 0 picks the chunking and the size limit; the rest is the byte stream a client sent.
// Invariants checked (a violation aborts):
//   - chunking does not change what is parsed (same events as one feed of everything);
//   - a Frame's payload has exactly header.length bytes, never more than the limit;
//   - an over-limit frame is reported as Oversized and never buffered (capacity stays small);
//   - re-encoding a parsed frame and parsing it again gives the same frame.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/ttrpc/frame.h"
#include "ttrpc.pb.h"

using namespace nvproxy::ttrpc;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

bool same(const FrameParser::Event& a, const FrameParser::Event& b) {
  return a.kind == b.kind && a.header.length == b.header.length && a.header.stream_id == b.header.stream_id &&
         a.header.type == b.header.type && a.header.flags == b.header.flags && a.payload == b.payload;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t ctl = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);
  // Small limits make the Oversized path reachable with small inputs; the real one is tried too.
  const std::uint32_t limit = (ctl & 0x80) ? kMaxMessageSize : (ctl & 0x7f) * 4u;

  // Reference: everything in one feed.
  FrameParser whole(limit);
  std::vector<FrameParser::Event> ref;
  whole.feed(stream, ref);

  // Chunked: sizes from a tiny LCG seeded by ctl, 1..17 bytes (and empty feeds in between).
  FrameParser chunked(limit);
  std::vector<FrameParser::Event> got;
  std::uint32_t rng = ctl * 2654435761u + 1;
  std::string_view rest = stream;
  std::size_t max_capacity = 0;
  while (!rest.empty()) {
    rng = rng * 1103515245u + 12345u;
    std::size_t n = std::min<std::size_t>(rest.size(), (rng >> 16) % 18);
    chunked.feed(rest.substr(0, n), got);
    rest.remove_prefix(n);
    max_capacity = std::max(max_capacity, chunked.buffered());
  }
  check(got.size() == ref.size());
  for (std::size_t i = 0; i < got.size(); ++i) check(same(got[i], ref[i]));
  check(chunked.idle() == whole.idle());
  // Never more than one (bounded) payload buffered; an oversized length never reserves.
  check(max_capacity <= static_cast<std::size_t>(limit) + 64);

  for (const auto& ev : ref) {
    if (ev.kind == FrameParser::Event::Kind::Oversized) {
      check(ev.header.length > limit);
      check(ev.payload.empty());
      continue;
    }
    check(ev.header.length <= limit);
    check(ev.payload.size() == ev.header.length);

    // Round trip through the encoder.
    std::string again =
        encode_frame(ev.header.stream_id, static_cast<FrameType>(ev.header.type), ev.payload, ev.header.flags, limit);
    FrameParser p2(limit);
    std::vector<FrameParser::Event> ev2;
    p2.feed(again, ev2);
    check(ev2.size() == 1 && same(ev2[0], ev) && p2.idle());

    // What the server does with a request frame's payload.
    if (ev.header.type != static_cast<std::uint8_t>(FrameType::Request)) continue;
    ::ttrpc::Request req;
    if (!req.ParseFromString(ev.payload)) continue;
    std::size_t meta = 0;
    for (const auto& kv : req.metadata()) meta += kv.key().size() + kv.value().size();
    (void)meta;
    std::string reencoded = req.SerializeAsString();
    ::ttrpc::Request req2;
    check(req2.ParseFromString(reencoded));
    check(req2.service() == req.service() && req2.method() == req.method() && req2.payload() == req.payload() &&
          req2.timeout_nano() == req.timeout_nano() && req2.metadata_size() == req.metadata_size());
  }

  // encode_frame refuses what the peer would refuse.
  if (stream.size() > limit) {
    try {
      (void)encode_frame(1, FrameType::Request, stream, 0, limit);
      std::abort();
    } catch (const nvproxy::Error& e) {
      check(e.code() == nvproxy::Code::ResourceExhausted);
    }
  }
  return 0;
}
