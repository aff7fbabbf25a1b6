// An Error that crosses a ttrpc call with typed details (google.rpc.Status.details): a handler
// throws one to answer more than a code and a message, and the client throws one for every
// failed call, so a caller that knows a detail's type can rebuild its own error from it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace nvproxy::ttrpc {

struct StatusDetail {
  std::string type_url;  // "type.googleapis.com/<full message name>"
  std::string value;     // the message, serialized
};

class StatusError : public Error {
 public:
  StatusError(Code code, const std::string& message, std::vector<StatusDetail> details = {})
      : Error(code, message), details_(std::move(details)) {}
  [[nodiscard]] const std::vector<StatusDetail>& details() const { return details_; }
  // The first detail of that type, or nullptr.
  [[nodiscard]] const StatusDetail* find(const std::string& type_url) const {
    for (const auto& d : details_) {
      if (d.type_url == type_url) return &d;
    }
    return nullptr;
  }

 private:
  std::vector<StatusDetail> details_;
};

}  // namespace nvproxy::ttrpc
