#include "tessel/train/checkpoint/checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tessel/base/error.h"
#include "tessel/train/checkpoint/safetensors.h"

namespace tessel {
namespace fs = std::filesystem;
namespace {

constexpr int kFormatVersion = 1;

std::vector<int64_t> sizes(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s.dims()) out.push_back(d.size);
  return out;
}

void copy_checked(const SafetensorsFile& file, const std::string& path, const std::string& name,
                  Tensor& into) {
  const TensorRecord* r = file.find(name);
  if (!r) TS_THROW("checkpoint '", path, "' has no tensor '", name, "'");
  if (r->dtype != "F32")
    TS_THROW("checkpoint '", path, "': tensor '", name, "' is ", r->dtype, ", expected F32");
  if (r->shape != sizes(into.shape())) {
    std::string got;
    for (int64_t s : r->shape) got += (got.empty() ? "" : ",") + std::to_string(s);
    TS_THROW("checkpoint '", path, "': tensor '", name, "' has shape [", got,
             "] but the model expects ", into.shape());
  }
  std::memcpy(into.raw(), r->bytes.data(), into.nbytes());
}

}  // namespace

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
          sizes(p.shape),
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
  fs::path final_dir(dir);
  fs::path tmp = final_dir.string() + ".tmp-" + std::to_string(getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::map<std::string, std::string> meta = {{"format", "tessel"}, {"step", std::to_string(step)}};
  write_safetensors((tmp / "model.safetensors").string(), model, meta);
  if (!optimizer.empty())
    write_safetensors((tmp / "optimizer.safetensors").string(), optimizer, meta);
  if (!tied.empty()) write_safetensors((tmp / "tied_copies.safetensors").string(), tied, meta);
  nlohmann::json manifest = {
      {"format", "tessel-checkpoint"}, {"version", kFormatVersion}, {"step", step},
      {"config", config.to_json()},    {"param_dims", dims},        {"state", source.state}};
  write_file_atomically((tmp / "manifest.json").string(), manifest.dump(2) + "\n");

  // Swap into place: the old checkpoint is removed only after the new one is complete.
  fs::path old = final_dir.string() + ".old-" + std::to_string(getpid());
  if (fs::exists(final_dir)) fs::rename(final_dir, old);
  fs::rename(tmp, final_dir);
  fs::remove_all(old);
}

void CheckpointSnapshot::take(const CheckpointSource& source, bool keep) {
  using Part = CheckpointSource::Part;
  const bool same = shape_.params.size() == source.params.size();
  shape_.params = source.params;
  shape_.state = source.state;
  if (!same) values_.clear(), m_.clear(), v_.clear();
  values_.resize(source.params.size());
  m_.resize(source.params.size());
  v_.resize(source.params.size());
  auto copy = [&](size_t i, Part part, AlignedBuffer& into) {
    const size_t bytes = static_cast<size_t>(source.params[i].shape.numel()) * sizeof(float);
    const float* full = source.full(i, part);  // collective: every rank, same order
    if (!keep) return;
    if (into.size() != bytes) into = AlignedBuffer(bytes);
    std::memcpy(into.data(), full, bytes);
  };
  // The writer's order (save_checkpoint): every value, then every moment
  // pair, then the tied copies (value and moments each).
  for (size_t i = 0; i < source.params.size(); ++i)
    if (!source.params[i].tied_copy) copy(i, Part::kValue, values_[i]);
  for (size_t i = 0; i < source.params.size(); ++i)
    if (!source.params[i].tied_copy && source.params[i].has_moments) {
      copy(i, Part::kM, m_[i]);
      copy(i, Part::kV, v_[i]);
    }
  for (size_t i = 0; i < source.params.size(); ++i) {
    if (!source.params[i].tied_copy) continue;
    copy(i, Part::kValue, values_[i]);
    if (source.params[i].has_moments) {
      copy(i, Part::kM, m_[i]);
      copy(i, Part::kV, v_[i]);
    }
  }
}

CheckpointSource CheckpointSnapshot::source() const {
  CheckpointSource s = shape_;
  s.full = [this](size_t i, CheckpointSource::Part part) -> const float* {
    const AlignedBuffer& b = part == CheckpointSource::Part::kValue ? values_[i]
                             : part == CheckpointSource::Part::kM   ? m_[i]
                                                                    : v_[i];
    return reinterpret_cast<const float*>(b.data());
  };
  return s;
}

int64_t CheckpointSnapshot::bytes() const {
  int64_t n = 0;
  for (const auto* list : {&values_, &m_, &v_})
    for (const AlignedBuffer& b : *list) n += static_cast<int64_t>(b.size());
  return n;
}

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
  source.full = [&params](size_t i, CheckpointSource::Part part) -> const float* {
    const ParamEntry& e = params.entries()[i];
    if (part == CheckpointSource::Part::kValue) return e.value.f32();
    return part == CheckpointSource::Part::kM ? e.m.f32() : e.v.f32();
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
  if (m.value("format", "") != "tessel-checkpoint")
    TS_THROW("checkpoint: '", path.string(), "' is not a Tessel manifest");
  if (m.value("version", 0) != kFormatVersion)
    TS_THROW("checkpoint: '", path.string(), "' has format version ", m.value("version", 0),
             ", this build reads version ", kFormatVersion);
  CheckpointInfo info;
  info.config = TrainConfig::from_json(m.at("config"));
  info.step = m.value("step", int64_t{0});
  info.state = m.value("state", nlohmann::json::object());
  return info;
}

void load_checkpoint(const std::string& dir, ParamStore& params) {
  std::string model_path = (fs::path(dir) / "model.safetensors").string();
  SafetensorsFile model = read_safetensors(model_path);
  // Check everything first, then copy: a mismatch leaves the params untouched.
  std::vector<Tensor> staged;
  for (ParamEntry& e : params.entries()) {
    staged.push_back(Tensor(e.value.shape(), DType::kF32));
    copy_checked(model, model_path, e.name, staged.back());
  }
  // Copy in place: compiled programs hold pointers to the parameter storage.
  for (size_t i = 0; i < staged.size(); ++i)
    std::memcpy(params.entries()[i].value.raw(), staged[i].raw(), staged[i].nbytes());
  std::string opt_path = (fs::path(dir) / "optimizer.safetensors").string();
  if (!fs::exists(opt_path)) return;
  SafetensorsFile opt = read_safetensors(opt_path);
  for (ParamEntry& e : params.entries()) {
    if (!opt.find(e.name + ".m")) continue;
    e.m = Tensor(e.value.shape(), DType::kF32);
    e.v = Tensor(e.value.shape(), DType::kF32);
    copy_checked(opt, opt_path, e.name + ".m", e.m);
    copy_checked(opt, opt_path, e.name + ".v", e.v);
  }
}

}  // namespace tessel
