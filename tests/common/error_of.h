// error_of(fn): the message of the tessel::Error that `fn` must throw. A call
// that throws none fails the current test (and returns "").
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tessel/base/error.h"

namespace tessel {

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tessel::Error";
  return "";
}

}  // namespace tessel
