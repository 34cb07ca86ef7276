// Placements and shardings (n-D SBP).
//
// On one mesh axis a value is Split along a named dim (each rank holds one
// contiguous slice of it, in coordinate order), Broadcast (every rank holds
// all of it) or Partial (every rank holds a full-shaped addend; the value is
// their sum, or max). A Sharding is one placement per mesh axis. Both are
// small immutable values printed as `S(heads)`, `B`, `P(sum)`, `[S(batch), B]`.
//
// A dim split on several axes is nested in mesh-axis order: the first axis
// cuts it, the next cuts each piece, and so on ([S(heads), S(heads)] on
// model=2, ctx=2: model rank m holds heads [m H/2, (m+1) H/2), and ctx rank c
// the c-th half of that). Layouts split a dim on one axis; nesting comes only
// from an op that needs a dim already split cut further (context_parallel.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/base/shape.h"
#include "tessel/sharding/mesh.h"

namespace tessel {

struct Placement {
  enum Kind { kSplit, kBroadcast, kPartialSum, kPartialMax };
  Kind kind = kBroadcast;
  std::string dim;  // kSplit only

  static Placement split(std::string dim) { return {kSplit, std::move(dim)}; }
  static Placement broadcast() { return {kBroadcast, ""}; }
  static Placement partial_sum() { return {kPartialSum, ""}; }
  static Placement partial_max() { return {kPartialMax, ""}; }

  bool is_split() const { return kind == kSplit; }
  bool is_partial() const { return kind == kPartialSum || kind == kPartialMax; }
  bool operator==(const Placement&) const = default;
  std::string to_string() const;
};

class Sharding {
 public:
  Sharding() = default;
  explicit Sharding(std::vector<Placement> per_axis) : per_axis_(std::move(per_axis)) {}
  static Sharding replicated(int axes) { return Sharding(std::vector<Placement>(axes)); }

  const std::vector<Placement>& placements() const { return per_axis_; }
  const Placement& operator[](int axis) const { return per_axis_.at(axis); }
  int axis_count() const { return static_cast<int>(per_axis_.size()); }
  Sharding with(int axis, Placement p) const;
  // The first axis `dim` is split over, or -1.
  int axis_of(const std::string& dim) const;
  // Whether `dim` is split on an axis after `axis` (inside its split there).
  bool split_after(const std::string& dim, int axis) const;
  bool operator==(const Sharding&) const = default;
  std::string to_string() const;

  // This rank's local shape: every split dim divided by its axes' sizes.
  // Throws (naming dim, axis and sizes) when an axis size does not divide
  // what it cuts.
  Shape local_shape(const Shape& global, const Mesh& mesh) const;
  // local_shape(global, mesh).numel() without building the shape (each split
  // axis's size divides the elements); throws where local_shape throws.
  int64_t local_numel(const Shape& global, const Mesh& mesh) const;
  // Offset of this rank's slice along each dim of `global` (0 where not split).
  std::vector<int64_t> local_offsets(const Shape& global, const Mesh& mesh,
                                     const std::vector<int>& coords) const;

 private:
  std::vector<Placement> per_axis_;
};

}  // namespace tessel
