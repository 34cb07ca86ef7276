// Readers of files Tessel did not just write reject malformed input with a
// tessel::Error naming the file, and never crash: a mutation fuzz test over a
// real small checkpoint (model, optimizer, manifest) and a config, plus
// targeted cases (extra tensors, NaN, a manifest whose n_layer disagrees), the
// Hugging Face import (`tessel import --format hf`) over mutated files, and
// a save onto a full disk (a tiny tmpfs; root only).
//
// Run it under AddressSanitizer and UndefinedBehaviorSanitizer with a build
// configured with -DTESSEL_SANITIZE=ON (see README).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/tiny_gpt.h"
#include "tessel/base/error.h"
#include "tessel/compile/config.h"
#include "tessel/compile/model_registry.h"
#include "tessel/train/checkpoint/checkpoint.h"
#include "tessel/train/checkpoint/hf_llama.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/trainer.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

TrainConfig small_config() {
  TrainConfig c = tiny_gpt_config(1, 2);
  c.steps = 2;
  c.threads = 1;
  return c;
}

class HardenedReaders : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ =
        new fs::path(fs::temp_directory_path() / ("tessel_hardened_" + std::to_string(getpid())));
    fs::create_directories(*root_);
    trainer_ = new Trainer(small_config());
    trainer_->step();
    save_checkpoint((*root_ / "good").string(), small_config(), trainer_->params(), 1);
  }
  static void TearDownTestSuite() {
    delete trainer_;
    fs::remove_all(*root_);
    delete root_;
  }
  // A fresh copy of the good checkpoint at `name`.
  static fs::path copy_good(const std::string& name) {
    fs::path dir = *root_ / name;
    fs::remove_all(dir);
    fs::copy(*root_ / "good", dir);
    return dir;
  }
  // Loads `dir` as sample/train would; "" if it loads, else the Error's
  // message. Any other exception fails the test.
  static std::string load(const fs::path& dir, bool with_optimizer = true) {
    try {
      CheckpointInfo info = read_checkpoint_info(dir.string());
      info.config.validate();
      load_checkpoint(dir.string(), trainer_->params(), with_optimizer);
      return "";
    } catch (const Error& e) {
      return e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a tessel::Error: " << e.what();
      return "?";
    }
  }
  static fs::path* root_;
  static Trainer* trainer_;
};
fs::path* HardenedReaders::root_ = nullptr;
Trainer* HardenedReaders::trainer_ = nullptr;

// Mutations of one file's bytes: flips in the (JSON) header or anywhere,
// truncation, a random header length, deleted and inserted spans.
std::string mutate(std::string bytes, std::mt19937_64& rng, size_t header_end) {
  auto pick = [&](size_t lo, size_t hi) {
    return hi <= lo ? lo : lo + static_cast<size_t>(rng() % (hi - lo));
  };
  const int kind = static_cast<int>(rng() % 6);
  const size_t n = bytes.size();
  switch (kind) {
    case 0:  // 1-4 byte flips in the header
    case 1:
      for (int i = 0, k = 1 + static_cast<int>(rng() % 4); i < k; ++i)
        bytes[pick(0, std::min(header_end, n))] = static_cast<char>(rng());
      break;
    case 2:  // a byte anywhere (data bytes may become NaN)
      bytes[pick(0, n)] = static_cast<char>(rng());
      break;
    case 3:  // truncation
      bytes.resize(pick(0, n));
      break;
    case 4: {  // a random 8-byte header length, or a delete in the header
      if (header_end > 8 && rng() % 2) {
        size_t at = pick(8, header_end);
        bytes.erase(at, pick(1, 16));
      } else {
        uint64_t len = rng() % 4 == 0 ? rng() : rng() % (2 * n + 1);
        std::memcpy(bytes.data(), &len, std::min<size_t>(8, n));
      }
      break;
    }
    default: {  // insert random printable characters into the header
      std::string junk;
      for (size_t i = 0, k = pick(1, 12); i < k; ++i)
        junk += "{}[]\",:0123456789-eE.nulltrue"[rng() % 29];
      bytes.insert(pick(0, std::min(header_end, n)), junk);
    }
  }
  return bytes;
}

