#include "tessel/plan/search/screen.h"

#include <algorithm>
#include <map>
#include <optional>

#include "tessel/base/error.h"
#include "tessel/compile/model_registry.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pipeline_stages.h"
#include "tessel/plan/model/bf16_all_reduce_cost.h"
#include "tessel/schedule/schedule.h"
#include "tessel/schedule/schedule_check.h"

namespace tessel::plan {
namespace {

Link axis_link(const Mesh& mesh, const char* name, int devices_per_node) {
  const int a = mesh.axis_index(name);
  return a >= 0 ? link_of_axis(mesh, a, devices_per_node) : Link::kIntraNode;
}

// The link a unit's collectives are pinned to: the model axis's, the ctx
// axis's, or with both the slower.
Link unit_link(const ScreenCandidate& c) {
  if (c.ctx < 2) return c.model_link;
  if (c.model < 2) return c.ctx_link;
  return std::max(c.model_link, c.ctx_link);
}

// What tells units apart besides rows, model size and recompute policy.
std::string unit_kind(const ScreenCandidate& c) {
  return c.ctx < 2 ? c.layout_label : str_cat(c.layout_label, " ctx=", c.ctx, c.context_parallel);
}

}  // namespace

std::string context_layout(bool data, bool model, const std::string& heads) {
  return std::string(data ? "batch=data," : "") +
         (model ? heads + "=model,hidden=model,vocab=model," : "") + "seq=ctx";
}

bool context_axis_fits(const TrainConfig& b, int model, int ctx, const std::string& strategy,
                       bool ctx_after_model) {
  if (b.context % ctx != 0) return false;
  // the balanced ring cuts the sequence into 2 x ctx equal halves
  if (strategy != "all_to_all") return b.context % (2 * ctx) == 0;
  const int64_t kv = b.model == "llama" && b.n_kv_head > 0 ? b.n_kv_head : b.n_head;
  const bool nested = (model == 1 || ctx_after_model) && kv % (model * ctx) == 0;
  if (b.model != "llama") return nested;
  return nested || (b.n_head / kv) % ctx == 0;
}

// Phase costs of one piece (embedding, block or head) per micro-batch, the
// parameter elements it holds on its rank, and the bytes a ZeRO-3 gather of
// them carries in the forward and in the backward (2 an element where the
// gathered copy would be stored in bf16, Program::gathered_in_bf16, else 4),
// and once a step its weight copies' host reads (StagePhaseCost).
struct Screener::Piece {
  double f = 0, bi = 0, bw = 0, accumulate = 0, held = 0, tensors = 0;
  double gather_f = 0, gather_b = 0, weight_copies = 0;
  void add(const Piece& o, double times) {
    f += times * o.f, bi += times * o.bi, bw += times * o.bw;
    weight_copies += times * o.weight_copies;
    accumulate += times * o.accumulate, held += times * o.held, tensors += times * o.tensors;
    gather_f += times * o.gather_f, gather_b += times * o.gather_b;
  }
};

// A stage of k blocks costs embed (first stage) + (k - 1) inner + last +
// head (last stage): a stage's last block differs from the others (its
// output leaves the stage, so a recompute policy keeps it).
struct Screener::Unit {
  Piece embed, inner, last, head;
  double tied = 0;  // elements of parameters read by the first and the last stage
  // Their ZeRO-3 gather bytes (forward, backward) in a single program, where
  // one gathered copy serves both ends' readers (the pieces' gather bytes
  // leave them out).
  double tied_gather_f = 0, tied_gather_b = 0;
  double act_bytes = 0, grad_bytes = 0;
};

struct Screener::Units {
  Unit on[2];         // by Link
  std::string error;  // the compile's error, for every candidate of this key
};

ScreenCandidate ScreenCandidate::of(const TrainConfig& c, const std::string& label,
                                    int devices_per_node) {
  const Mesh mesh = Mesh::parse(c.mesh);
  ScreenCandidate s;
  s.pipe = mesh.size_of("pipe"), s.data = mesh.size_of("data");
  s.model = mesh.size_of("model"), s.ctx = mesh.size_of("ctx");
  s.ctx_link = axis_link(mesh, "ctx", devices_per_node);
  if (s.ctx > 1) s.context_parallel = c.context_parallel;
  s.pipe_link = axis_link(mesh, "pipe", devices_per_node);
  s.data_link = axis_link(mesh, "data", devices_per_node);
  s.model_link = axis_link(mesh, "model", devices_per_node);
  s.layout_label = label;
  s.schedule = c.schedule, s.recompute = c.recompute;
  s.chunks = static_cast<int>(c.chunks), s.zero = c.zero;
  s.microbatches = c.microbatches;
  return s;
}

Screener::Screener(const TrainConfig& base, const HardwareModel& hw, const CostOptions& options)
    : base_(base), hw_(hw), options_(options) {}

Screener::~Screener() = default;

bool Screener::applies(const TrainConfig& base, bool layout_fixed,
                       const std::string* fixed_recompute, const HardwareModel& hw) {
  if (!is_builtin_transformer(base.model) || layout_fixed || base.n_layer < 1) return false;
  if (hw.progress().mode != CommProgress::Mode::kBackground) return false;
  if (!fixed_recompute) return true;
  return *fixed_recompute == "none" || *fixed_recompute == "selective" ||
         *fixed_recompute == "blocks";
}

const Screener::Unit& Screener::unit(int64_t rows, const ScreenCandidate& c) {
  const auto key = std::make_tuple(rows, c.model, unit_kind(c), c.recompute);
  auto it = units_.find(key);
  if (it != units_.end()) {
    if (!it->second->error.empty()) TS_THROW(it->second->error);
    return it->second->on[static_cast<int>(unit_link(c))];
  }
  // 5 blocks in 4 stages: embedding + block, block, 2 blocks, block + head.
  TrainConfig u = base_;
  u.n_layer = 5;
  u.batch = rows;
  u.microbatches = 1;
  u.mesh = str_cat("pipe=4", c.model > 1 ? str_cat(",model=", c.model) : "",
                   c.ctx > 1 ? str_cat(",ctx=", c.ctx) : "");
  u.layout = c.layout_label == "tensor+sequence"
                 ? heads_dim_of(base_.model) + "=model,hidden=model,vocab=model,seq=model"
                 : "";
  if (c.ctx > 1) {  // its collectives on ctx are on the pinned link too (unit_link)
    u.layout = context_layout(false, c.model > 1, heads_dim_of(base_.model));
    u.context_parallel = c.context_parallel;
  }
  // Compiled with its backward split (as zb-h1 compiles it): zero-bubble
  // schedules run the input and weight gradients apart, and the others
  // charge their sum (action_cost).
  u.schedule = "zb-h1";
  u.chunks = 1;
  u.zero = 0;
  u.recompute = c.recompute;
  u.stages = {1, 2, 4};
  // The unit is a pipeline, whose gradient reductions stay f32 (a bf16
  // grad_reduce_precision is refused there); screening times the data-axis
  // reduction itself, in the config's precision (single_program).
  u.grad_reduce_precision = "f32";
  const Mesh mesh = Mesh::parse(u.mesh);
  auto units = std::make_unique<Units>();
  try {
    const std::vector<CompiledRank> compiled =
        compile_ranks(u, representative_ranks(mesh, false), &unit_graphs_);
    ++units_compiled_;
    for (Link link : {Link::kIntraNode, Link::kInterNode}) {
      Piece stage[4];
      Unit& unit = units->on[static_cast<int>(link)];
      // Bytes an element of a ZeRO-3 gather of each held parameter carries,
      // (forward, backward): 0 where no reader needs it gathered. A tied
      // parameter has one gathered copy in a single program for the readers
      // of every stage holding it: bf16 only if all of them round it.
      std::map<std::string, std::pair<std::vector<std::optional<bool>>, double>> tied;
      for (const CompiledRank& cr : compiled) {
        const int r = cr.pipeline->pipe_rank();
        const std::vector<StagePhaseCost> costs = stage_phase_costs(cr, hw_, options_, link);
        TS_CHECK(costs.size() == 1, "screening: a unit rank holds ", costs.size(), " stages");
        const StagePhaseCost& sc = costs.front();
        stage[r].f = sc.f, stage[r].bi = sc.bi, stage[r].bw = sc.bw;
        stage[r].accumulate = sc.accumulate, stage[r].weight_copies = sc.weight_copies;
        const Program& program = *cr.pipeline->compiled_stages().front().instances.front();
        const int last_phase = program.phase_count() - 1;
        for (const PipelineParam& q : cr.pipeline->params()) {
          if (!q.held) continue;
          const double n = static_cast<double>(q.sharding.local_shape(q.shape, cr.mesh).numel());
          const ValueId id = program.graph().find(q.name);
          TS_CHECK(id >= 0, "screening: unit stage ", r, " holds '", q.name, "' but lacks it");
          const std::optional<bool> f = program.gathered_in_bf16(id, 0, 0);
          const std::optional<bool> b = program.gathered_in_bf16(id, 1, last_phase);
          stage[r].held += n;
          stage[r].tensors += 1;
          if (q.pipe_ranks.size() > 1) {  // counted once, below
            auto& [phases, elements] = tied[q.name];
            phases.push_back(f), phases.push_back(b);  // per stage: forward, backward
            elements = n;
          } else {
            stage[r].gather_f += f ? n * (*f ? 2 : 4) : 0;
            stage[r].gather_b += b ? n * (*b ? 2 : 4) : 0;
          }
          if (r == 0 && q.pipe_ranks.size() > 1) unit.tied += n;
        }
        if (r == 1) unit.act_bytes = sc.act_bytes, unit.grad_bytes = sc.grad_bytes;
      }
      for (const auto& [name, entry] : tied) {
        const auto& [phases, n] = entry;
        for (int phase = 0; phase < 2; ++phase) {
          bool read = false, bf16 = true;
          for (size_t k = phase; k < phases.size(); k += 2)
            if (phases[k]) read = true, bf16 = bf16 && *phases[k];
          (phase == 0 ? unit.tied_gather_f : unit.tied_gather_b) += read ? n * (bf16 ? 2 : 4) : 0;
        }
      }
      unit.last = stage[1];
      unit.inner = stage[2];
      unit.inner.add(stage[1], -1);
      unit.embed = stage[0];
      unit.embed.add(stage[1], -1);
      unit.head = stage[3];
      unit.head.add(stage[1], -1);
    }
  } catch (const Error& e) {
    units->error = e.what();
    units_.emplace(key, std::move(units));
    throw;
  }
  return units_.emplace(key, std::move(units)).first->second->on[static_cast<int>(unit_link(c))];
}

void Screener::note(const ScreenCandidate& c) {
  int64_t& rows = reference_rows_[std::make_tuple(c.model, unit_kind(c), c.recompute)];
  rows = std::max(rows, base_.batch / c.microbatches / c.data);
}

const Screener::Unit& Screener::reference(const ScreenCandidate& c, int64_t* rows) {
  auto r = reference_rows_.find(std::make_tuple(c.model, unit_kind(c), c.recompute));
  TS_CHECK(r != reference_rows_.end() && r->second >= *rows,
           "screening: a candidate with more rows than noted");
  *rows = r->second;
  const auto key =
      std::make_tuple(c.model, unit_kind(c), c.recompute, static_cast<int>(unit_link(c)));
  auto it = references_.find(key);
  if (it != references_.end()) return *it->second;
  return *references_.emplace(key, std::make_unique<Unit>(unit(*rows, c))).first->second;
}

const std::vector<int>& Screener::first_blocks(int64_t rows, int stages) {
  const auto key = std::make_tuple(rows, stages);
  auto it = partitions_.find(key);
  if (it != partitions_.end()) return it->second;
  Graph forward;
  GraphBuilder b(forward);
  build_model(base_, b, rows, /*training=*/true);
  const std::vector<int> boundaries(base_.stages.begin(), base_.stages.end());
  StagePartition p = partition_stages(forward, stages, boundaries);
  std::vector<int> first = p.first_block;
  first.push_back(p.blocks);  // the end of the last stage
  return partitions_.emplace(key, std::move(first)).first->second;
}

std::vector<Screener::Piece> Screener::stage_pieces(const Unit& u, int64_t rows, int stages) {
  const std::vector<int>& first = first_blocks(rows, stages);
  std::vector<Piece> stage(stages);
  for (int s = 0; s < stages; ++s) {
    stage[s].add(u.inner, first[s + 1] - first[s] - 1);
    stage[s].add(u.last, 1);
    if (s == 0) stage[s].add(u.embed, 1);
    if (s == stages - 1) stage[s].add(u.head, 1);
  }
  if (stages == 1) stage[0].held -= u.tied;  // one stage holds the tied embedding once
  return stage;
}

double Screener::collective(CollectiveKind kind, double bytes, int ranks, Link link) const {
  return ranks < 2 ? 0 : hw_.collective_seconds(kind, bytes, ranks, link);
}

// As the cost model's optimizer (optimizer_seconds). `share`: the ranks per
// core, as the cost model multiplies kernel times by.
double Screener::update(double state, int world, double share) const {
  return optimizer_seconds(hw_, base_, options_.threads, state, share, world,
                           world <= hw_.devices_per_node() ? Link::kIntraNode : Link::kInterNode);
}

double Screener::pipeline(const ScreenCandidate& c, const Unit& u, bool simulate) {
  const int p = c.pipe, d = c.data, chunks = c.chunks, stages = p * chunks;
  const int64_t micro = c.microbatches, rows = base_.batch / micro;
  const std::vector<Piece> stage = stage_pieces(u, rows, stages);
  // Per pipeline rank: its work (no waiting) and what follows the schedule
  // (stage s of a rank's chunk k is k * p + r, as Schedule::stage_of).
  const int world = p * d * c.model * c.ctx;
  const double share = std::max(1.0, hw_.compute_share(world, options_.threads));
  double bound = 0, warmup = 0,
         work = 0;  // warmup: rank r's first forward waits for stages 0..r-1's
  std::vector<double> post(p, 0);
  for (int r = 0; r < p; ++r) {
    if (r > 0) warmup += stage[r - 1].f;
    double busy = warmup, held = 0, copies = 0;
    bool tied = false;
    for (int k = 0; k < chunks; ++k) {
      const int s = k * p + r;
      const Piece& st = stage[s];
      const double own = static_cast<double>(micro) * (st.f + st.bi + st.bw + st.accumulate);
      busy += own, work += own;
      held += st.held, copies += st.weight_copies;
      tied = tied || s == 0 || s == stages - 1;
    }
    double t = collective(c.zero > 0 ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce,
                          4 * held, d, c.data_link);
    if (c.zero > 0 && d > 1)  // the updated chunks all-gathered, as the exact phase counts it
      t += collective(CollectiveKind::kAllGather, 4 * held / d, d, c.data_link) +
           share * hw_.memory_seconds(8 * held / d, options_.threads);
    if (tied && p > 1) t += collective(CollectiveKind::kAllReduce, 4 * u.tied, p, c.pipe_link);
    t += update(c.zero > 0 ? held / d : held, world, share) + share * copies;
    post[r] = t;
    bound = std::max(bound, busy + t);
  }
  if (!simulate) return bound;
  // The makespan depends on the unit, partition, schedule and pipe link only.
  const std::string key =
      str_cat(static_cast<const void*>(&u), "|", rows, "|", stages, "|", c.schedule, "|", p, "|",
              micro, "|", chunks, "|", static_cast<int>(c.pipe_link));
  auto it = makespans_.find(key);
  if (it == makespans_.end()) {
    const Schedule schedule = make_schedule(c.schedule, p, static_cast<int>(micro), chunks);
    ActionCosts costs;
    costs.compute = [&](int r, const Action& a) {
      const Piece& st = stage[schedule.stage_of(r, a.chunk)];
      return action_cost(a.kind, UnitCosts{st.f, st.bi, st.bw + st.accumulate});
    };
    costs.transfer = [&](int, const Action& a) {
      const double bytes = a.kind == ActionKind::kSendActivation ? u.act_bytes : u.grad_bytes;
      return p > 1 ? hw_.p2p_seconds(bytes, c.pipe_link) : 0.0;
    };
    // Unchecked: every make_schedule result passes check_schedule (its
    // contract, tested over a grid of schedules), and the exact phase checks
    // the schedule of every candidate it costs. Checking each of the
    // thousands of long schedules screening simulates took half of a
    // 3,072-device search.
    it = makespans_.emplace(key, simulate_checked_schedule(schedule, costs).makespan).first;
    ++simulated_;
  }
  // Ranks sharing a core fill each other's bubbles: the schedule takes at
  // least the cores' work (as the cost model's pipeline_steps).
  const double makespan = std::max(it->second, share * work / p);
  double step = 0;
  for (int r = 0; r < p; ++r) step = std::max(step, makespan + post[r]);
  return std::max(step, bound);
}

namespace {

// Whole-tensor bytes of a piece's ZeRO-3 gathers in the forward or the
// backward; the tied parameters' copy is gathered with the embedding.
template <typename Unit, typename Piece>
double gather_payload(const Unit& u, const Piece& piece, bool forward) {
  const double tied = &piece == &u.embed ? (forward ? u.tied_gather_f : u.tied_gather_b) : 0;
  return (forward ? piece.gather_f : piece.gather_b) + tied;
}

bool pipelined(const ScreenCandidate& c) { return c.pipe > 1 || c.microbatches > 1; }

// ZeRO's axis (Layout::zero_axis): the data axis, or, in a single program
// without one, the ctx axis. Its rank count (1: no ZeRO sharding) and link.
int zero_ranks(const ScreenCandidate& c) {
  if (c.data > 1) return c.data;
  return c.ctx > 1 && !pipelined(c) ? c.ctx : 1;
}
Link zero_link(const ScreenCandidate& c) { return c.data > 1 ? c.data_link : c.ctx_link; }

}  // namespace

double Screener::zero3_gather_bytes(const ScreenCandidate& c) {
  const Unit& u = unit(base_.batch / c.microbatches / c.data, c);
  double bytes = 0;
  for (const auto& [piece, times] : std::vector<std::pair<const Piece*, double>>{
           {&u.head, 1}, {&u.last, 1}, {&u.inner, base_.n_layer - 1.0}, {&u.embed, 1}})
    bytes += times * (gather_payload(u, *piece, true) + gather_payload(u, *piece, false));
  const int z = zero_ranks(c);
  return z > 1 ? bytes / z : 0;
}

double Screener::each_tensor(CollectiveKind kind, const Piece& piece, double divide, double wire,
                             int ranks, Link link) const {
  if (piece.tensors <= 0 || ranks < 2) return 0.0;
  return piece.tensors * collective(kind, wire * piece.held / piece.tensors / divide, ranks, link);
}

// ZeRO 1-3: gradients reduce-scattered as they are produced (blocking);
// ZeRO 3: every parameter gathered before its forward and its backward use.
// A gather carries the bytes the exact phase's would (Piece::gather_f,
// gather_b: 2 an element where the gathered copy is stored in bf16), per
// tensor of the piece's mean size; unpacking as before (4 an element).
// Over a ctx axis (no data axis) the unit's programs all-reduce each
// gradient on it behind the backward; ZeRO reduce-scatters it blocking and
// (ZeRO 1, 2) all-gathers the updated chunks, as on a data axis.
double Screener::zero_collectives(const ScreenCandidate& c, const Unit& u,
                                  const std::vector<std::pair<const Piece*, double>>& backward,
                                  double share, double reduce_bytes) const {
  const int d = c.data, z = zero_ranks(c);
  auto memory = [&](double bytes) { return share * hw_.memory_seconds(bytes, options_.threads); };
  auto reduce_scatter = [&](const Piece& piece) {
    if (d > 1)
      return each_tensor(CollectiveKind::kReduceScatter, piece, 1, reduce_bytes, d, c.data_link) +
             (piece.tensors > 0 ? memory(2 * reduce_bytes * piece.held) : 0.0);
    double t = each_tensor(CollectiveKind::kReduceScatter, piece, 1, 4, z, c.ctx_link);
    if (c.zero < 3 && piece.tensors > 0)
      t += each_tensor(CollectiveKind::kAllGather, piece, z, 4, z, c.ctx_link) +
           memory(2 * 4 * piece.held / z);
    return t;
  };
  auto gather = [&](const Piece& piece, double payload) {
    if (piece.tensors <= 0) return 0.0;
    return piece.tensors * collective(CollectiveKind::kAllGather, payload / piece.tensors / z, z,
                                      zero_link(c)) +
           memory(2 * 4 * piece.held / z);
  };
  double t = 0;
  for (const auto& [piece, times] : backward) {
    t += times * reduce_scatter(*piece);
    if (c.zero == 3)
      t += times * (gather(*piece, gather_payload(u, *piece, true)) +
                    gather(*piece, gather_payload(u, *piece, false)));
  }
  return t;
}

double Screener::single_program(const ScreenCandidate& c, const Unit& u, bool exposed) {
  const int d = c.data, z = zero_ranks(c);
  const int64_t rows = base_.batch / d;
  // Ranks sharing a core: kernel and memory times multiplied by their
  // number per core, collectives not (as the cost model's Simulator).
  const double share = std::max(1.0, hw_.compute_share(d * c.model * c.ctx, options_.threads));
  const double blocks = static_cast<double>(base_.n_layer);
  // The pieces in backward order, the tied embedding's gradient complete
  // only with the embedding's backward (the unit counts it on both ends).
  Piece head = u.head;
  head.held -= u.tied, head.tensors -= u.tied > 0 ? 1 : 0;
  std::vector<std::pair<const Piece*, double>> backward = {
      {&head, 1}, {&u.last, 1}, {&u.inner, blocks - 1}, {&u.embed, 1}};
  Piece all;
  for (const auto& [piece, times] : backward) all.add(*piece, times);
  // Bytes an element of a gradient reduction carries, as the exact phase
  // counts them: 2 when grad_reduce_precision is bf16 (its buckets, below,
  // and ZeRO's reduce-scatters, CompileOptions::bf16_reduce), else 4. The
  // copies into the buckets stay f32.
  const double reduce_bytes = base_.grad_reduce_precision == "bf16" ? 2 : 4;
  // Per parameter tensor of a piece: a collective of its mean size, `wire`
  // bytes an element, and the packing pass over them.
  auto per_tensor = [&](CollectiveKind kind, const Piece& piece, double divide, double wire) {
    if (piece.tensors <= 0 || d < 2) return 0.0;
    return each_tensor(kind, piece, divide, wire, d, c.data_link) +
           share * hw_.memory_seconds(2 * wire * piece.held / divide, options_.threads);
  };
  const double zero =
      c.zero > 0 && z > 1 ? zero_collectives(c, u, backward, share, reduce_bytes) : 0;
  // ZeRO 0: each gradient copied into its bucket. With f32 reductions a
  // bucket's all-reduce starts once it holds bucket_mib (or at the end),
  // behind the backward; bf16 buckets are reduced blocking at their last
  // member, as the runtime and the exact phase do (bf16_all_reduce_cost.h).
  const bool bf16_buckets = c.zero == 0 && d > 1 && reduce_bytes == 2;
  const double bucket_copies =
      c.zero == 0 && d > 1 ? share * hw_.memory_seconds(2 * 4 * all.held, options_.threads) : 0;
  // The backward's gradients in order, packed into buckets of bucket_mib:
  // `grown(piece)` after each piece's gradient, `full(f32_bytes)` when a
  // bucket closes (and for the last, partial one).
  const double bucket = base_.bucket_mib * 1048576.0;
  auto each_bucket = [&](auto&& grown, auto&& full) {
    double filled = 0;
    for (const auto& [piece, times] : backward) {
      for (int i = 0; i < static_cast<int>(times); ++i) {
        grown(*piece);
        filled += 4 * piece->held;
        if (filled >= bucket) full(filled), filled = 0;
      }
    }
    if (filled > 0) full(filled);
  };
  double bf16_reductions = 0;
  if (bf16_buckets) {
    each_bucket(
        [](const Piece&) {},
        [&](double f32_bytes) {
          bf16_reductions += bf16_all_reduce_seconds(
              f32_bytes, d,
              [&](CollectiveKind kind, double bytes) {
                return collective(kind, bytes, d, c.data_link);
              },
              [&](double bytes) { return share * hw_.memory_seconds(bytes, options_.threads); });
        });
  }
  // ZeRO 3 rounds its gathered copies, in device memory, not the host's weights.
  const double copies = c.zero == 3 ? 0 : all.weight_copies;
  const double compute =
      share * (all.f + all.bi + all.bw + copies) + zero + bucket_copies + bf16_reductions;
  double wait = 0;
  if (exposed && c.zero == 0 && d > 1 && !bf16_buckets) {
    double clock = compute - (share * (all.bi + all.bw) + bucket_copies), free = 0;
    each_bucket(
        [&](const Piece& piece) {
          clock += share *
                   (piece.bi + piece.bw + hw_.memory_seconds(2 * 4 * piece.held, options_.threads));
        },
        [&](double f32_bytes) {
          free = std::max(free, clock) +
                 collective(CollectiveKind::kAllReduce, f32_bytes, d, c.data_link);
        });
    wait = std::max(0.0, free - compute);
  }
  // Feeding the rank's rows (tokens and targets, 4 bytes each, copied in).
  const double feed = 2 * share *
                      hw_.memory_seconds(2.0 * 2 * 4 * static_cast<double>(rows) *
                                             static_cast<double>(base_.context / c.ctx),
                                         options_.threads);
  const double state = c.zero > 0 ? all.held / z : all.held;
  double optimizer = update(state, d * c.model * c.ctx, share);
  // ZeRO 1, 2: every parameter's updated chunks all-gathered, one
  // collective per parameter as the runtime runs them.
  if ((c.zero == 1 || c.zero == 2) && d > 1)
    for (const auto& [piece, times] : backward)
      optimizer += times * per_tensor(CollectiveKind::kAllGather, *piece, d, 4);
  return compute + wait + feed + optimizer;
}

double Screener::state_bytes_bound(const ScreenCandidate& c) {
  int64_t rows = base_.batch / c.microbatches / c.data;
  const Unit& u = reference(c, &rows);  // held elements do not depend on the rows
  const double d = zero_ranks(c);
  // Offloaded moments and weights are no device memory where host memory is
  // not the device's.
  const bool on_host = !hw_.host_buffers_on_device();
  const bool moments = base_.optimizer == "adamw" && !(on_host && offloads(base_, "optimizer"));
  const bool weights = !(on_host && offloads(base_, "weights"));
  const double per_element =
      (weights ? 4 / (c.zero == 3 ? d : 1) : 0) + (moments ? 8 / (c.zero >= 1 ? d : 1) : 0);
  if (!pipelined(c))
    return per_element * (u.embed.held + u.head.held - u.tied + u.last.held +
                          (static_cast<double>(base_.n_layer) - 1) * u.inner.held);
  const int p = c.pipe;
  const std::vector<Piece> stage = stage_pieces(u, base_.batch / c.microbatches, p * c.chunks);
  double most = 0;
  for (int r = 0; r < p; ++r) {
    double held = 0;
    for (size_t s = r; s < stage.size(); s += p) held += stage[s].held;
    most = std::max(most, held);
  }
  return per_element * most;
}

double Screener::lower_bound(const ScreenCandidate& c) {
  // The reference unit's phase times scaled from its rows to the
  // candidate's local rows per micro-batch (parameters do not scale).
  const int64_t rows = base_.batch / c.microbatches / c.data;
  int64_t reference_rows = rows;
  const Unit& ref = reference(c, &reference_rows);
  const double scale = static_cast<double>(rows) / static_cast<double>(reference_rows);
  Unit u = ref;
  for (Piece* piece : {&u.embed, &u.inner, &u.last, &u.head}) {
    Piece scaled;
    scaled.add(*piece, scale);
    scaled.held = piece->held, scaled.tensors = piece->tensors;
    *piece = scaled;
  }
  u.act_bytes *= scale, u.grad_bytes *= scale;
  return pipelined(c) ? pipeline(c, u, false) : single_program(c, u, false);
}

double Screener::estimate(const ScreenCandidate& c) {
  const int64_t rows = base_.batch / c.microbatches / c.data;
  const Unit& u = unit(rows, c);
  return pipelined(c) ? pipeline(c, u, true) : single_program(c, u, true);
}

}  // namespace tessel::plan
