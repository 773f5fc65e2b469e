// The executor's memory plan: every activation lives in one arena, at an offset shared with values whose
// lifetimes do not overlap. Not part of the library's API (executor.h is).
//
// The scale of XNNPACK's own runtime planner (src/xnnpack/memory-planner.h: first node, last node, size and offset
// per value, one number for the arena), placed as TFLite's ArenaPlanner places tensors (simple_memory_arena.cc):
// largest first, each at the lowest offset that no value alive at the same time overlaps.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime_check/executor.h"

namespace dwdeconv::runtime_check::detail {

// Offsets and sizes are in floats; every offset is a multiple of kArenaAlignment (64 bytes, a cache line).
inline constexpr size_t kArenaAlignment = 16;

// One value to place: alive from step `first` to step `last`, both included (a step never writes over a value it
// reads, so a value that ends at step k and one that starts at step k get different memory).
struct ArenaValue {
  size_t first = 0;
  size_t last = 0;
  size_t size = 0;    // floats
  size_t offset = 0;  // set by plan_arena()
};

// Sets every value's offset and returns the arena size in floats (at least the largest value, at most their sum,
// each rounded up to kArenaAlignment). Deterministic: ties are broken by first step, then by index.
size_t plan_arena(std::vector<ArenaValue>& values);

struct StepList;

// Places the activations of a built step list in one arena, allocated (and its pages touched) here once: every float
// value a step writes, and each layout conversion of one, alive from the first step that touches it to the last
// that reads it. Graph outputs stay alive to the end (run() copies them out) and keep the values the creation run
// computed (Executor::last_outputs()). Graph inputs, constants and integer
// values keep their own storage. Fills list.memory.
void place_in_arena(StepList& list);

// The bytes of the float constants `list` holds (MemoryPlan::constant_bytes).
size_t held_constant_bytes(const StepList& list);

}  // namespace dwdeconv::runtime_check::detail
