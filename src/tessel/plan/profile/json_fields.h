// Strict reading of one JSON object of a hardware file (machine profile or
// cluster file).
//
// Every error names the file and the key's full path ("links.intra_node.
// bandwidth_gbs", "gemm.f32[3].gflops"): an unknown key, a missing one, a
// value of the wrong type or a number out of range. Reading a key marks it
// known; allow_only() rejects the object's other keys.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace tessel::plan {

// The JSON document in file `path` (`what` names it in errors: "machine
// profile", "cluster file"); throws if it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path, const char* what);

class JsonFields {
 public:
  // Throws unless `object` is a JSON object. `path` is "" for the top level.
  JsonFields(const nlohmann::json& object, std::string file, std::string path);

  // Throws naming the first key of the object not in `known`.
  void allow_only(std::initializer_list<const char*> known) const;
  bool has(const char* key) const { return object_.contains(key); }
  // The value at `key`; throws if it is missing.
  const nlohmann::json& required(const char* key) const;
  // A finite number >= 0 (> 0 when `positive`).
  double number(const char* key, bool positive) const;
  // An integer >= `min`.
  int64_t integer(const char* key, int64_t min) const;
  std::string string(const char* key) const;
  bool boolean(const char* key) const;
  // A JSON array (throws otherwise).
  const nlohmann::json& array(const char* key) const;
  // `read` of each object of the array at `key` (its fields at "key[i]").
  template <class Read>
  auto objects(const char* key, Read read) const {
    const nlohmann::json& items = array(key);
    std::vector<std::invoke_result_t<Read, const JsonFields&>> out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(
          read(JsonFields(items[i], file_, path_of(key) + "[" + std::to_string(i) + "]")));
    return out;
  }

  // "path.key" (or "key" at the top level), for messages and nested readers.
  std::string path_of(const std::string& key) const;
  const std::string& file() const { return file_; }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  const nlohmann::json& object_;
  std::string file_, path_;
};

}  // namespace tessel::plan
