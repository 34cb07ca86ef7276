// The communicators a rank's program uses, one per mesh axis, by axis name.
// Not owned: the runtime that created them outlives the program.
#pragma once

#include <map>
#include <string>

#include "tessel/base/error.h"
#include "tessel/comm/communicator.h"

namespace tessel {

class CommGroups {
 public:
  void add(const std::string& axis, Communicator* comm) { by_axis_[axis] = comm; }
  Communicator& axis(const std::string& name) const {
    auto it = by_axis_.find(name);
    if (it == by_axis_.end())
      TS_THROW("no communicator for mesh axis '", name, "' (was the program built for this mesh?)");
    return *it->second;
  }

 private:
  std::map<std::string, Communicator*> by_axis_;
};

}  // namespace tessel
