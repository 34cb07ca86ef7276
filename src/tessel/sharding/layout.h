// Layout: which dims are spread over which mesh axes (Mesh-TensorFlow style).
//
// A layout maps dim names to mesh axes: `batch=data` is data parallelism;
// `heads=model,hidden=model,vocab=model` is Megatron tensor parallelism;
// adding `seq=model` is sequence parallelism. Several dims may map to one
// axis; their order is a priority: a value holding two of them is split on
// the first (so `seq` is split only where no `heads`/`hidden`/`vocab` is —
// around the norms and residuals, exactly Megatron's sequence parallelism).
// A dim maps to at most one axis. Per-value overrides (GShard-style
// annotations, keyed by node label) say what a layout cannot.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessel/base/shape.h"
#include "tessel/ir/graph.h"
#include "tessel/sharding/mesh.h"
#include "tessel/sharding/placement.h"

namespace tessel {

// How fused attention runs on an axis that splits its query dim (`seq`):
// context parallelism (docs/attention.md). All-to-all (DeepSpeed-Ulysses):
// q, k and v go from sequence-split to heads-split before the op and back
// after it. Ring: each rank keeps its query chunk and key/value chunks
// travel around the axis's ring inside the op.
enum class ContextParallel { kAllToAll, kRing };
ContextParallel parse_context_parallel(const std::string& text);

class Layout {
 public:
  Layout() = default;
  // "batch=data,heads=model"; errors name unknown axes and doubly mapped dims.
  // Attention's key positions (`kseq`) follow `seq` to its axis unless
  // mapped themselves: keys are split where queries are (context parallelism).
  static Layout parse(const std::string& text, const Mesh& mesh);
  // Defaults by axis name: data -> batch; model -> heads, kv_heads (Llama), hidden, vocab;
  // any other axis maps nothing. They are resolved against a model by
  // drop_absent_defaults: a default dim the model lacks maps nothing.
  static Layout defaults(const Mesh& mesh);
  // Removes the default entries (not those parsed from text) whose dim no
  // tensor of `graph` has (the MLP has no `heads`).
  void drop_absent_defaults(const Graph& graph);

  // Override for the value labelled `label`: "seq=model,..." or "" (all B).
  void set_override(const std::string& label, const std::string& spec, const Mesh& mesh);

  // The sharding a value of this shape and label should have.
  Sharding target(const Shape& shape, const std::string& label, const Mesh& mesh) const;
  // The axis a dim maps to, or -1.
  int axis_of(const std::string& dim) const;
  // The axis whose ranks hold replicas of the weights and sum their
  // gradients, which ZeRO shards over (compile/zero.h): the one `batch` maps
  // to; with none, a context-parallel axis (one only `seq` and its keys map
  // to), as FSDP shards over the context-parallel ranks. -1: none.
  int zero_axis() const;

  // Before any compute: every mapped dim exists somewhere in the graph (a
  // default the model lacks is skipped), every value's target divides
  // evenly, and every mesh axis of size > 1 but `pipe` (the pipeline's) has a
  // dim mapped to it, by the layout or an override: otherwise every rank along
  // it would do the same work. Throws naming dim, axis and sizes (for an
  // unmapped axis: the model's dims it could split). A context-parallel
  // strategy set for a model with no fused attention op is an error.
  void validate(const Graph& graph, const Mesh& mesh) const;

  std::string to_string() const;

  // The context-parallel strategy (all-to-all unless set). Once set, the
  // model must have a fused attention op (validate).
  ContextParallel context_parallel() const { return context_parallel_; }
  void set_context_parallel(ContextParallel c) {
    context_parallel_ = c;
    context_parallel_asked_ = true;
  }

 private:
  struct Entry {
    std::string dim;
    int axis;
    std::string axis_name;
    bool by_default = false;  // from defaults(), not from the user's text
    bool implicit = false;    // kseq following seq's axis (not printed)
  };
  std::vector<Entry> entries_;  // in priority order
  std::map<std::string, std::vector<Entry>> overrides_;
  ContextParallel context_parallel_ = ContextParallel::kAllToAll;
  bool context_parallel_asked_ = false;
};

}  // namespace tessel
