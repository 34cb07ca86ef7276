#include "tessel/train/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessel/base/error.h"
#include "tessel/comm/io_scope.h"
#include "tessel/train/checkpoint/checkpoint_tokenizer.h"
#include "tessel/train/checkpoint/safetensors.h"
#include "tessel/train/checkpoint/shard_load.h"

namespace tessel {
namespace fs = std::filesystem;

constexpr int kFormatVersion = 1;

void save_checkpoint(const std::string& dir, const TrainConfig& config,
                     const CheckpointSource& source, int64_t step, bool write) {
  using Part = CheckpointSource::Part;
  std::vector<TensorView> model, optimizer, tied;
  nlohmann::json dims = nlohmann::json::object();
  for (size_t i = 0; i < source.params.size(); ++i) {
    const CheckpointSource::Param& p = source.params[i];
    auto view = [&](const std::string& name, Part part) {
      return TensorView{
          name,
          "F32",
          p.shape.sizes(),
          nullptr,
          static_cast<size_t>(p.shape.numel()) * sizeof(float),
          [&source, i, part] { return static_cast<const void*>(source.full(i, part)); }};
    };
    std::vector<TensorView>& values = p.tied_copy ? tied : model;
    std::vector<TensorView>& moments = p.tied_copy ? tied : optimizer;
    values.push_back(view(p.name, Part::kValue));
    if (!p.tied_copy) dims[p.name] = p.shape.names();
    if (p.has_moments) {  // moments are stored in the parameter's shape
      moments.push_back(view(p.name + ".m", Part::kM));
      moments.push_back(view(p.name + ".v", Part::kV));
    }
  }
  if (!write) {  // the writer's gathers, in the writer's order
    for (const std::vector<TensorView>* file : {&model, &optimizer, &tied})
      for (const TensorView& t : *file)
        if (t.nbytes > 0) t.produce();
    return;
  }
  IoScope io("writing checkpoint '" + dir + "'");  // peers waiting meanwhile is no hang
  fs::path final_dir(dir);
  fs::path tmp = final_dir.string() + ".tmp-" + std::to_string(getpid());
  fs::remove_all(tmp);
  try {
    fs::create_directories(tmp);
    std::map<std::string, std::string> meta = {{"format", "tessel"},
                                               {"step", std::to_string(step)}};
    write_safetensors((tmp / "model.safetensors").string(), model, meta);
    if (!optimizer.empty())
      write_safetensors((tmp / "optimizer.safetensors").string(), optimizer, meta);
    if (!tied.empty()) write_safetensors((tmp / "tied_copies.safetensors").string(), tied, meta);
    nlohmann::json manifest = {
        {"format", "tessel-checkpoint"}, {"version", kFormatVersion}, {"step", step},
        {"config", config.to_json()},    {"param_dims", dims},        {"state", source.state}};
    copy_tokenizer_into(tmp, config, manifest);  // tokenizer.model, if the run has one
    write_file_atomically((tmp / "manifest.json").string(), manifest.dump(2) + "\n");
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    TS_THROW("saving checkpoint '", dir, "' failed (", e.what(), "); ",
             fs::exists(final_dir) ? "the previous checkpoint there is unchanged"
                                   : "no checkpoint was written");
  }

  // Swap into place in one atomic step: an exchange of the two directory
  // names (renameat2 RENAME_EXCHANGE), so at every instant `dir` is either
  // the old complete checkpoint or the new one; the old one, now under the
  // temporary name, is removed afterwards.
  if (fs::exists(final_dir)) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0)
      TS_THROW("checkpoint: cannot swap '", tmp.string(), "' into '", dir,
               "': ", std::strerror(errno));
    fs::remove_all(tmp);
  } else {
    fs::rename(tmp, final_dir);
  }
}

void CheckpointSnapshot::finish() {
  for (std::unique_ptr<CommRequest>& r : requests_) r->wait();
  requests_.clear();
}

