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
    bool differs = false;
    for (const nlohmann::json* c : known)
      if (!c->contains(key) || (*c)[key] != (*known.front())[key]) {  // front is checked first
        differs = true;
        break;
      }
    if (differs) out.push_back(key);
  }
  return out;
}

}  // namespace tessel::report
