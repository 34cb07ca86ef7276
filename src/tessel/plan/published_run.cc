#include "tessel/plan/published_run.h"

#include <filesystem>

#include "tessel/base/error.h"
#include "tessel/compile/model_registry.h"
#include "tessel/models/llama.h"
#include "tessel/plan/profile/json_fields.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

// A path the block gives relative to the repository root: as given when it
// exists from the current directory, else from the nearest folder above the
// config file that has it.
std::string resolve(const std::string& path, const std::string& file, const JsonFields& f) {
  if (fs::path(path).is_absolute() || fs::exists(path)) return path;
  for (fs::path dir = fs::absolute(file).parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / path)) return (dir / path).string();
    if (dir == dir.root_path()) break;
  }
  f.fail("cluster", "names '" + path +
                        "', found neither from the current directory nor from a folder above " +
                        file + "; give --cluster FILE");
}

bool stated(const JsonFields& f, const char* key) {
  return f.has(key) && !f.required(key).is_null();
}

}  // namespace

ConfigFile read_config_file(const std::string& path) {
  ConfigFile out{read_config_json(path), std::nullopt};
  if (out.keys.is_object() && out.keys.contains("published")) {
    out.published = out.keys["published"];
    out.keys.erase("published");
  }
  return out;
}

PublishedRun parse_published(const nlohmann::json& block, const TrainConfig& model,
                             const std::string& file) {
  const JsonFields f(block, file, "published");
  // Packed by hand: clang-format would give each of these 20 keys a line.
  // clang-format off
  f.allow_only({"run", "source", "notes", "cluster", "gpus", "mesh", "micro_batch_size",
                "microbatches", "schedule", "chunks", "zero", "recompute", "layout", "precision",
                "data_parallel_overlap", "tflops_per_gpu", "tokens_per_s_per_gpu",
                "fraction_of_peak", "aggregate_pflops", "flops_counted"});
  // clang-format on
  PublishedRun r;
  r.file = file;
  r.run = f.string("run");
  if (stated(f, "source")) r.source = f.string("source");
  if (stated(f, "notes")) r.notes = f.string("notes");
  if (stated(f, "cluster")) r.cluster = resolve(f.string("cluster"), file, f);
  r.gpus = static_cast<int>(f.integer("gpus", 1));
  const JsonFields mesh(f.required("mesh"), file, "published.mesh");
  mesh.allow_only({"pipe", "data", "model", "ctx"});
  int* sizes[] = {&r.pipe, &r.data, &r.model, &r.ctx};
  const char* names[] = {"pipe", "data", "model", "ctx"};
  for (int i = 0; i < 4; ++i) {
    *sizes[i] = mesh.has(names[i]) ? static_cast<int>(mesh.integer(names[i], 1)) : 1;
    if (*sizes[i] > 1) r.mesh += str_cat(r.mesh.empty() ? "" : ",", names[i], "=", *sizes[i]);
  }
  if (r.pipe * r.data * r.model * r.ctx != r.gpus)
    f.fail("mesh",
           str_cat("has ", r.pipe * r.data * r.model * r.ctx, " ranks (pipe ", r.pipe, " x data ",
                   r.data, " x model ", r.model, " x ctx ", r.ctx, "), but 'gpus' is ", r.gpus));
  if (model.batch % r.data != 0)
    f.fail("mesh",
           str_cat("has data ", r.data, ", which does not divide 'batch' (", model.batch, ")"));
  const int64_t rows = model.batch / r.data;  // sequences per data rank per step
  if (stated(f, "microbatches")) r.microbatches = f.integer("microbatches", 1);
  if (stated(f, "micro_batch_size")) {
    const int64_t size = f.integer("micro_batch_size", 1);
    if (rows % size != 0)
      f.fail("micro_batch_size", str_cat(size, " does not divide the ", rows,
                                         " sequences a data rank holds (batch / data)"));
    if (r.microbatches && *r.microbatches * size != rows)
      f.fail("microbatches",
             str_cat(*r.microbatches, " x micro_batch_size ", size, " is not the ", rows,
                     " sequences a data rank holds (batch ", model.batch, " / data ", r.data, ")"));
    r.microbatches = rows / size;
  }
  if (r.microbatches && rows % *r.microbatches != 0)
    f.fail("microbatches", str_cat(*r.microbatches, " does not divide the ", rows,
                                   " sequences a data rank holds (batch / data)"));
  if (stated(f, "schedule")) r.schedule = f.string("schedule");
  if (stated(f, "chunks")) r.chunks = static_cast<int>(f.integer("chunks", 1));
  if (stated(f, "zero")) r.zero = static_cast<int>(f.integer("zero", 0));
  if (r.zero && *r.zero > 3) f.fail("zero", str_cat("must be 0 to 3, got ", *r.zero));
  if (stated(f, "recompute")) r.recompute = f.string("recompute");
  if (stated(f, "layout")) r.layout = f.string("layout");
  if (stated(f, "data_parallel_overlap"))
    r.data_parallel_overlap = f.boolean("data_parallel_overlap");
  if (stated(f, "tflops_per_gpu")) r.tflops_per_gpu = f.number("tflops_per_gpu", true);
  const std::string counted = stated(f, "flops_counted") ? f.string("flops_counted") : "model";
  if (counted != "model" && counted != "with_recompute")
    f.fail("flops_counted",
           "must be \"model\" (forward and backward) or \"with_recompute\" "
           "(the recomputed forward counted too, Narayanan et al.'s eq. 3), got \"" +
               counted + "\"");
  r.flops_with_recompute = counted == "with_recompute";
  if (stated(f, "tokens_per_s_per_gpu")) {  // a throughput: its FLOPs counted as above
    if (r.tflops_per_gpu > 0)
      f.fail("tokens_per_s_per_gpu", "state it or tflops_per_gpu, not both");
    const double tokens = static_cast<double>(model.batch) * static_cast<double>(model.context);
    r.tflops_per_gpu = f.number("tokens_per_s_per_gpu", true) *
                       narayanan_step_flops(model, r.flops_with_recompute) / tokens / 1e12;
  }
  return r;
}

double block_matmul_weights(const TrainConfig& m) {
  const double h = static_cast<double>(m.d_model);
  if (m.model != "llama") return 12 * h * h;
  const double kv_heads = static_cast<double>(m.n_kv_head == 0 ? m.n_head : m.n_kv_head);
  const double kv = kv_heads * h / static_cast<double>(m.n_head);  // keys' width
  return 2 * h * h + 2 * h * kv + 3 * h * static_cast<double>(llama_hidden_size(llama_config(m)));
}

double narayanan_step_flops(const TrainConfig& m, bool with_recompute) {
  const double tokens = static_cast<double>(m.batch) * static_cast<double>(m.context);
  const double h = static_cast<double>(m.d_model), s = static_cast<double>(m.context);
  const double block = 2 * block_matmul_weights(m) + 4 * s * h;
  const double logits = 2 * static_cast<double>(m.vocab) * h;
  const double blocks = static_cast<double>(m.n_layer) * block;
  return tokens * ((with_recompute ? 4 : 3) * blocks + 3 * logits);
}

double published_step_seconds(const PublishedRun& r, const TrainConfig& model) {
  if (r.tflops_per_gpu <= 0)
    TS_THROW(r.file,
             ": key 'published.tflops_per_gpu' is missing: there is no published "
             "throughput to compare with");
  return narayanan_step_flops(model, r.flops_with_recompute) / (r.tflops_per_gpu * 1e12 * r.gpus);
}

}  // namespace tessel::plan
