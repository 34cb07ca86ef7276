#include "tessel/train/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "tessel/base/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

class CheckpointTempDir {
 public:
  explicit CheckpointTempDir(const std::string& tag)
      : path_(fs::temp_directory_path() / ("tessel_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~CheckpointTempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Tensors with awkward bit patterns: NaN payloads, -0, denormals, infinities.
struct Sample {
  std::vector<float> weights;
  std::vector<int32_t> ids;
  std::vector<uint16_t> half;
  float scalar = 3.5f;

  Sample() {
    for (int i = 0; i < 24; ++i) weights.push_back(std::sin(static_cast<float>(i)) * 1e3f);
    uint32_t nan_bits = 0x7FC01234u;
    std::memcpy(&weights[1], &nan_bits, 4);
    weights[2] = -0.0f;
    weights[3] = std::numeric_limits<float>::denorm_min();
    weights[4] = -std::numeric_limits<float>::infinity();
    ids = {0, -1, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(), 7};
    half = {0x3F80, 0xC000, 0x7FC1};
  }
  std::vector<TensorView> views() const {
    return {{"layer.0.weight", "F32", {2, 3, 4}, weights.data(), weights.size() * 4},
            {"tokens", "I32", {5}, ids.data(), ids.size() * 4},
            {"empty", "F32", {0, 3}, nullptr, 0},
            {"bf", "BF16", {3}, half.data(), half.size() * 2},
            {"scalar", "F32", {}, &scalar, 4}};
  }
};

TEST(CheckpointSafetensors, RoundTripIsBitwise) {
  CheckpointTempDir dir("st_roundtrip");
  const std::string path = dir.file("model.safetensors");
  Sample s;
  const std::map<std::string, std::string> meta = {
      {"step", "1200"}, {"config", "{\"d_model\": 64}"}, {"note", "unicode \xc3\xa9"}, {"", "x"}};
  write_safetensors(path, s.views(), meta);
  SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata, meta);
  ASSERT_EQ(f.tensors.size(), 5u);
  // Order of the data section is the order given.
  std::vector<std::string> order;
  for (const auto& t : f.tensors) order.push_back(t.name);
  EXPECT_EQ(order, (std::vector<std::string>{"layer.0.weight", "tokens", "empty", "bf", "scalar"}));
  for (const TensorView& v : s.views()) {
    const TensorRecord* t = f.find(v.name);
    ASSERT_NE(t, nullptr) << v.name;
    EXPECT_EQ(t->dtype, v.dtype);
    EXPECT_EQ(t->shape, v.shape);
    ASSERT_EQ(t->bytes.size(), v.nbytes);
    if (v.nbytes) {
      EXPECT_EQ(std::memcmp(t->bytes.data(), v.data, v.nbytes), 0) << v.name;
    }
  }
  EXPECT_EQ(f.find("missing"), nullptr);
}

// An independent reader: only the format's definition, json and memcpy.
TEST(CheckpointSafetensors, LayoutMatchesTheFormat) {
  CheckpointTempDir dir("st_layout");
  const std::string path = dir.file("m.safetensors");
  Sample s;
  write_safetensors(path, s.views(), {{"format", "pt"}});
  const std::string bytes = slurp(path);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);  // Little-endian.
  EXPECT_EQ(n % 8, 0u);
  ASSERT_LE(8 + n, bytes.size());
  const std::string header_text = bytes.substr(8, n);
  EXPECT_EQ(header_text.front(), '{');
  const size_t last = header_text.find_last_not_of(' ');
  EXPECT_EQ(header_text[last], '}');
  const auto header = nlohmann::json::parse(header_text);
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"format", "pt"}}));
  const std::string data = bytes.substr(8 + n);
  uint64_t cursor = 0;
  for (const TensorView& v : s.views()) {
    const auto& entry = header.at(v.name);
    EXPECT_EQ(entry["dtype"], v.dtype);
    EXPECT_EQ(entry["shape"].get<std::vector<int64_t>>(), v.shape);
    const auto offsets = entry["data_offsets"].get<std::vector<uint64_t>>();
    ASSERT_EQ(offsets.size(), 2u);
    EXPECT_EQ(offsets[0], cursor) << v.name;
    EXPECT_EQ(offsets[1], cursor + v.nbytes) << v.name;
    if (v.nbytes) {
      EXPECT_EQ(std::memcmp(data.data() + cursor, v.data, v.nbytes), 0) << v.name;
    }
    cursor += v.nbytes;
  }
  EXPECT_EQ(cursor, data.size());
  float w0;
  std::memcpy(&w0, data.data(), 4);
  EXPECT_EQ(w0, s.weights[0]);
}

TEST(CheckpointSafetensors, WriterValidatesBeforeWriting) {
  CheckpointTempDir dir("st_writer");
  const std::string path = dir.file("bad.safetensors");
  std::vector<float> x(6);
  auto expect_rejected = [&](std::vector<TensorView> tensors, const std::string& needle) {
    std::string msg = error_of([&] { write_safetensors(path, tensors, {}); });
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_TRUE(dir.listing().empty()) << msg;
  };
  expect_rejected({{"w", "F32", {2, 2}, x.data(), 24}}, "needs 16");
  expect_rejected({{"w", "F32", {6}, x.data(), 24}, {"w", "F32", {6}, x.data(), 24}}, "duplicate");
  expect_rejected({{"w", "F16", {3}, x.data(), 6}}, "unsupported dtype \"F16\"");
  expect_rejected({{"w", "F32", {-1, 6}, x.data(), 24}}, "negative dimension");
  expect_rejected({{"__metadata__", "F32", {6}, x.data(), 24}}, "reserved");
  expect_rejected({{"", "F32", {6}, x.data(), 24}}, "empty name");
  expect_rejected({{"w", "F32", {6}, nullptr, 24}}, "null");
  std::string msg = error_of([&] {
    write_safetensors(path, {{"w", "F32", {6}, x.data(), 24}}, {{"k", "\xff\xfe"}});
  });
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;
  EXPECT_TRUE(dir.listing().empty());
}

