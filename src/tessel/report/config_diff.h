// The config keys whose values differ between runs, for the report's header
// table (keys the table shows in its own columns are left out).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tessel::report {

// Sorted keys present in any of `configs` whose value is not the same in all
// of them (a key missing from one config differs). Null configs (unknown) are
// skipped; fewer than two known configs give no keys.
std::vector<std::string> differing_keys(const std::vector<nlohmann::json>& configs,
                                        const std::vector<std::string>& excluded);

}  // namespace tessel::report
