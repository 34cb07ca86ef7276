#include "command_args.h"

namespace tessel::cli {

std::string option_value(const std::vector<std::string>& args, const std::string& name,
                         const std::string& fallback) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(name + "=", 0) == 0) return args[i].substr(name.size() + 1);
  }
  return fallback;
}

std::vector<std::string> without_option(const std::vector<std::string>& args,
                                        const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == name)
      ++i;  // and its value
    else if (args[i].rfind(name + "=", 0) != 0)
      out.push_back(args[i]);
  return out;
}

}  // namespace tessel::cli