CheckpointSnapshot::Layout CheckpointSnapshot::lay_out(const CheckpointSource& source, bool keep) {
  using Part = CheckpointSource::Part;
  shape_.params = source.params;
  shape_.state = source.state;
  const size_t n = source.params.size();
  for (std::vector<int64_t>& at : at_) at.assign(n, -1);
  Layout l;
  // The writer's order (save_checkpoint): every value, then every moment
  // pair, then the tied copies (value and moments each).
  auto moments = [&](size_t i) {
    if (source.params[i].has_moments)
      l.order.emplace_back(i, Part::kM), l.order.emplace_back(i, Part::kV);
  };
  for (size_t i = 0; i < n; ++i)
    if (!source.params[i].tied_copy) l.order.emplace_back(i, Part::kValue);
  for (size_t i = 0; i < n; ++i)
    if (!source.params[i].tied_copy) moments(i);
  for (size_t i = 0; i < n; ++i)
    if (source.params[i].tied_copy) l.order.emplace_back(i, Part::kValue), moments(i);
  l.batched = source.place && source.sum && source.sharded;
  // Offsets: in the batched form the sharded tensors first (the summed
  // region, on every rank), then the others (the keeping rank only).
  int64_t total = 0;
  for (int pass = l.batched ? 0 : 1; pass < 2; ++pass)
    for (const auto& [i, part] : l.order) {
      if (l.batched && source.sharded(i, part) != (pass == 0)) continue;
      at_[static_cast<int>(part)][i] = total;
      total += source.params[i].shape.numel();
      if (pass == 0) l.summed = total;
    }
  l.held = keep ? total : l.batched ? l.summed : 0;
  const size_t bytes = static_cast<size_t>(l.held) * sizeof(float);
  if (all_.size() != bytes) all_ = AlignedBuffer(bytes);
  return l;
}

void CheckpointSnapshot::reserve(const CheckpointSource& source, bool keep) {
  finish();
  lay_out(source, keep);
}

void CheckpointSnapshot::take(const CheckpointSource& source, bool keep) {
  using Part = CheckpointSource::Part;
  finish();
  const Layout l = lay_out(source, keep);
  float* base = all_.as<float>();
  auto at = [&](size_t i, Part part) { return base + at_[static_cast<int>(part)][i]; };
  if (l.batched) {
    if (l.held == 0) return;
    std::memset(base, 0, all_.size());
    for (const auto& [i, part] : l.order)
      if (keep || source.sharded(i, part)) source.place(i, part, at(i, part));
    constexpr int64_t kChunk = int64_t{1} << 28;  // floats per collective (MPI's int counts)
    for (int64_t off = 0; off < l.summed; off += kChunk)
      requests_.push_back(source.sum(base + off, std::min(kChunk, l.summed - off)));
    return;
  }
  for (const auto& [i, part] : l.order) {
    const float* full = source.full(i, part);  // collective: every rank, same order
    if (keep) std::memcpy(at(i, part), full, source.params[i].shape.numel() * sizeof(float));
  }
}

CheckpointSource CheckpointSnapshot::source() const {
  TS_CHECK(requests_.empty(), "CheckpointSnapshot::source() before finish()");
  CheckpointSource s = shape_;
  s.full = [this](size_t i, CheckpointSource::Part part) -> const float* {
    return all_.as<float>() + at_[static_cast<int>(part)][i];
  };
  return s;
}

int64_t CheckpointSnapshot::bytes() const { return static_cast<int64_t>(all_.size()); }

int64_t snapshot_bytes(const std::vector<CheckpointSource::Param>& params) {
  int64_t n = 0;
  for (const CheckpointSource::Param& p : params)
    n += p.shape.numel() * static_cast<int64_t>(sizeof(float)) * (p.has_moments ? 3 : 1);
  return n;
}

