#include "tessel/plan/profile/json_fields.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "tessel/base/error.h"

namespace tessel::plan {

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) TS_THROW("cannot read ", what, " '", path, "'");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW(path, ": not valid JSON (", e.what(), ")");
  }
}

JsonFields::JsonFields(const nlohmann::json& object, std::string file, std::string path)
    : object_(object), file_(std::move(file)), path_(std::move(path)) {
  if (!object_.is_object())
    TS_THROW(file_, ": ", path_.empty() ? "the file" : "key '" + path_ + "'",
             " must be a JSON object, got ", object_.dump());
}

std::string JsonFields::path_of(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonFields::fail(const std::string& key, const std::string& what) const {
  TS_THROW(file_, ": key '", path_of(key), "' ", what);
}

void JsonFields::allow_only(std::initializer_list<const char*> known) const {
  for (const auto& [key, value] : object_.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      TS_THROW(file_, ": unknown key '", path_of(key),
               "' (known keys here: ", str_join(known, ", "), ")");
}

const nlohmann::json& JsonFields::required(const char* key) const {
  auto it = object_.find(key);
  if (it == object_.end()) fail(key, "is missing");
  return *it;
}

double JsonFields::number(const char* key, bool positive) const {
  const nlohmann::json& v = required(key);
  if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < 0 || (positive && x == 0))
    fail(key, std::string("must be a ") + (positive ? "positive" : "non-negative") +
                  " number, got " + v.dump());
  return x;
}

int64_t JsonFields::integer(const char* key, int64_t min) const {
  const nlohmann::json& v = required(key);
  if (!v.is_number_integer()) fail(key, "must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < min) fail(key, "must be at least " + std::to_string(min) + ", got " + v.dump());
  return x;
}

std::string JsonFields::string(const char* key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
  return v.get<std::string>();
}

bool JsonFields::boolean(const char* key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + v.dump());
  return v.get<bool>();
}

const nlohmann::json& JsonFields::array(const char* key) const {
  const nlohmann::json& v = required(key);
  if (!v.is_array()) fail(key, "must be an array, got " + v.dump());
  return v;
}

}  // namespace tessel::plan
