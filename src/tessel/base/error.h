// Errors and checks.
//
// Every error Tessel reports is a tessel::Error (a std::runtime_error) whose
// message names what is wrong: the op, the value, the dims with their sizes,
// the config key. TS_THROW builds such a message from any streamable parts.
// TS_CHECK guards internal invariants; it stays on in release builds and
// reports file:line, because a wrong answer is worse than a slow one.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Concatenates the streamed form of every argument.
template <typename... Parts>
std::string str_cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// The streamed form of every item of `items`, separated by `sep`.
template <typename Items>
std::string str_join(const Items& items, const char* sep) {
  std::string out;
  for (const auto& x : items) out += (out.empty() ? "" : sep) + str_cat(x);
  return out;
}

[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition,
                                      const std::string& message);

}  // namespace tessel

#define TS_THROW(...) throw ::tessel::Error(::tessel::str_cat(__VA_ARGS__))

#define TS_CHECK(condition, ...)                                                       \
  do {                                                                                 \
    if (!(condition))                                                                  \
      ::tessel::throw_check_failure(__FILE__, __LINE__, #condition,                    \
                                    ::tessel::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
