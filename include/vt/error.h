// vt's one exception type. Messages name the op, the device, the dtype and the
// shape in words, and say what was expected.
#pragma once

#include <stdexcept>
#include <string>

namespace vt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace vt
