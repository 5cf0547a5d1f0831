// The autograd dispatch layer: runs the op below, then records a backward node.
#include "anomaly_check.h"
#include "qflow/autograd/anomaly_mode.h"
#include "qflow/autograd/autograd_meta.h"
#include "qflow/autograd/derivatives.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/ops.h"
#include "saved_tensor.h"

namespace qflow::autograd {

/// The node of one recorded op call; its behaviour is the op's DerivativeRule.
class OpBackward final : public Node {
 public:
  OpBackward(const DerivativeRule& rule, BackwardContext ctx) : rule_(rule), ctx_(std::move(ctx)) {}

  std::string name() const override { return rule_.node_name; }
  size_t num_outputs() const override { return ctx_.output_meta_.size(); }
  TensorMeta output_meta(size_t i) const override { return ctx_.output_meta_.at(i); }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    TensorList g = rule_.backward(ctx_, grads);
    QFLOW_ASSERT(g.size() == ctx_.input_meta_.size(), "{} returned {} gradients for {} inputs", name(), g.size(),
                 ctx_.input_meta_.size());
    for (size_t i = 0; i < g.size(); ++i) {
      if (!g[i].defined() || !ctx_.needs_grad_[i]) {
        g[i] = Tensor();
        continue;
      }
      const TensorMeta& m = ctx_.input_meta_[i];
      if (g[i].sizes() != m.sizes) g[i] = sum_to(g[i], m.sizes);  // undo broadcasting
      QFLOW_ASSERT(g[i].sizes() == m.sizes, "{}: gradient of shape {} for input {} of shape {}", name(), g[i].sizes(), i, m.sizes);
      if (g[i].dtype() != m.dtype) g[i] = g[i].to(m.dtype);
    }
    return g;
  }

  void release_saved() override {
    for (auto& s : ctx_.saved_inputs_)
      if (s) s->release();
    for (auto& s : ctx_.saved_outputs_)
      if (s) s->release();
    ctx_.unpacked_inputs_.assign(ctx_.unpacked_inputs_.size(), Tensor());
    ctx_.unpacked_outputs_.assign(ctx_.unpacked_outputs_.size(), Tensor());
  }

 private:
  const DerivativeRule& rule_;
  BackwardContext ctx_;
};

namespace {

// A None passed for a "Tensor?" argument keeps its slot as an undefined tensor, so a rule's
// flat numbering does not depend on which optional tensors the caller happened to give.
size_t flat_count(const OpSchema& schema, const Stack& args, size_t i) {
  const Value& v = args[i];
  if (v.is_tensor()) return 1;
  if (v.is_tensor_list()) return v.tensor_list().size();
  return v.is_none() && i < schema.args.size() && schema.args[i].type == ArgType::Tensor ? 1 : 0;
}

void flat_tensors(const OpSchema& schema, const Stack& args, TensorList& out) {
  for (size_t i = 0; i < args.size(); ++i) {
    const Value& v = args[i];
    if (v.is_tensor()) out.push_back(v.tensor());
    else if (v.is_tensor_list()) out.insert(out.end(), v.tensor_list().begin(), v.tensor_list().end());
    else if (flat_count(schema, args, i) == 1) out.push_back(Tensor());
  }
}

bool needs_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

}  // namespace

class AutogradLayer final : public DispatchLayer {
 public:
  std::string_view name() const override { return "autograd"; }

  Stack handle(const OpDef& op, Stack& args, DispatchKeySet remaining) override {
    TensorList inputs;
    flat_tensors(op.schema, args, inputs);
    bool any = false;
    for (const Tensor& t : inputs) any = any || needs_grad(t);
    if (!any) return Dispatcher::redispatch(op, args, remaining);
    const DerivativeRule* rule = DerivativeRegistry::instance().find(op.name);
    // An in-place op is differentiated through its twin unless it is declared itself.
    if (auto m = op.schema.mutated_arg(); m && rule == nullptr) return handle_inplace(op, args, *m);

    QFLOW_CHECK(rule != nullptr, "{}: the derivative of this op is not implemented (it has no derivative rule and is not "
                "declared non-differentiable), so it cannot be used on tensors that require grad (wrap the call in "
                "NoGradGuard or detach() the inputs)", op.name);
    QFLOW_CHECK(rule->kind != Differentiability::NoDerivative, "{}: has no derivative ({}), so it cannot be used on "
                "tensors that require grad (wrap the call in NoGradGuard or detach() the inputs)", op.name, rule->reason);
    Stack outputs = Dispatcher::redispatch(op, args, remaining);
    if (is_anomaly_enabled()) detail::check_forward_outputs(op.name, inputs, outputs);
    if (!rule->differentiable()) return outputs;
    record(*rule, args, inputs, outputs);
    return outputs;
  }

