#include "tessel/plan/search/no_fit.h"

#include "tessel/base/error.h"
#include "tessel/plan/format_size.h"

namespace tessel::plan {
namespace {

// " (fixed in this request: --FLAG)" where the request fixed the knob, else "".
std::string fixed(bool is_fixed, const char* flag) {
  return is_fixed ? str_cat(" (fixed in this request: ", flag, ")") : std::string();
}

}  // namespace

std::string no_fit_message(const PlanRequest& q, const NoFit& n) {
  const TrainConfig& c = n.smallest;
  const Mesh mesh = Mesh::parse(c.mesh);
  const int pipe = mesh.size_of("pipe"), data = mesh.size_of("data"), model = mesh.size_of("model");
  const int64_t rows = c.batch / std::max<int64_t>(1, data) / std::max<int64_t>(1, c.microbatches);
  std::string out = str_cat(
      "plan: none of the ", n.considered, " configurations of ", q.ranks, " ranks fits ",
      format_size(n.limit), " per rank (",
      n.limit_is_device ? "the device's memory" : "--memory-limit", "). Of the ", n.exact,
      " costed exactly", n.screened ? " (those the search estimated fastest)" : "",
      ", the smallest peak is ", format_size(n.smallest_peak), ", ",
      n.smallest_peak * 100 / std::max<int64_t>(1, n.limit), "% of the limit:", plan_flags(c), ".",
      c.recompute == "blocks" && rows <= 1
          ? " It already recomputes every block and runs micro-batches of one sequence."
          : "",
      "\nWhat would lower it:");
  out += str_cat("\n  - more pipeline stages or tensor parallelism (pipe ", pipe, ", model ", model,
                 " now; each holds a share of the weights and activations)",
                 fixed(q.mesh.has_value(), "--mesh"), ", or more ranks");
  const bool pipelined = pipe > 1 || c.microbatches > 1;
  const int top_zero = pipelined ? 2 : 3;  // ZeRO 3: no pipelines yet
  // ZeRO's axis: data, or in a single program without one, ctx (Layout::zero_axis).
  const char* zero_axis = data > 1                                ? "data"
                          : !pipelined && mesh.size_of("ctx") > 1 ? "ctx"
                                                                  : nullptr;
  if (zero_axis && c.zero < top_zero)
    out += str_cat("\n  - a higher ZeRO stage (", c.zero,
                   " now: 1 shards the optimizer state over the ", zero_axis,
                   " axis, 2 the gradients too",
                   top_zero == 3 ? ", 3 the weights" : "; 3 is not available with pipelines", ")",
                   fixed(q.zero.has_value(), "--zero"));
  else if (!zero_axis)
    out +=
        "\n  - ZeRO, which needs a data axis (or, in a single program, a ctx axis) to shard "
        "over (this plan has none)";
  if (c.recompute != "blocks")
    out += str_cat("\n  - recomputation (--recompute blocks keeps only each block's input; ",
                   c.recompute, " now)", fixed(q.recompute.has_value(), "--recompute"));
  if (rows > 1)
    out += str_cat("\n  - more micro-batches (", c.microbatches, " of ", rows,
                   " sequences each now)", fixed(q.microbatches.has_value(), "--microbatches"));
  out += str_cat("\n  - a smaller context (", c.context, " now) or batch (", c.batch,
                 " now): --set context=... or --set batch=...");
  if (n.offload_helps && c.offload != "optimizer,weights,activations")
    out += str_cat(
        "\n  - offload (--offload optimizer,weights,activations keeps AdamW's moments, the "
        "f32 weights and the stored activations in host memory; ",
        c.offload, " now)", fixed(q.offload_fixed, "--offload"));
  out += n.limit_is_device
             ? "\nTo see the plans anyway, pass --ignore-device-memory: the table then keeps "
               "plans over the device's memory, each with its predicted peak."
             : "\nTo see the plans anyway, raise --memory-limit (or drop it; "
               "--ignore-device-memory also lifts the device's own limit).";
  return out;
}

}  // namespace tessel::plan
