#include "tessel/base/error.h"

namespace tessel {

void throw_check_failure(const char* file, int line, const char* condition,
                         const std::string& message) {
  std::string text = str_cat("internal check failed at ", file, ":", line, ": ", condition);
  if (!message.empty()) text += str_cat(" (", message, ")");
  throw Error(text);
}

}  // namespace tessel
