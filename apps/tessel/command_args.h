// Reading and editing a command's argument list (`train ARGS...` as the
// launcher passes it on): an option is `--name VALUE` or `--name=VALUE`.
#pragma once

#include <string>
#include <vector>

namespace tessel::cli {

// The value of `--name X` or `--name=X` in args, or `fallback`.
std::string option_value(const std::vector<std::string>& args, const std::string& name,
                         const std::string& fallback);

// `args` without any `--name X` or `--name=X`.
std::vector<std::string> without_option(const std::vector<std::string>& args,
                                        const std::string& name);

}  // namespace tessel::cli
