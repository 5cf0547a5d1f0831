// CompareSession: the three runs of Note [Numeric debugger] (compare.h).
#include "qflow/quant/compare.h"

#include <set>
#include <unordered_map>

#include "compare_match.h"
#include "compare_stats.h"
#include "compare_weights.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/fx/interpreter.h"
#include "qflow/quant/calibrate.h"

namespace qflow::quant {
namespace {

using detail::ErrorSums;
using ValueMap = std::unordered_map<const fx::Node*, Stack>;

// A node's floating-point output tensors, in order (integer outputs such as indices or a
// requantized activation are not compared).
TensorList floating_outputs(const Stack& out) {
  TensorList ts;
  const auto keep = [&](const Tensor& t) {
    if (t.defined() && t.is_floating_point()) ts.push_back(t);
  };
  for (const Value& v : out) {
    if (v.is_tensor()) keep(v.tensor());
    else if (v.is_tensor_list())
      for (const Tensor& t : v.tensor_list()) keep(t);
  }
  return ts;
}

bool has_tensor(const Stack& out) {
  for (const Value& v : out)
    if (v.is_tensor() || v.is_tensor_list()) return true;
  return false;
}

// A copy of a node's outputs: the float values must stay as computed while later nodes (or
// the lockstep run, fed with them) may write their inputs in place.
Stack copy_of(const Stack& out) {
  Stack copy;
  for (const Value& v : out) {
    if (v.is_tensor()) {
      copy.emplace_back(v.tensor().defined() ? v.tensor().clone() : Tensor());
    } else if (v.is_tensor_list()) {
      TensorList list;
      for (const Tensor& t : v.tensor_list()) list.push_back(t.defined() ? t.clone() : Tensor());
      copy.emplace_back(std::move(list));
    } else {
      copy.push_back(v);
    }
  }
  return copy;
}

// A node's value as an argument (fx::Interpreter's rule): its single output, or the list of
// its outputs.
Value as_argument(const Stack& out) {
  if (out.size() == 1) return out[0];
  TensorList list;
  for (const Value& v : out) list.push_back(v.tensor());
  return Value(std::move(list));
}

// The float run: keeps a copy of the outputs of every node in `wanted`.
class FloatRecorder : public fx::Interpreter {
 public:
  FloatRecorder(fx::GraphModule& gm, const std::set<const fx::Node*>& wanted, ValueMap& values)
      : Interpreter(gm), wanted_(wanted), values_(values) {}

 protected:
  Stack run_node(fx::Node& n) override {
    Stack out = Interpreter::run_node(n);
    if (wanted_.count(&n)) values_[&n] = copy_of(out);
    return out;
  }

 private:
  const std::set<const fx::Node*>& wanted_;
  ValueMap& values_;
};

}  // namespace

namespace detail {

struct CompareState {
  CompareState(fx::GraphModule& f, fx::GraphModule& q)
      : float_model(f), quantized(q), float_modes(f), quantized_modes(q), matching(detail::match_nodes(f, q)) {
    float_model.eval();
    quantized.eval();
    for (const auto& [qn, fn] : matching.reference) wanted.insert(fn);
    rows.insert(matching.rows.begin(), matching.rows.end());
  }

  // Adds the outputs of quantized row `q` against its reference to `sums`; a row whose
  // quantized outputs are integers is skipped instead (noted once).
  void accumulate(const fx::Node& q, const Stack& quantized_out, ErrorSums& sums) {
    const fx::Node& ref = *matching.reference.at(&q);
    const TensorList want = floating_outputs(float_values.at(&ref)), got = floating_outputs(quantized_out);
    if (want.size() != got.size()) {
      not_compared.emplace(&q, fmt::format("%{}: its quantized outputs are not floats ({} of {} are), not compared",
                                           q.name(), got.size(), want.size()));
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      QFLOW_CHECK(want[i].sizes() == got[i].sizes(),
                  "quant::compare: %{} outputs [{}] in the quantized model but its float reference %{} outputs [{}]; "
                  "the quantized model was not made from this float model",
                  q.name(), fmt::join(got[i].sizes(), ", "), ref.name(), fmt::join(want[i].sizes(), ", "));
      sums.add(want[i], got[i]);
    }
  }

  fx::GraphModule& float_model;
  fx::GraphModule& quantized;
  ModeGuard float_modes, quantized_modes;
  detail::NodeMatching matching;
  std::set<const fx::Node*> wanted;  // float nodes some quantized node is compared with
  std::set<const fx::Node*> rows;    // matching.rows, for lookups
  ValueMap float_values;             // this batch's
  std::unordered_map<const fx::Node*, ErrorSums> end_to_end, local;
  std::unordered_map<const fx::Node*, std::string> not_compared;
  int64_t batches = 0;
};

}  // namespace detail

namespace {

using State = detail::CompareState;

// The quantized run: each row's outputs against its float reference, end to end.
class QuantizedRun : public fx::Interpreter {
 public:
  QuantizedRun(State& s) : Interpreter(s.quantized), s_(s) {}