size_t safetensors_header_end(const std::string& bytes) {
  uint64_t len = 0;
  std::memcpy(&len, bytes.data(), 8);
  return 8 + len;
}

TEST_F(HardenedReaders, GoodCheckpointLoads) { EXPECT_EQ(load(*root_ / "good"), ""); }

TEST_F(HardenedReaders, MutationFuzzOverCheckpointFiles) {
  std::mt19937_64 rng(20261201);
  int rejected = 0, total = 0;
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "manifest.json"}) {
    const fs::path dir = copy_good(std::string("fuzz_") + file);
    const std::string good = read_all(dir / file);
    const bool json = std::string(file) == "manifest.json";
    const size_t header_end = json ? good.size() : safetensors_header_end(good);
    for (int i = 0; i < 1000; ++i, ++total) {
      std::string bad = json ? mutate(good, rng, good.size()) : mutate(good, rng, header_end);
      write_all(dir / file, bad);
      std::string error = load(dir);
      if (error.empty()) continue;
      ++rejected;
      // The message names the file, or (for a config inside the manifest) the key.
      EXPECT_TRUE(error.find(dir.string()) != std::string::npos ||
                  error.find("config") != std::string::npos)
          << file << " case " << i << ": " << error;
    }
  }
  EXPECT_GT(rejected, total / 2) << "most mutations must be rejected";
}

TEST_F(HardenedReaders, MutationFuzzOverConfigs) {
  std::mt19937_64 rng(7);
  nlohmann::json j = small_config().to_json();
  const std::string good = j.dump(1);
  const fs::path path = *root_ / "config.json";
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    write_all(path, mutate(good, rng, good.size()));
    try {
      TrainConfig c = TrainConfig::from_file(path.string());
      c.validate();
    } catch (const Error& e) {
      ++rejected;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "case " << i << ": not a tessel::Error: " << e.what();
    }
  }
  EXPECT_GT(rejected, 500);
}

// `tessel import --format hf` over mutated config.json and model.safetensors
// of a small Llama's export: an import that fails throws a tessel::Error
// naming a file of the directory (a mutated config.json may surface as a
// shape error naming model.safetensors).
TEST_F(HardenedReaders, MutationFuzzOverHfImport) {
  TrainConfig c;
  c.model = "llama";
  c.n_layer = 1;
  c.d_model = 16;
  c.n_head = 2;
  c.vocab = 32;
  c.multiple_of = 16;
  Graph graph;
  GraphBuilder b(graph);
  build_model(c, b, 1, false);
  const fs::path hf = *root_ / "hf";
  save_checkpoint((*root_ / "llama").string(), c, ParamStore(graph, cpu_backend(), 1), 0);
  export_hf_llama((*root_ / "llama").string(), hf.string());
  std::mt19937_64 rng(31);
  int rejected = 0, total = 0;
  for (const char* file : {"config.json", "model.safetensors"}) {
    const std::string good = read_all(hf / file);
    const bool json = std::string(file) == "config.json";
    const size_t header_end = json ? good.size() : safetensors_header_end(good);
    for (int i = 0; i < 300; ++i, ++total) {
      write_all(hf / file, mutate(good, rng, header_end));
      try {
        import_hf_llama(hf.string(), (*root_ / "imported").string(), TrainConfig{});
      } catch (const Error& e) {
        ++rejected;
        EXPECT_NE(std::string(e.what()).find(hf.string()), std::string::npos)
            << file << " case " << i << ": " << e.what();
      } catch (const std::exception& e) {
        ADD_FAILURE() << file << " case " << i << ": not a tessel::Error: " << e.what();
      }
    }
    write_all(hf / file, good);
  }
  EXPECT_GT(rejected, total / 2) << "most mutations must be rejected";
}

