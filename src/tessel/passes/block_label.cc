#include "tessel/passes/block_label.h"

#include <cctype>

#include "tessel/ir/model_contract.h"

namespace tessel {

int block_of_label(const std::string& label) {
  if (label.rfind(kBlockPrefix, 0) != 0) return -1;
  const size_t prefix = kBlockPrefix.size();
  size_t i = prefix;
  int block = 0;
  while (i < label.size() && std::isdigit(static_cast<unsigned char>(label[i])))
    block = block * 10 + (label[i++] - '0');
  if (i == prefix || i >= label.size() || label[i] != '.') return -1;
  return block;
}

}  // namespace tessel
