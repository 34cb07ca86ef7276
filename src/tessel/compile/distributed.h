// Where this process sits in a parallel run: the mesh, the layout, this
// rank's coordinates and one communicator per mesh axis (plus the world).
//
// groups() carry device buffers (programs, ZeRO, pipeline gradients);
// host_groups() and world() carry host buffers (scalars, checkpoints). With
// staging (collectives: staged) each axis has two communicators: a
// StagedCommunicator for groups() and a plain one for host_groups();
// without, both name the same.
//
// Under an MPI launcher (mpirun) MPI is initialised and the mesh must have
// exactly as many ranks as processes; a plain process is a mesh of one and
// never touches MPI. Sub-communicators are created collectively, in axis
// order, on every rank. Also offers the shard <-> full-tensor copies that
// initialisation, data loading and checkpoints need.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/backend/backend.h"
#include "tessel/comm/comm_groups.h"
#include "tessel/comm/communicator.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"

namespace tessel {

// Collectives on device buffers staged through pinned host memory: the
// backend owning those buffers, and the elements of a rank block staged at
// a time (TrainConfig::staging_mib).
struct CollectiveStaging {
  Backend* backend = nullptr;
  int64_t piece = 0;
};

class DistributedContext {
 public:
  // `mesh_text` like "data=2,model=2" ("" = one rank); `layout_text` like
  // "batch=data,heads=model" ("" = the defaults for the mesh's axis names).
  // Errors (mesh vs process count, unknown axes) are thrown on every rank
  // alike, before any collective runs.
  DistributedContext(const std::string& mesh_text, const std::string& layout_text,
                     std::optional<CollectiveStaging> staging = std::nullopt);
  // Pinned host bytes the staged communicators of `mesh` hold (one per axis).
  static int64_t staging_bytes(const Mesh& mesh, int64_t piece);
  ~DistributedContext();

  const Mesh& mesh() const { return mesh_; }
  const Layout& layout() const { return layout_; }
  Layout& layout() { return layout_; }
  int rank() const { return rank_; }
  const std::vector<int>& coords() const { return coords_; }
  bool is_root() const { return rank_ == 0; }
  const CommGroups& groups() const { return groups_; }
  const CommGroups& host_groups() const { return host_groups_; }
  bool staged() const { return staged_; }
  Communicator& world() { return *world_; }
  // Sum of collective counts over every group this rank used.
  CommStats stats() const;
  void reset_stats();

  // Copies this rank's block of a full (global) tensor.
  void slice_local(const Shape& global, const Sharding& s, const float* full, float* local) const;
  // Reassembles the full tensor on every rank from the local blocks
  // (collective over the world). Of the ranks holding one block, the one at
  // coordinate 0 of each unsplit axis writes it — at `holder_coord` instead
  // on `holder_axis` (a pipeline stage that is not the first); ranks that
  // hold no block pass local = nullptr.
  void gather_full(const Shape& global, const Sharding& s, const float* local, float* full,
                   std::optional<int> holder_axis = std::nullopt, int holder_coord = 0);
  // gather_full's local part: writes this rank's block into `full` if this
  // rank is the block's writer (no communication; `full` is not cleared).
  // A world sum of zeroed buffers so filled assembles the tensors.
  void place_primary(const Shape& global, const Sharding& s, const float* local, float* full,
                     std::optional<int> holder_axis = std::nullopt, int holder_coord = 0) const;
  // Every rank's `value`, in rank order, on every rank (collective; exact
  // for 0 <= value < 2^48, e.g. byte counts).
  std::vector<int64_t> gather_counts(int64_t value);

 private:
  Mesh mesh_;
  Layout layout_;
  int rank_ = 0;
  std::vector<int> coords_;
  bool staged_ = false;
  std::vector<std::unique_ptr<Communicator>> axis_comms_;  // staged ones, then plain ones
  std::unique_ptr<Communicator> world_;
  CommGroups groups_, host_groups_;
};

}  // namespace tessel