 protected:
  Stack run_node(fx::Node& n) override {
    Stack out = Interpreter::run_node(n);
    if (is_row(n)) s_.accumulate(n, out, s_.end_to_end[&n]);
    return out;
  }
  bool is_row(const fx::Node& n) const { return s_.rows.count(&n) != 0; }

  State& s_;
};

// The lockstep run: every node fed the float references of its inputs, so its error is its own.
class LockstepRun : public QuantizedRun {
 public:
  using QuantizedRun::QuantizedRun;

 protected:
  Stack run_node(fx::Node& n) override {
    Stack out = Interpreter::run_node(n);
    if (is_row(n)) s_.accumulate(n, out, s_.local[&n]);
    return out;
  }
  Stack call_function(fx::Node& n, const Stack& args, const fx::ValueKwargs& kw) override {
    return Interpreter::call_function(n, fed(n, args), kw);
  }
  Stack call_method(fx::Node& n, const Stack& args, const fx::ValueKwargs& kw) override {
    return Interpreter::call_method(n, fed(n, args), kw);
  }
  Stack call_module(fx::Node& n, const Stack& args, const fx::ValueKwargs& kw) override {
    return Interpreter::call_module(n, fed(n, args), kw);
  }

 private:
  // A copy of the float reference of quantized node `in`, or nothing when it has none.
  std::optional<Value> reference_value(const fx::Node* in) const {
    const auto it = s_.matching.reference.find(in);
    if (it == s_.matching.reference.end()) return std::nullopt;
    const Stack& ref = s_.float_values.at(it->second);
    if (!has_tensor(ref)) return std::nullopt;  // sizes and other plain values: the run's own
    return as_argument(copy_of(ref));
  }

  Stack fed(const fx::Node& n, const Stack& args) const {
    Stack out = args;
    for (size_t i = 0; i < n.args().size(); ++i) {
      const fx::Argument& a = n.args()[i];
      if (a.is_node()) {
        if (auto v = reference_value(a.node())) out[i] = std::move(*v);
      } else if (a.is_node_list()) {
        TensorList list;
        for (const fx::Node* in : a.node_list()) {
          auto v = reference_value(in);
          if (!v || !v->is_tensor()) return out;  // a list with no complete reference: as run
          list.push_back(v->tensor());
        }
        out[i] = Value(std::move(list));
      }
    }
    return out;
  }
};

}  // namespace

CompareSession::CompareSession(fx::GraphModule& float_model, fx::GraphModule& quantized_model)
    : state_(std::make_unique<State>(float_model, quantized_model)) {}

CompareSession::~CompareSession() = default;

int64_t CompareSession::batches() const { return state_->batches; }

void CompareSession::observe(const TensorList& inputs) {
  State& s = *state_;
  NoGradGuard no_grad;
  s.float_values.clear();
  FloatRecorder(s.float_model, s.wanted, s.float_values).run(inputs);
  QuantizedRun(s).run(inputs);
  LockstepRun(s).run(inputs);
  s.float_values.clear();
  ++s.batches;
}

Comparison CompareSession::report() const {
  const State& s = *state_;
  QFLOW_CHECK(s.batches > 0, "quant::compare: no batch ran (the data is empty, or batches is 0)");
  Comparison c;
  c.batches = s.batches;
  c.skipped = s.matching.skipped;
  for (const fx::Node* q : s.matching.rows) {
    if (const auto it = s.not_compared.find(q); it != s.not_compared.end()) {
      c.skipped.push_back(it->second);
      continue;
    }
    const auto e = s.end_to_end.find(q);
    if (e == s.end_to_end.end() || e->second.elements == 0) continue;  // no tensor output (size, ...)
    const fx::Node& ref = *s.matching.reference.at(q);
    NodeComparison row{.node = q->name(),
                       .reference = ref.name(),
                       .what = detail::node_what(s.quantized, *q),
                       .elements = e->second.elements,
                       .sqnr_db = e->second.sqnr_db(),
                       .cosine = e->second.cosine(),
                       .max_abs_error = e->second.max_abs_error,
                       .local_sqnr_db = s.local.at(q).sqnr_db(),
                       .weight_sqnr_db = std::nullopt};
    if (q->op() == fx::NodeOp::CallModule) {
      Tensor w;
      try {
        w = detail::quantized_weight(*s.quantized.get_submodule(q->target()));
      } catch (const Error& e) {
        QFLOW_FAIL("quant::compare: %{} ({}): its quantized weight: {}", q->name(), row.what, e.message());
      }
      if (w.defined()) {
        const fx::Node& f = *s.float_model.graph().find_node(q->name());
        ErrorSums weight;
        weight.add(detail::reference_weight(s.float_model, f, ref), w);
        row.weight_sqnr_db = weight.sqnr_db();
      }
    }
    c.nodes.push_back(std::move(row));
  }
  return c;
}

}  // namespace qflow::quant
