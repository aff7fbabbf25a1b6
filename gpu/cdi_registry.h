// All CDI specs of the configured directories, and resolution of fully-qualified device names.
// A bad file is reported, not fatal: its error only surfaces when a requested device cannot be
// resolved (the missing device may well be in the file that failed to load).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/log.h"
#include "gpu/cdi_spec.h"

namespace nvproxy::gpu {

struct CdiResolution {
  std::vector<std::string> devices;  // fully-qualified names actually used ("=all" expanded)
  ContainerEdits edits;              // top-level edits of each spec involved once, then each device's
};

class CdiRegistry {
 public:
  // Loads *.yaml, *.yml, *.json of each dir (missing dirs are fine). Later dirs take priority over
  // earlier ones for the same kind and device name (/var/run/cdi overrides /etc/cdi, as in the CDI
  // reference implementation); within one dir, a device defined by two files is a conflict.
  static CdiRegistry load(const std::vector<std::string>& dirs, Logger* log = nullptr);

  [[nodiscard]] const std::vector<CdiSpec>& specs() const { return specs_; }
  [[nodiscard]] const std::vector<std::string>& errors() const { return errors_; }
  [[nodiscard]] bool can_resolve(const std::string& qualified_name) const;
  // Throws Error(NotFound / InvalidArgument / FailedPrecondition) naming the device; when a name is
  // unresolved the message includes the per-file load errors.
  [[nodiscard]] CdiResolution resolve(const std::vector<std::string>& qualified_names) const;

 private:
  struct Ref {
    size_t spec, device;  // indexes into specs_ and its devices
  };
  // Effective definition of kind=name, or nullopt; throws on a same-priority conflict.
  [[nodiscard]] std::optional<Ref> lookup(const std::string& kind, const std::string& name) const;
  [[nodiscard]] std::vector<Ref> expand(const std::string& qualified_name) const;
  [[nodiscard]] std::string errors_suffix() const;

  std::vector<CdiSpec> specs_;
  std::vector<size_t> spec_rank_;
  std::vector<std::string> errors_;
};

}  // namespace nvproxy::gpu
