// The op profiler's dispatch layer and tables. See Note [Op profiler].
#include "qflow/core/op_profiler.h"

#include <algorithm>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "qflow/core/dispatch.h"
#include "qflow/core/error.h"
#include "qflow/core/op_registry.h"

namespace qflow {

using Clock = std::chrono::steady_clock;

struct OpProfiler::State {
  Clock::time_point start = Clock::now();
  std::map<std::string, OpProfileRow, std::less<>> rows;
  std::optional<IncludeKeyGuard> include;
};

namespace {

struct Frame {
  Clock::time_point start;
  double child_us = 0;
};

thread_local OpProfiler::State* active = nullptr;
thread_local std::vector<Frame> frames;

class ProfilerLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "op profiler"; }
  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    OpProfiler::State* state = active;
    if (state == nullptr) return Dispatcher::redispatch(op, args, remaining);  // another thread's profiler
    frames.push_back({Clock::now()});
    struct Record {  // also when the op throws: its time was spent
      OpProfiler::State* state;
      const OpDef& op;
      ~Record() {
        const Frame f = frames.back();
        frames.pop_back();
        const double us = std::chrono::duration<double, std::micro>(Clock::now() - f.start).count();
        if (!frames.empty()) frames.back().child_us += us;
        OpProfileRow& row = state->rows[op.name];
        if (row.op.empty()) row.op = op.name;
        ++row.calls;
        row.total_us += us;
        row.self_us += us - f.child_us;
      }
    } record{state, op};
    return Dispatcher::redispatch(op, args, remaining);
  }
};

void register_layer_once() {
  static const bool registered = [] {
    Dispatcher::register_layer(kProfileKey, std::make_shared<ProfilerLayer>());
    return true;
  }();
  (void)registered;
}

}  // namespace

OpProfiler::OpProfiler() : state_(std::make_unique<State>()) {
  register_layer_once();
  QFLOW_CHECK(active == nullptr, "OpProfiler: this thread is already being profiled (one OpProfiler per thread)");
  active = state_.get();
  state_->include.emplace(kProfileKey);
  state_->start = Clock::now();
}

OpProfiler::~OpProfiler() {
  state_->include.reset();
  active = nullptr;
}

std::vector<OpProfileRow> OpProfiler::rows() const {
  std::vector<OpProfileRow> out;
  for (const auto& [name, row] : state_->rows) out.push_back(row);
  std::sort(out.begin(), out.end(), [](const OpProfileRow& a, const OpProfileRow& b) { return a.self_us > b.self_us; });
  return out;
}

double OpProfiler::wall_seconds() const { return std::chrono::duration<double>(Clock::now() - state_->start).count(); }

std::string OpProfiler::table(size_t top) const {
  const std::vector<OpProfileRow> all = rows();
  double self_sum = 0;
  int64_t calls = 0;
  for (const OpProfileRow& r : all) self_sum += r.self_us, calls += r.calls;
  std::string s = fmt::format("{:<32} {:>7} {:>10} {:>10} {:>9} {:>6}\n", "op", "calls", "total ms", "self ms",
                              "us/call", "share");
  for (size_t i = 0; i < std::min(top, all.size()); ++i) {
    const OpProfileRow& r = all[i];
    s += fmt::format("{:<32} {:>7} {:>10.3f} {:>10.3f} {:>9.1f} {:>5.1f}%\n", r.op, r.calls, r.total_us / 1e3,
                     r.self_us / 1e3, r.self_us / static_cast<double>(r.calls), self_sum > 0 ? 100 * r.self_us / self_sum : 0);
  }
  if (all.size() > top) s += fmt::format("({} more ops)\n", all.size() - top);
  s += fmt::format("{} calls of {} ops: {:.3f} ms in the ops of {:.3f} ms wall\n", calls, all.size(), self_sum / 1e3,
                   wall_seconds() * 1e3);
  return s;
}

}  // namespace qflow
