// C++ side of the interop check (run_interop.sh): "server PATH" serves test.Svc with our Server,
// "client PATH" calls the Go server with our Client. Payloads are google.protobuf.StringValue, encoded by hand.
#include <iostream>

#include "common/error.h"
#include "common/log.h"
#include "common/ttrpc/client.h"
#include "common/ttrpc/server.h"

using namespace nvproxy;
using namespace nvproxy::ttrpc;

namespace {
// StringValue{value=1} for strings under 128 bytes (one-byte varint length).
std::string sv(const std::string& s) {
  return std::string("\x0a", 1) + static_cast<char>(s.size()) + s;
}
std::string unsv(const std::string& p) {
  return p.size() < 2 ? "" : p.substr(2);
}

int expect_code(Client& c, const std::string& method, Code want) {
  try {
    c.call("test.Svc", method, "");
  } catch (const Error& e) {
    std::cout << method << ": " << code_name(e.code()) << ": " << e.what() << "\n";
    return e.code() == want ? 0 : 1;
  }
  std::cout << method << ": no error\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  std::string mode = argv[1], path = argv[2];
  Logger log(2, LogLevel::Info);
  if (mode == "server") {
    Server s(log);
    s.register_method("test.Svc", "Echo", [](const CallContext& c, const std::string& p) {
      return sv(unsv(p) + "|" + c.get(kNamespaceKey).value_or("") + "|" + (c.timeout ? "true" : "false"));
    });
    s.register_method("test.Svc", "Fail",
                      [](const CallContext&, const std::string&) -> std::string { throw Error(Code::NotFound, "c++ says no"); });
    s.listen(path);
    s.run();
    return 0;
  }
  auto c = Client::connect("unix://" + path);
  std::string echo =
      unsv(c->call("test.Svc", "Echo", sv("from-c++"), {{std::string(kNamespaceKey), "moby"}}, std::chrono::seconds(5)));
  std::cout << "echo: " << echo << "\n";
  if (echo != "from-c++|[moby]|true") return 1;
  if (expect_code(*c, "Fail", Code::FailedPrecondition) != 0) return 1;
  if (expect_code(*c, "Nope", Code::Unimplemented) != 0) return 1;
  std::cout << "C++ CLIENT OK\n";
  return 0;
}