TEST_F(HardenedReaders, ExtraTensorsAndNonFiniteValuesAreRejected) {
  // A manifest saying n_layer 1 over a file with one more block's tensor.
  fs::path dir = copy_good("extra");
  SafetensorsFile model = read_safetensors((dir / "model.safetensors").string());
  std::vector<TensorView> views;
  for (const TensorRecord& t : model.tensors)
    views.push_back({t.name, t.dtype, t.shape, t.bytes.data(), t.bytes.size(), nullptr});
  std::vector<uint8_t> extra = model.tensors[0].bytes;
  views.push_back(
      {"block1.attn.wq", "F32", model.tensors[0].shape, extra.data(), extra.size(), nullptr});
  write_safetensors((dir / "model.safetensors").string(), views, {});
  std::string e = load(dir);
  EXPECT_NE(e.find("holds tensor 'block1.attn.wq'"), std::string::npos) << e;

  dir = copy_good("nan");
  std::vector<uint8_t> nan_bytes = model.tensors[0].bytes;
  float nan = std::nanf("");
  std::memcpy(nan_bytes.data(), &nan, 4);
  views.pop_back();
  views[0].data = nan_bytes.data();
  write_safetensors((dir / "model.safetensors").string(), views, {});
  e = load(dir);
  EXPECT_NE(e.find("holds nan at element 0"), std::string::npos) << e;
}

TEST_F(HardenedReaders, SampleAndEvalDoNotReadTheOptimizerState) {
  fs::path dir = copy_good("bad_optimizer");
  write_all(dir / "optimizer.safetensors", "garbage");
  EXPECT_EQ(load(dir, /*with_optimizer=*/false), "");
  EXPECT_NE(load(dir).find("optimizer.safetensors"), std::string::npos);
}

TEST_F(HardenedReaders, ManifestErrorsNameTheFileAndKey) {
  fs::path dir = copy_good("manifest");
  nlohmann::json m = nlohmann::json::parse(read_all(dir / "manifest.json"));
  m["step"] = "three";
  write_all(dir / "manifest.json", m.dump());
  std::string e = load(dir);
  EXPECT_NE(e.find("manifest.json': key 'step' must be an integer"), std::string::npos) << e;
  m.erase("config");
  write_all(dir / "manifest.json", m.dump());
  e = load(dir);
  EXPECT_NE(e.find("has no key 'config'"), std::string::npos) << e;
}

// A save onto a full disk fails with a clear error and leaves the previous
// checkpoint loadable (and no temporary behind).
TEST_F(HardenedReaders, SaveOnAFullDiskKeepsThePreviousCheckpoint) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tiny tmpfs";
  const fs::path mnt = *root_ / "tiny";
  fs::create_directories(mnt);
  const size_t one = fs::file_size(*root_ / "good" / "model.safetensors") +
                     fs::file_size(*root_ / "good" / "optimizer.safetensors") + 8192;
  const std::string opts = "size=" + std::to_string(one + one / 2);
  if (mount("tmpfs", mnt.c_str(), "tmpfs", 0, opts.c_str()) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
  const std::string dir = (mnt / "checkpoint").string();
  std::string error;
  try {
    save_checkpoint(dir, small_config(), trainer_->params(), 1);  // fits
    trainer_->step();
    save_checkpoint(dir, small_config(), trainer_->params(), 2);  // needs a second copy
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("saving checkpoint '" + dir + "' failed"), std::string::npos) << error;
  EXPECT_NE(error.find("the previous checkpoint there is unchanged"), std::string::npos) << error;
  EXPECT_EQ(load(dir), "");
  EXPECT_EQ(read_checkpoint_info(dir).step, 1);
  int leftovers = 0;
  for (const auto& e : fs::directory_iterator(mnt))
    leftovers += e.path().filename().string().starts_with("checkpoint.tmp-");
  EXPECT_EQ(leftovers, 0);
  umount(mnt.c_str());
}

}  // namespace
}  // namespace tessel
