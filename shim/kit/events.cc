#include "shim/kit/events.h"

#include <chrono>

#include "common/error.h"
#include "common/ttrpc/client.h"
#include "proto/events_service.pb.h"
#include "shim/kit/timestamp.h"

namespace nvproxy::shim {

EventPublisher::EventPublisher(std::string address, std::string ns, Logger& log)
    : address_(std::move(address)), ns_(std::move(ns)), log_(log) {
  if (!address_.empty()) thread_ = std::thread([this] { loop(); });
}

EventPublisher::~EventPublisher() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EventPublisher::publish(const std::string& topic, const google::protobuf::MessageLite& event) {
  if (address_.empty()) return;
  Item it{topic, event.GetTypeName(), event.SerializeAsString(), std::chrono::system_clock::now()};
  {
    std::lock_guard lk(mu_);
    queue_.push_back(std::move(it));
  }
  cv_.notify_all();
}

bool EventPublisher::send(const Item& it) {
  containerd::services::events::ttrpc::v1::ForwardRequest req;
  auto* env = req.mutable_envelope();
  set_time(env->mutable_timestamp(), it.at);
  env->set_namespace_(ns_);
  env->set_topic(it.topic);
  env->mutable_event()->set_type_url(it.type_url);
  env->mutable_event()->set_value(it.payload);
  try {
    if (!client_) client_ = ttrpc::Client::connect(address_);
    client_->call("containerd.services.events.ttrpc.v1.Events", "Forward", req.SerializeAsString(),
                  {{"containerd-namespace-ttrpc", ns_}}, std::chrono::seconds(5));
    return true;
  } catch (const Error& e) {
    log_.warn("publish " + it.topic + " to " + address_ + ": " + e.what());
    client_.reset();  // reconnect next time: containerd may have restarted
    return false;
  }
}

void EventPublisher::loop() {
  while (true) {
    Item it;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      it = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    // Retry a few times with backoff (containerd restarting); then drop, as the runc shim does.
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (send(it)) break;
      std::unique_lock lk(mu_);
      if (stop_) break;
      cv_.wait_for(lk, std::chrono::milliseconds(100 << attempt));
    }
    {
      std::lock_guard lk(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

void EventPublisher::drain(std::chrono::milliseconds timeout) {
  if (address_.empty()) return;
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, timeout, [&] { return queue_.empty() && !busy_; });
}

}  // namespace nvproxy::shim
