// Records the largest single operator-new allocation made (by any thread) while armed, so a test
// can prove that a hostile length header is refused without allocating what it claims.
#pragma once

#include <cstddef>

namespace nvproxy::security_test {

void arm_alloc_probe();            // resets the record and starts recording
std::size_t disarm_alloc_probe();  // stops; returns the largest allocation seen (bytes)

}  // namespace nvproxy::security_test
