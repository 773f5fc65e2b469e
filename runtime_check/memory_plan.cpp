#include "memory_plan.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "step_list.h"

namespace dwdeconv::runtime_check::detail {
namespace {

size_t aligned(size_t floats) { return (floats + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

bool overlap(const ArenaValue& a, const ArenaValue& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

size_t plan_arena(std::vector<ArenaValue>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (values[a].size != values[b].size) return values[a].size > values[b].size;
    return values[a].first < values[b].first;
  });
  size_t arena = 0;
  std::vector<size_t> placed;  // indices, by offset
  std::vector<size_t> live;    // the placed values alive at the same time as the one being placed, by offset
  for (size_t index : order) {
    ArenaValue& value = values[index];
    const size_t size = aligned(value.size);
    live.clear();
    for (size_t other : placed) {
      if (overlap(values[other], value)) live.push_back(other);
    }
    // The first gap between live values (in offset order) that fits, else after the last of them.
    size_t offset = 0;
    for (size_t other : live) {
      if (values[other].offset >= offset + size) break;
      offset = std::max(offset, values[other].offset + aligned(values[other].size));
    }
    value.offset = offset;
    arena = std::max(arena, offset + size);
    placed.insert(
        std::upper_bound(placed.begin(), placed.end(), index, [&](size_t a, size_t b) { return values[a].offset < values[b].offset; }),
        index);
  }
  return arena;
}

namespace {

// The steps a value or a conversion is alive over; unused while first > last.
struct Span {
  size_t first = std::numeric_limits<size_t>::max();
  size_t last = 0;
  void add(size_t step) {
    first = std::min(first, step);
    last = std::max(last, step);
  }
  bool used() const { return first <= last; }
};

}  // namespace

void place_in_arena(StepList& list) {
  Values& v = list.values;
  const size_t slots = v.slots.size();
  const size_t end = list.steps.size();  // run() reads the graph outputs after the last step
  std::vector<bool> outside(slots, false);
  for (size_t id = 0; id < slots; ++id) outside[id] = v.slots[id].constant || !v.slots[id].t.is_float();
  for (const auto& input : list.inputs) outside[static_cast<size_t>(input.second)] = true;

  // Lifetimes: each value as stored, and its conversion to the other layout.
  std::vector<Span> stored(slots), converted(slots);
  std::vector<Access> accesses;
  for (size_t k = 0; k < list.steps.size(); ++k) {
    accesses.clear();
    list.steps[k]->accesses(v, accesses);
    for (const Access& a : accesses) {
      const auto id = static_cast<size_t>(a.id);
      if (outside[id]) continue;
      stored[id].add(k);  // a conversion reads the stored value too
      if (!a.write && layout_applies(v.slots[id].t) && v.layout(a.id) != a.layout) converted[id].add(k);
    }
  }
  for (const auto& output : list.outputs) {
    const auto id = static_cast<size_t>(output.second);
    if (outside[id]) continue;
    stored[id].add(end);
    if (layout_applies(v.slots[id].t) && v.layout(output.second) != Layout::kNchw) converted[id].add(end);
  }

  // Place them, then free what creation held before allocating the arena, so the two are never held at once. The
  // graph outputs' values are moved aside and copied into the arena: they are what the creation run computed.
  std::vector<ArenaValue> placed;
  std::vector<std::pair<size_t, bool>> owner;  // (slot, is the conversion) per placed value
  std::vector<bool> is_output(slots, false);
  for (const auto& output : list.outputs) is_output[static_cast<size_t>(output.second)] = true;
  std::vector<std::pair<size_t, std::vector<float>>> kept;  // (slot, its stored elements) per graph output
  MemoryPlan& memory = list.memory;
  memory = MemoryPlan{};
  for (size_t id = 0; id < slots; ++id) {
    if (outside[id]) continue;
    Slot& s = v.slots[id];
    const auto size = static_cast<size_t>(s.t.numel());
    if (stored[id].used() && size > 0) {
      placed.push_back(ArenaValue{stored[id].first, stored[id].last, size, 0});
      owner.emplace_back(id, false);
      memory.value_bytes += size * sizeof(float);
    }
    if (converted[id].used() && size > 0) {
      placed.push_back(ArenaValue{converted[id].first, converted[id].last, size, 0});
      owner.emplace_back(id, true);
      memory.conversion_bytes += size * sizeof(float);
    }
    if (is_output[id] && size > 0) {
      kept.emplace_back(id, s.t.f.take_owned());
    } else {
      s.t.f.release();
    }
    s.converted.f.release();
    s.converted_version = ~uint64_t{0};
  }
  v.reuse_spare = false;
  std::vector<std::vector<float>>().swap(v.spare);
  const size_t arena = plan_arena(placed);
  // XNNPACK kernels may read a few bytes past an input's end (XNN_EXTRA_BYTES): keep them inside the arena. Filling
  // the arena touches its pages now, so no run faults in fresh ones.
  list.arena.assign(arena + kArenaAlignment, 0.0f);
  for (size_t k = 0; k < placed.size(); ++k) {
    Slot& s = v.slots[owner[k].first];
    Tensor& t = owner[k].second ? s.converted : s.t;
    t.f.view(list.arena.data() + placed[k].offset, placed[k].size);
  }
  for (auto& [id, elements] : kept) {
    Tensor& t = v.slots[id].t;
    std::copy_n(elements.begin(), std::min(elements.size(), t.f.size()), t.f.begin());
    std::vector<float>().swap(elements);
  }
  memory.arena_bytes = list.arena.size() * sizeof(float);
  memory.values = placed.size();
  memory.constant_bytes = held_constant_bytes(list);
}

size_t held_constant_bytes(const StepList& list) {
  size_t bytes = 0;
  for (const Slot& s : list.values.slots) {
    if (s.constant && s.t.is_float()) bytes += s.t.f.size() * sizeof(float);
  }
  return bytes;
}

}  // namespace dwdeconv::runtime_check::detail
