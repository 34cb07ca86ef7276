#include "tessel/passes/block_label.h"

#include <cctype>

namespace tessel {

int block_of_label(const std::string& label) {
  constexpr size_t kPrefix = 5;  // "block"
  if (label.rfind("block", 0) != 0) return -1;
  size_t i = kPrefix;
  int block = 0;
  while (i < label.size() && std::isdigit(static_cast<unsigned char>(label[i])))
    block = block * 10 + (label[i++] - '0');
  if (i == kPrefix || i >= label.size() || label[i] != '.') return -1;
  return block;
}

}  // namespace tessel
