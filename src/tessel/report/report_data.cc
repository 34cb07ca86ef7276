#include "tessel/report/report_data.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tessel/base/error.h"
#include "tessel/report/config_diff.h"
#include "tessel/report/trace_step.h"

namespace tessel::report {
namespace {

using nlohmann::json;

bool finite_number(const json& j) { return j.is_number() && std::isfinite(j.get<double>()); }

std::string text_of(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// The last finite value of `key` over the steps, or null.
json last_value(const std::vector<json>& steps, const char* key) {
  for (auto it = steps.rbegin(); it != steps.rend(); ++it)
    if (it->contains(key) && finite_number((*it)[key])) return (*it)[key];
  return nullptr;
}

json series(const std::vector<json>& steps, const char* key) {
  json out = json::array();
  for (const json& s : steps)
    if (s.contains(key) && finite_number(s[key])) out.push_back({s["step"], s[key]});
  return out;
}

// Bytes each mesh axis carried per step (all collective kinds summed).
json comm_series(const std::vector<json>& steps) {
  std::set<std::string> axes;
  for (const json& s : steps)
    if (s.contains("comm") && s["comm"].is_object())
      for (const auto& axis : s["comm"].items()) axes.insert(axis.key());
  json out = json::object();
  for (const std::string& axis : axes) {
    json points = json::array();
    for (const json& s : steps) {
      if (!s.contains("comm") || !s["comm"].is_object()) continue;
      double bytes = 0;
      if (s["comm"].contains(axis) && s["comm"][axis].is_object())
        for (const auto& kind : s["comm"][axis].items())
          if (kind.value().is_object() && finite_number(kind.value().value("bytes", json())))
            bytes += kind.value()["bytes"].get<double>();
      points.push_back({s["step"], bytes});
    }
    out[axis] = points;
  }
  return out;
}

json memory_rows(const json& summary) {
  json out = json::array();
  if (!summary.is_object() || !summary.contains("memory_per_rank")) return out;
  for (const json& m : summary["memory_per_rank"]) {
    if (!m.is_object()) continue;
    json predicted = m.contains("predicted_bytes") && m["predicted_bytes"].is_object()
                         ? m["predicted_bytes"].value("total", json())
                         : json();
    out.push_back({{"rank", m.value("rank", json())},
                   {"predicted", predicted},
                   {"measured", m.value("measured_peak_tracked_bytes", json())},
                   {"rss", m.value("peak_rss_bytes", json())}});
  }
  return out;
}

json bubble_rows(const json& summary) {
  json out = json::array();
  if (!summary.is_object() || !summary.contains("pipeline") || !summary["pipeline"].is_object())
    return out;
  const json& p = summary["pipeline"];
  const json measured = p.value("measured_bubble", json::array());
  const json schedule = p.value("theoretical_bubble", json::array());
  if (!measured.is_array()) return out;
  for (size_t r = 0; r < measured.size(); ++r)
    out.push_back(
        {{"rank", r},
         {"measured", measured[r]},
         {"schedule", schedule.is_array() && r < schedule.size() ? schedule[r] : json()}});
  return out;
}

std::string schedule_text(const RunData& run) {
  const json& s = run.summary;
  if (s.is_object() && s.contains("pipeline") && s["pipeline"].is_object())
    return str_cat(text_of(s["pipeline"].value("schedule", json("?"))), ", ",
                   text_of(s["pipeline"].value("microbatches", json("?"))), " micro-batches");
  const json micro = run.config_value("microbatches", 1);
  if (micro.is_number() && micro.get<double>() > 1)
    return str_cat("none (", micro.dump(), " accumulated micro-batches)");
  return "none";
}

// Where a resumed run restarted: "step N on MESH" for each metrics line
// `tessel train --resume` marked, "; "-separated; "" for a run never resumed.
std::string restarts_text(const RunData& run) {
  std::string text;
  for (const json& line : run.steps) {
    if (!line.contains("resumed") || !line["resumed"].is_object()) continue;
    const json& r = line["resumed"];
    text += str_cat(text.empty() ? "" : "; ", "step ", line["step"].dump(), " on ",
                    text_of(r.value("mesh", json("?"))));
  }
  return text;
}

json header(const RunData& run, bool with_precision) {
  const json& s = run.summary;
  auto from_summary = [&](const char* key) {
    return s.is_object() && s.contains(key) ? s[key] : json();
  };
  json mesh = from_summary("mesh");
  if (mesh.is_null()) mesh = run.config_value("mesh", json());
  // summary.json holds the resolved layout ("" = every value replicated);
  // the config's "" means the mesh's defaults.
  json layout = from_summary("layout");
  if (layout == "") layout = "replicated";
  if (layout.is_null()) layout = run.config_value("layout", json());
  json loss = from_summary("final_loss");
  if (!finite_number(loss)) loss = last_value(run.steps, "loss");
  json val = from_summary("final_val_loss");
  if (!finite_number(val) || val.get<double>() < 0) val = last_value(run.steps, "val_loss");
  json h = json::object();
  h["run"] = run.name;
  h["model"] = text_of(run.config_value("model", from_summary("model")));
  h["mesh"] = mesh.is_null() ? "?" : mesh == "" ? "1 rank" : text_of(mesh);
  h["layout"] = layout.is_null() ? "?" : layout == "" ? "default" : text_of(layout);
  h["schedule"] = schedule_text(run);
  if (with_precision)
    h["precision"] = text_of(run.config_value("precision", from_summary("precision")));
  // Steps run, and the config's steps where they differ (a run that
  // stopped early; the config's key has no column of its own).
  h["steps"] = std::to_string(run.steps.size());
  const json configured = run.config_value("steps", json());
  if (configured.is_number_integer() &&
      configured.get<int64_t>() != static_cast<int64_t>(run.steps.size()))
    h["steps"] = str_cat(run.steps.size(), " of ", configured.get<int64_t>());
  h["final loss"] = finite_number(loss) ? fixed(loss.get<double>(), 4) : "";
  h["final val loss"] = finite_number(val) ? fixed(val.get<double>(), 4) : "";
  json base = from_summary("baseline_loss");
  h["baseline"] = finite_number(base) ? fixed(base.get<double>(), 4) : "";
  h["restarts"] = restarts_text(run);
  return h;
}

}  // namespace

json report_data(const std::vector<RunData>& runs, const json& plan_points) {
  json data = {{"runs", json::array()},
               {"plan_validation", plan_points.is_array() ? plan_points : json::array()},
               {"warnings", json::array()}};
  bool with_precision = false;
  std::vector<json> configs;
  for (const RunData& run : runs) {
    with_precision |= !run.config_value("precision", json()).is_null() ||
                      (run.summary.is_object() && run.summary.contains("precision"));
    configs.push_back(run.config);
  }
  // Mesh, layout, schedule, precision and steps have their own columns.
  const std::vector<std::string> diff =
      differing_keys(configs, {"mesh", "layout", "schedule", "precision", "steps"});
  data["diff_keys"] = diff;
  data["columns"] = {"run", "model", "mesh", "layout", "schedule"};
  if (with_precision) data["columns"].push_back("precision");
  for (const char* c : {"steps", "final loss", "final val loss", "baseline"})
    data["columns"].push_back(c);
  // Restarts: a column only when some run was resumed.
  if (std::any_of(runs.begin(), runs.end(),
                  [](const RunData& run) { return !restarts_text(run).empty(); }))
    data["columns"].push_back("restarts");

  std::set<std::string> models, datasets;
  for (const RunData& run : runs) {
    for (const std::string& w : run.warnings) data["warnings"].push_back(w);
    json r = {{"name", run.name}, {"dir", run.dir}, {"header", header(run, with_precision)}};
    r["config_diff"] = json::object();
    for (const std::string& key : diff)
      r["config_diff"][key] = run.config_value(key, json("(unset)"));
    const json base = run.summary.is_object() ? run.summary.value("baseline_loss", json()) : json();
    r["baseline"] = finite_number(base) ? base : json();
    r["series"] = json::object();
    for (const char* key : {"loss", "val_loss", "lr", "grad_norm", "step_ms", "tokens_per_s"})
      r["series"][key] = series(run.steps, key);
    r["comm"] = comm_series(run.steps);
    r["memory"] = memory_rows(run.summary);
    r["bubble"] = bubble_rows(run.summary);
    r["timeline"] = nullptr;
    if (!run.trace.is_null()) {
      const json steps = run.config_value("steps", json());
      std::vector<std::string> warnings;
      r["timeline"] = last_step_timeline(
          run.trace,
          steps.is_number_integer() ? steps.get<int64_t>() : static_cast<int64_t>(run.steps.size()),
          run.trace_path, warnings);
      for (const std::string& w : warnings) data["warnings"].push_back(w);
    }
    if (run.config.is_object()) {
      models.insert(text_of(run.config_value("model", json("?"))));
      datasets.insert(text_of(run.config_value("data", json("?"))));
    }
    data["runs"].push_back(r);
  }
  if (models.size() > 1)
    data["warnings"].push_back("the runs train different models (" + str_join(models, ", ") +
                               "): their losses are not comparable");
  if (datasets.size() > 1)
    data["warnings"].push_back("the runs read different data (" + str_join(datasets, ", ") +
                               "): each has its own baseline");
  return data;
}

}  // namespace tessel::report
