#include "tessel/report/config_diff.h"

#include <algorithm>
#include <set>

namespace tessel::report {

std::vector<std::string> differing_keys(const std::vector<nlohmann::json>& configs,
                                        const std::vector<std::string>& excluded) {
  std::vector<const nlohmann::json*> known;
  for (const nlohmann::json& c : configs)
    if (c.is_object()) known.push_back(&c);
  if (known.size() < 2) return {};
  std::set<std::string> keys;
  for (const nlohmann::json* c : known)
    for (const auto& item : c->items()) keys.insert(item.key());
  std::vector<std::string> out;
  for (const std::string& key : keys) {
    if (std::find(excluded.begin(), excluded.end(), key) != excluded.end()) continue;
    const auto differs = [&](const nlohmann::json* c) {
      return !c->contains(key) || (*c)[key] != (*known.front())[key];
    };
    // known.front() is checked first: past it, it holds the key.
    if (std::any_of(known.begin(), known.end(), differs)) out.push_back(key);
  }
  return out;
}

}  // namespace tessel::report
