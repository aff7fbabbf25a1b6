// containerd's ttrpc Events.Forward payload: ForwardRequest{Envelope{timestamp, namespace, topic,
// event: Any}}, and the task event inside the Any, decoded by its type URL as containerd does.
// Invariant: a decoded message re-encodes to bytes that decode to the same message.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "proto/events.pb.h"
#include "proto/events_service.pb.h"

namespace pb = google::protobuf;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void roundtrip(const pb::Message& m) {
  std::string once = m.SerializeAsString();
  std::unique_ptr<pb::Message> again(m.New());
  check(again->ParseFromString(once));
  check(again->SerializeAsString() == once);
}

void decode_event(const std::string& type_url, const std::string& value) {
  auto slash = type_url.rfind('/');
  std::string name = slash == std::string::npos ? type_url : type_url.substr(slash + 1);
  // Only our own event types: the generated pool also knows google.protobuf.* and ttrpc types.
  if (name.rfind("containerd.events.", 0) != 0) return;
  const pb::Descriptor* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(name);
  if (!d) return;
  const pb::Message* proto = pb::MessageFactory::generated_factory()->GetPrototype(d);
  if (!proto) return;
  std::unique_ptr<pb::Message> ev(proto->New());
  if (!ev->ParseFromString(value)) return;
  roundtrip(*ev);
  (void)ev->DebugString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  // Make sure the event types are linked in and registered.
  static const containerd::events::TaskExit* keep = &containerd::events::TaskExit::default_instance();
  (void)keep;

  containerd::services::events::ttrpc::v1::ForwardRequest fwd;
  if (fwd.ParseFromString(in)) {
    roundtrip(fwd);
    if (fwd.has_envelope()) decode_event(fwd.envelope().event().type_url(), fwd.envelope().event().value());
  }
  containerd::services::events::ttrpc::v1::Envelope env;
  if (env.ParseFromString(in)) {
    roundtrip(env);
    decode_event(env.event().type_url(), env.event().value());
  }
  return 0;
}
