// containerd's ttrpc Events.Forward payload: ForwardRequest{Envelope{timestamp, namespace, topic,
// event: Any}}, and the task event inside the Any, decoded by its type URL as containerd does.
// Invariant: a decoded message re-encodes to bytes that decode to the same message.
#include <google/protobuf/message_lite.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "proto/events.pb.h"
#include "proto/events_service.pb.h"

namespace pb = google::protobuf;
namespace ev = containerd::events;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void roundtrip(const pb::MessageLite& m) {
  std::string once = m.SerializeAsString();
  std::unique_ptr<pb::MessageLite> again(m.New());
  check(again->ParseFromString(once));
  check(again->SerializeAsString() == once);
}

// The event types the shim publishes, by type URL (the lite runtime has no descriptor pool).
template <typename T>
std::unique_ptr<pb::MessageLite> make() {
  return std::make_unique<T>();
}
const std::map<std::string, std::function<std::unique_ptr<pb::MessageLite>()>>& event_types() {
  static const std::map<std::string, std::function<std::unique_ptr<pb::MessageLite>()>> types = {
      {"containerd.events.TaskCreate", make<ev::TaskCreate>},
      {"containerd.events.TaskStart", make<ev::TaskStart>},
      {"containerd.events.TaskDelete", make<ev::TaskDelete>},
      {"containerd.events.TaskIO", make<ev::TaskIO>},
      {"containerd.events.TaskExit", make<ev::TaskExit>},
      {"containerd.events.TaskOOM", make<ev::TaskOOM>},
      {"containerd.events.TaskExecAdded", make<ev::TaskExecAdded>},
      {"containerd.events.TaskExecStarted", make<ev::TaskExecStarted>},
      {"containerd.events.TaskPaused", make<ev::TaskPaused>},
      {"containerd.events.TaskResumed", make<ev::TaskResumed>},
      {"containerd.events.TaskCheckpointed", make<ev::TaskCheckpointed>},
  };
  return types;
}

void decode_event(const std::string& type_url, const std::string& value) {
  auto slash = type_url.rfind('/');
  std::string name = slash == std::string::npos ? type_url : type_url.substr(slash + 1);
  auto it = event_types().find(name);
  if (it == event_types().end()) return;
  std::unique_ptr<pb::MessageLite> e = it->second();
  check(e->GetTypeName() == name);  // the name the shim publishes is the type's own
  if (!e->ParseFromString(value)) return;
  roundtrip(*e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
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
