#include "tessel/passes/recompute_policy.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "tessel/base/error.h"
#include "tessel/ir/model_contract.h"
#include "tessel/passes/block_label.h"

namespace tessel {
namespace {

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why) {
  TS_THROW("config: 'recompute' \"", spec, "\" ", why,
           "; expected none, selective, blocks, blocks:K, blocks:K:J (each optionally "
           "+selective) or auto");
}

int positive_number(const std::string& spec, const std::string& text, const char* what) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < 1)
    bad_spec(spec, str_cat("has ", what, " '", text, "', which must be a positive whole number"));
  return value;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.push_back("");
  return parts;
}

}  // namespace

std::string RecomputePolicy::to_string() const {
  if (group == 0) return selective ? "selective" : "none";
  std::string s = "blocks";
  if (first)
    s += str_cat(":", group, ":", *first);
  else if (group != 1)
    s += str_cat(":", group);
  return selective ? s + "+selective" : s;
}

RecomputePolicy RecomputePolicy::parse(const std::string& spec) {
  RecomputePolicy p;
  if (spec == "none" || spec.empty()) return p;
  if (spec == "auto")
    TS_THROW(
        "config: 'recompute' \"auto\" must be resolved to a policy (choose_recompute) "
        "before a graph is built");
  for (const std::string& part : split(spec, '+')) {
    if (part == "selective") {
      if (p.selective) bad_spec(spec, "names selective twice");
      p.selective = true;
      continue;
    }
    std::vector<std::string> fields = split(part, ':');
    if (fields[0] != "blocks" || fields.size() > 3)
      bad_spec(spec, str_cat("has an unknown part '", part, "'"));
    if (p.group > 0) bad_spec(spec, "names block segments twice");
    p.group = fields.size() > 1 ? positive_number(spec, fields[1], "segment size K") : 1;
    if (fields.size() > 2) p.first = positive_number(spec, fields[2], "block count J");
  }
  return p;
}

void RecomputePolicy::check_blocks(int64_t blocks) const {
  if (group > blocks)
    TS_THROW("config: 'recompute' \"", to_string(), "\" groups ", group,
             " blocks per segment but the model has ", blocks, " ('n_layer')");
  if (first && *first > blocks)
    TS_THROW("config: 'recompute' \"", to_string(), "\" recomputes the first ", *first,
             " blocks but the model has ", blocks, " ('n_layer')");
}

namespace {

bool is_activation(OpKind kind) {
  return kind == OpKind::kGelu || kind == OpKind::kBiasGelu || kind == OpKind::kSilu ||
         kind == OpKind::kRelu;
}

// What the backward recomputes cheaply from values it keeps anyway: a
// norm's output (from the residual stream its gradient reads), an
// activation's (from its pre-activation) and a product gating one
// (SwiGLU's, from the activation's clone and the stored projection).
bool cheap_from_kept_values(const Graph& g, const Node& n) {
  if (n.kind == OpKind::kLayerNorm || n.kind == OpKind::kRmsNorm || is_activation(n.kind))
    return true;
  return n.kind == OpKind::kMul && std::any_of(n.inputs.begin(), n.inputs.end(), [&](ValueId in) {
           return is_activation(g.node(in).kind);
         });
}

}  // namespace

SegmentFn RecomputePolicy::segments() const {
  const RecomputePolicy p = *this;
  return [p](const Graph& g, const Node& n) -> std::string {
    const int block = block_of_label(n.name);
    if (block < 0) return "";
    if (p.group > 0 && (!p.first || block < *p.first))
      return "blocks" + std::to_string(block / p.group * p.group);
    if (!p.selective) return "";
    if (n.shape.has(kSeqDim) && n.shape.has(kKeySeqDim)) return block_scope(block) + ".attention";
    return cheap_from_kept_values(g, n) ? block_scope(block) + ".cheap" : "";
  };
}

}  // namespace tessel