TEST(CheckpointSafetensors, AtomicWriteLeavesNoTemporary) {
  CheckpointTempDir dir("st_atomic");
  const std::string path = dir.file("ckpt.safetensors");
  std::vector<float> a(4, 1.0f), b(8, 2.0f);
  write_safetensors(path, {{"w", "F32", {4}, a.data(), 16}}, {});
  write_safetensors(path, {{"w", "F32", {8}, b.data(), 32}}, {{"step", "2"}});  // Overwrite.
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"ckpt.safetensors"});
  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].shape, std::vector<int64_t>{8});
  EXPECT_EQ(f.metadata.at("step"), "2");

  write_file_atomically(dir.file("manifest.json"), "{\"step\": 2}\n");
  write_file_atomically(dir.file("manifest.json"), "{\"step\": 3}\n");
  EXPECT_EQ(slurp(dir.file("manifest.json")), "{\"step\": 3}\n");
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"ckpt.safetensors", "manifest.json"}));

  const std::string nowhere = dir.file("no/such/dir/m.json");
  std::string msg = error_of([&] { write_file_atomically(nowhere, "x"); });
  EXPECT_NE(msg.find(nowhere), std::string::npos) << msg;
}

// Tensors produced on demand (a sharded run gathers one at a time) are
// written in order, each right after it is produced, through one buffer; a
// producer that throws leaves no file behind.
TEST(CheckpointSafetensors, ProducedTensorsAreWrittenOneAtATime) {
  CheckpointTempDir dir("st_produce");
  const std::string path = dir.file("p.safetensors");
  std::vector<float> buffer(4);
  std::vector<int> order;
  auto produced = [&](int k, int n) {
    // Not "t" + std::to_string(k): GCC 12's bogus -Warray-bounds in a unity
    // batch (see tests/compile/config_limits_test.cc).
    TensorView t{std::string("t").append(std::to_string(k)),
                 "F32",
                 {n},
                 nullptr,
                 static_cast<size_t>(n) * 4};
    t.produce = [&buffer, &order, k, n]() -> const void* {
      order.push_back(k);
      std::fill(buffer.begin(), buffer.begin() + n, static_cast<float>(k));
      return buffer.data();
    };
    return t;
  };
  write_safetensors(path, {produced(1, 4), produced(2, 3)}, {});
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  SafetensorsFile f = read_safetensors(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  for (int k : {1, 2}) {
    const TensorRecord& r = *f.find("t" + std::to_string(k));
    for (size_t i = 0; i < r.bytes.size() / 4; ++i)
      EXPECT_EQ(reinterpret_cast<const float*>(r.bytes.data())[i], static_cast<float>(k));
  }
  TensorView failing = produced(3, 2);
  failing.produce = []() -> const void* { TS_THROW("gather failed"); };
  std::string msg = error_of([&] { write_safetensors(dir.file("q.safetensors"), {failing}, {}); });
  EXPECT_NE(msg.find("gather failed"), std::string::npos) << msg;
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"p.safetensors"});
}

// Builds a file from a header text and a data section.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(CheckpointSafetensors, CorruptFilesAreRejected) {
  CheckpointTempDir dir("st_corrupt");
  const std::string path = dir.file("c.safetensors");
  auto expect_rejected = [&](const std::string& contents, const std::vector<std::string>& needles) {
    spit(path, contents);
    std::string msg = error_of([&] { read_safetensors(path); });
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    for (const std::string& needle : needles) EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  const std::string data16(16, '\x01');
  auto one = [](const std::string& body) { return "{\"w\": " + body + "}"; };

  // The valid baseline parses.
  spit(path, make_file(one(R"({"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})"), data16));
  EXPECT_EQ(read_safetensors(path).tensors.size(), 1u);

  expect_rejected("abc", {"too short"});
  {
    std::string f = make_file("{}", "");
    uint64_t huge = 1000;
    std::memcpy(f.data(), &huge, 8);
    expect_rejected(f, {"header length 1000", "past the end"});
  }
  expect_rejected(make_file("{\"w\": [", data16), {"not valid JSON"});
  expect_rejected(make_file("[1, 2]", ""), {"JSON object"});
  expect_rejected(make_file(one(R"({"dtype":"F16","shape":[8],"data_offsets":[0,16]})"), data16),
                  {"'w'", "unsupported dtype \"F16\""});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[4,4],"data_offsets":[0,64]})"), data16),
                  {"'w'", "data_offsets end", "too large"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[3],"data_offsets":[0,16]})"), data16),
                  {"'w'", "needs 12"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[2,-2],"data_offsets":[0,16]})"), data16),
                  {"'w'", "negative"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[4],"data_offsets":[8,4]})"), data16),
                  {"'w'", "end before begin"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[4]})"), data16),
                  {"'w'", "data_offsets"});
  expect_rejected(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                            data16),
                  {"'b'", "overlaps tensor 'a'"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})"), data16),
                  {"'w'", "gap"});
  expect_rejected(make_file(one(R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), data16),
                  {"trailing bytes"});
  expect_rejected(make_file(R"({"__metadata__":{"step":3}})", ""), {"'step'", "string"});
  expect_rejected(make_file(R"({"w": 5})", ""), {"'w'"});
  expect_rejected("", {"too short"});
  spit(dir.file("missing"), "");
  std::string msg = error_of([&] { read_safetensors(dir.file("absent.safetensors")); });
  EXPECT_NE(msg.find("absent.safetensors"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel
