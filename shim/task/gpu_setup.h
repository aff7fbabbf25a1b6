// Create-time GPU work: run the device layer over the bundle's spec and choose runtime flags.
#pragma once

#include "oci/spec.h"

namespace nvproxy::shim {

struct Container;
struct ServiceEnv;

// Edits and saves the spec when the container asks for GPUs; returns whether it got any.
bool prepare_gpu(Container& c, oci::Spec& spec, const ServiceEnv& env);

}  // namespace nvproxy::shim