void save_checkpoint(const std::string& dir, const TrainConfig& config, const ParamStore& params,
                     int64_t step) {
  CheckpointSource source;
  for (const ParamEntry& e : params.entries())
    source.params.push_back({e.name, e.value.shape(), e.m.numel() == e.value.numel()});
  // Each tensor is copied out of device memory into one host buffer.
  auto host = std::make_shared<std::vector<float>>();
  source.full = [&params, host](size_t i, CheckpointSource::Part part) -> const float* {
    const ParamEntry& e = params.entries()[i];
    const DeviceTensor& t = part == CheckpointSource::Part::kValue ? e.value
                            : part == CheckpointSource::Part::kM   ? e.m
                                                                   : e.v;
    host->resize(t.numel());
    t.read(host->data());
    return host->data();
  };
  save_checkpoint(dir, config, source, step);
}

CheckpointInfo read_checkpoint_info(const std::string& dir) {
  fs::path path = fs::path(dir) / "manifest.json";
  std::ifstream in(path);
  if (!in)
    TS_THROW("checkpoint: cannot open '", path.string(), "' (is '", dir,
             "' a checkpoint directory?)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    TS_THROW("checkpoint: '", path.string(), "' is not valid JSON: ", e.what());
  }
  const std::string where = str_cat("checkpoint: '", path.string(), "'");
  // Each key is checked for presence and type, so no nlohmann exception
  // (which names neither the file nor the key) escapes.
  auto key = [&](const char* name, bool (nlohmann::json::*is)() const,
                 const char* type) -> const nlohmann::json& {
    if (!m.is_object() || !m.contains(name))
      TS_THROW(where, " has no key '", name, "' (is it a Tessel manifest?)");
    const nlohmann::json& v = m[name];
    if (!(v.*is)()) TS_THROW(where, ": key '", name, "' must be ", type, ", found ", v.dump());
    return v;
  };
  if (key("format", &nlohmann::json::is_string, "a string").get<std::string>() !=
      "tessel-checkpoint")
    TS_THROW(where, " is not a Tessel manifest ('format' is not \"tessel-checkpoint\")");
  const nlohmann::json& version = key("version", &nlohmann::json::is_number_integer, "an integer");
  if (version.get<int64_t>() != kFormatVersion)
    TS_THROW(where, " has format version ", version.dump(), ", this build reads version ",
             kFormatVersion);
  CheckpointInfo info;
  try {
    info.config = TrainConfig::from_json(key("config", &nlohmann::json::is_object, "an object"));
  } catch (const Error& e) {
    TS_THROW(where, ": ", e.what());
  }
  const nlohmann::json& step = key("step", &nlohmann::json::is_number_integer, "an integer");
  if (step.get<int64_t>() < 0) TS_THROW(where, ": key 'step' is negative (", step.dump(), ")");
  info.step = step.get<int64_t>();
  if (m.contains("state") && !m.at("state").is_object())
    TS_THROW(where, ": key 'state' must be an object");
  info.state = m.value("state", nlohmann::json::object());
  return info;
}

void load_checkpoint(const std::string& dir, ParamStore& params, bool with_optimizer) {
  // The whole of every tensor, through the same checks as a sharded load.
  std::vector<ShardRequest> requests;
  for (const ParamEntry& e : params.entries())
    requests.push_back({e.name, e.value.shape(), true, whole_block(e.value.shape()),
                        whole_block(e.value.shape())});
  ShardedCheckpoint loaded = load_checkpoint_shards(dir, requests, with_optimizer);
  // Copy in place (into device memory): compiled programs hold pointers to
  // the parameter storage.
  for (size_t i = 0; i < requests.size(); ++i) {
    ParamEntry& e = params.entries()[i];
    e.value.write(loaded.value[i].data());
    if (loaded.m[i].empty()) continue;
    e.m = DeviceTensor(params.backend(), e.value.shape());
    e.v = DeviceTensor(params.backend(), e.value.shape());
    e.m.write(loaded.m[i].data());
    e.v.write(loaded.v[i].data());
  }
}

}  // namespace tessel