 private:
  static void record(const DerivativeRule& rule, const Stack& args, const TensorList& inputs, Stack& outputs) {
    const detail::RuleSignature& signature = rule.resolved();
    BackwardContext ctx;
    ctx.op_ = rule.node_name;
    ctx.signature_ = &signature;
    ctx.args_.reserve(args.size());
    for (const Value& v : args) ctx.args_.push_back(v.is_tensor() || v.is_tensor_list() ? Value() : v);
    // Each argument's flat inputs are saved when its slot says so (Note [Derivatives read
    // arguments by name]); the first flat input of every argument is kept only when a
    // Tensor[] makes it depend on the call.
    const bool lists = signature.has_tensor_list();
    if (lists) ctx.first_input_.reserve(args.size() + 1);
    auto node_edges = std::vector<Edge>();
    size_t i = 0;
    for (size_t a = 0; a < args.size(); ++a) {
      if (lists) ctx.first_input_.push_back(static_cast<uint32_t>(i));
      const bool saved = a < signature.slots().size() && signature.slots()[a].saved;
      for (const size_t end = i + flat_count(signature.schema(), args, a); i < end; ++i) {
        const Tensor& t = inputs[i];
        ctx.input_meta_.push_back(t.defined() ? TensorMeta{t.sizes(), t.dtype(), t.device()} : TensorMeta{});
        ctx.needs_grad_.push_back(needs_grad(t));
        node_edges.push_back(needs_grad(t) ? gradient_edge(t) : Edge{});
        ctx.saved_inputs_.push_back(saved && t.defined() ? std::make_shared<SavedTensor>(t, false) : nullptr);
      }
    }
    if (lists) ctx.first_input_.push_back(static_cast<uint32_t>(i));
    QFLOW_ASSERT(i == inputs.size(), "{}: {} flat inputs counted for {} tensors", rule.op, i, inputs.size());
    ctx.unpacked_inputs_.resize(inputs.size());

    // An op may return one of its inputs unchanged (contiguous() of a contiguous tensor);
    // give such an output its own impl so its history does not overwrite the input's.
    for (Value& v : outputs) {
      if (!v.is_tensor() || !v.tensor().defined()) continue;
      for (const Tensor& in : inputs) {
        if (v.tensor().is_same(in)) {
          const Tensor& t = v.tensor();
          auto alias = t.impl()->alias();
          alias->set_is_view(true);
          v = Value(Tensor(std::move(alias)));
          break;
        }
      }
    }
    for (const Value& v : outputs) {
      if (v.is_tensor() && v.tensor().defined()) ctx.output_meta_.push_back({v.tensor().sizes(), v.tensor().dtype(), v.tensor().device()});
      else ctx.output_meta_.push_back({});
    }
    if (rule.save_outputs) {
      for (const Value& v : outputs)
        ctx.saved_outputs_.push_back(v.is_tensor() ? std::make_shared<SavedTensor>(v.tensor(), true) : nullptr);
      ctx.unpacked_outputs_.resize(outputs.size());
    }
    auto node = std::make_shared<OpBackward>(rule, std::move(ctx));
    node->mutable_next_edges() = std::move(node_edges);
    for (size_t i = 0; i < outputs.size(); ++i) {
      const Value& v = outputs[i];
      if (v.is_tensor() && v.tensor().defined() && is_floating(v.tensor().dtype()))
        set_history(v.tensor(), node, static_cast<uint32_t>(i));
    }
  }

  // Note [In-place ops under autograd]
  // `self.op_(args)` with history is computed as its out-of-place twin on a copy of self,
  // recorded as usual, and the result written back into self's storage; self then takes the
  // twin's history. The copy keeps the values backward needs safe from the write, so
  // in-place ops never corrupt saved tensors. (Leaves that require grad and views of
  // tensors with history are refused.)
  static Stack handle_inplace(const OpDef& op, Stack& args, size_t m) {
    Tensor self = args[m].tensor();
    AutogradMeta* meta = meta_of(self);
    QFLOW_CHECK(!(meta && meta->requires_grad && !meta->grad_fn),
                "{}: a leaf tensor that requires grad is being used in an in-place operation (use it under NoGradGuard, "
                "or clone() it first)", op.name);
    QFLOW_CHECK(!self.impl()->is_view(),
                "{}: in-place operation on a view while autograd is recording is not supported; apply it to the base "
                "tensor or to a clone()", op.name);
    Tensor result;
    const std::string_view base = op.schema.name;
    const std::string twin_name = inplace_twin(op.schema);
    if (base == "copy_") {
      const Tensor& src = OpArgs(op.schema, args).tensor("src");
      result = expand(src.to(self.dtype()), SymIntList(self.sizes().begin(), self.sizes().end()));
    } else if (twin_name.empty()) {  // fill_, zero_: the result does not depend on self
      result = Tensor();
    } else {
      const OpDef* twin = OpRegistry::instance().find(twin_name);
      QFLOW_CHECK(twin != nullptr, "{}: no out-of-place twin '{}' to differentiate this in-place op", op.name, twin_name);
      Stack twin_args = args;
      twin_args[m] = Value(self.requires_grad() ? self.clone() : self.detach().clone());
      result = Dispatcher::call(*twin, std::move(twin_args)).at(0).tensor();
    }
    {
      NoGradGuard no_grad;
      if (result.defined()) copy_(self, result.detach());
      else Dispatcher::call(op, args);
    }
    if (result.defined() && result.requires_grad()) {
      AutogradMeta* rm = meta_of(result);
      set_history(self, rm->grad_fn, rm->output_nr);
    } else if (meta) {
      meta->grad_fn.reset();
      meta->requires_grad = false;
      self.impl()->remove_key(kAutogradKey);
    }
    return Stack{Value(self)};
  }
};

std::string inplace_twin(const OpSchema& schema) {
  const std::string_view base = schema.name;
  if (base == "copy_" || base == "fill_" || base == "zero_") return "";
  std::string twin(base.substr(0, base.size() - 1));
  if (!schema.overload.empty()) twin += "." + schema.overload;
  return twin;
}

namespace {
struct RegisterAutogradLayer {
  RegisterAutogradLayer() { Dispatcher::register_layer(kAutogradKey, std::make_shared<AutogradLayer>()); }
} g_register_autograd_layer;
}  // namespace

}  // namespace qflow::autograd
