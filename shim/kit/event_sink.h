// Where the task layer's events go. The daemon's EventPublisher forwards them to containerd;
// in-process tests record them.
#pragma once

#include <google/protobuf/message_lite.h>

#include <string>

namespace nvproxy::shim {

class EventSink {
 public:
  virtual ~EventSink() = default;
  // topic: "/tasks/exit" ...; must not block (called with the container's lock held, so that
  // events leave in the order their state changes happened).
  virtual void publish(const std::string& topic, const google::protobuf::MessageLite& event) = 0;
};

}  // namespace nvproxy::shim
