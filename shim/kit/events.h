// Publishes task events to containerd (ttrpc Events.Forward at TTRPC_ADDRESS) in order, from one
// thread, so that a slow or restarting containerd never blocks the Task service.
#pragma once

#include <google/protobuf/message_lite.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/log.h"
#include "shim/kit/event_sink.h"

namespace nvproxy::ttrpc {
class Client;
}

namespace nvproxy::shim {

class EventPublisher final : public EventSink {
 public:
  // address: containerd's ttrpc socket ("unix://" optional); empty disables publishing.
  EventPublisher(std::string address, std::string ns, Logger& log);
  ~EventPublisher() override;  // sends what is queued (bounded), then stops
  EventPublisher(const EventPublisher&) = delete;
  EventPublisher& operator=(const EventPublisher&) = delete;

  // topic: "/tasks/exit" ...; the event's full protobuf name is its Any type URL.
  void publish(const std::string& topic, const google::protobuf::MessageLite& event) override;
  // Waits until the queue is empty (sent or given up on), at most `timeout`.
  void drain(std::chrono::milliseconds timeout);

 private:
  struct Item {
    std::string topic;
    std::string type_url;
    std::string payload;
    std::chrono::system_clock::time_point at;  // when it was published, not sent
  };
  void loop();
  bool send(const Item& it);

  std::string address_, ns_;
  Logger& log_;
  std::unique_ptr<ttrpc::Client> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  bool busy_ = false;  // an item is being sent
  std::thread thread_;
};

}  // namespace nvproxy::shim
