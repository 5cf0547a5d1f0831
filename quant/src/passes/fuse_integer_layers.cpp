// fuse_integer_layers: the deploy model's fusions for its integer kernels. See passes.h and
// Note [Integer activations] in deploy.h.
#include <algorithm>
#include <unordered_map>

#include "qflow/fx/pattern.h"
#include "qflow/quant/deploy.h"
#include "qflow/quant/passes.h"

namespace qflow::quant {
namespace {

// How many nodes call the submodule at `path`.
size_t calls_of(const fx::GraphModule& gm, const std::string& path) {
  return static_cast<size_t>(std::count_if(gm.graph().begin(), gm.graph().end(), [&path](const fx::Node* n) {
    return n->op() == fx::NodeOp::CallModule && n->target() == path;
  }));
}

// The DConv2d a node runs in integers, called from this node only (so what the pass changes in
// it concerns this call alone); null otherwise.
std::shared_ptr<DConv2d> sole_integer_conv(const fx::GraphModule& gm, const fx::Node& n) {
  if (n.op() != fx::NodeOp::CallModule) return nullptr;
  auto conv = std::dynamic_pointer_cast<DConv2d>(gm.get_submodule(n.target()));
  if (!conv || !conv->runs_integer() || calls_of(gm, n.target()) != 1) return nullptr;
  return conv;
}

// x + y or add_relu(x, y) of two tensors, alpha 1: a residual connection.
bool is_residual_add(const fx::Node& n) {
  if (n.op() != fx::NodeOp::CallFunction || (n.target() != "add" && n.target() != "add_relu")) return false;
  const fx::Argument *self = n.arg("self"), *other = n.arg("other");
  if (self == nullptr || self->node() == nullptr || other == nullptr || other->node() == nullptr) return false;
  const fx::Argument* alpha = n.target() == "add" ? n.arg("alpha") : nullptr;  // add_relu has none
  return alpha == nullptr || (!alpha->is_node() && alpha->to_double() == 1.0);
}

// conv → add(conv, r) [→ ReLU]: the conv adds r (and applies the ReLU) as post-ops.
bool fuse_residual(fx::GraphModule& gm, fx::Node* n) {
  const auto conv = sole_integer_conv(gm, *n);
  if (!conv || conv->applies_relu() || n->args().size() != 1 || !n->kwargs().empty() || n->users().size() != 1)
    return false;
  fx::Node* add = *n->users().begin();
  if (!is_residual_add(*add)) return false;
  fx::Node* a = add->arg("self")->node();
  fx::Node* b = add->arg("other")->node();
  if (a == b) return false;
  fx::Node* residual = a == n ? b : a;
  if (add->target() == "add_relu") gm.add_submodule(n->target(), conv->fused_with_relu());
  n->set_args({n->args()[0], fx::Argument(residual)});
  gm.graph().move_before(n, add);  // the residual may be computed after the conv
  n->meta().outputs = add->meta().outputs;
  add->replace_all_uses_with(n);
  gm.graph().erase_node(add);
  return true;
}

// Whether node `r` computes a new tensor of its own: a DConv2d (its output is fresh, or the dead
// residual it summed into), or an out-of-place add or ReLU. Views, in-place ops, inputs and
// attributes may share their bytes with values still alive.
bool makes_fresh_tensor(const fx::GraphModule& gm, const fx::Node& r) {
  if (r.op() == fx::NodeOp::CallModule) return std::dynamic_pointer_cast<DConv2d>(gm.get_submodule(r.target())) != nullptr;
  return r.op() == fx::NodeOp::CallFunction &&
         (r.target() == "add" || r.target() == "add_relu" || r.target() == "relu");
}

// A conv with a residual post-op (after fuse_residual) sums into the residual itself when the
// residual is a fresh tensor that no node reads after the conv, and is not the conv's input.
bool sum_residual_in_place(fx::GraphModule& gm, fx::Node* n, const std::unordered_map<const fx::Node*, size_t>& order) {
  const auto conv = sole_integer_conv(gm, *n);
  if (!conv || conv->adds_residual_in_place() || conv->output_grid() || n->args().size() != 2) return false;
  const fx::Node* input = n->args()[0].node();
  const fx::Node* residual = n->args()[1].node();
  if (residual == nullptr || residual == input || !makes_fresh_tensor(gm, *residual)) return false;
  for (const fx::Node* user : residual->users())
    if (user != n && order.at(user) > order.at(n)) return false;
  conv->add_residual_in_place(true);
  return true;
}

// conv → integer layer (its only user, reading it as its input): the conv writes that layer's
// quantized input.
bool requantize_for_successor(fx::GraphModule& gm, fx::Node* n) {
  const auto conv = sole_integer_conv(gm, *n);
  if (!conv || conv->output_grid() || n->args().size() != 1 || n->users().size() != 1) return false;
  const fx::Node* user = *n->users().begin();
  // The user reads n as its input, not as a residual (which stays float32).
  if (user->op() != fx::NodeOp::CallModule || user->args().empty() || user->args()[0].node() != n) return false;
  if (user->args().size() == 2 && user->args()[1].node() == n) return false;
  const nn::ModulePtr next = gm.get_submodule(user->target());
  std::optional<detail::OutputGrid> grid;
  if (const auto* d = dynamic_cast<const DeployedModule*>(next.get()); d && d->runs_integer()) {
    const detail::DeployedTensors t = d->tensors();
    grid = detail::OutputGrid{t.input_scale, t.input_zero_point, d->qconfig().activations()};
  }
  if (!grid) return false;
  conv->requantize_output(grid);
  for (TensorMeta& m : n->meta().outputs) m.dtype = detail::input_integer_type(grid->qconfig);
  return true;
}

}  // namespace

std::string IntegerFusions::to_string() const {
  return fmt::format(
      "{}; {} residual adds made convolution post-ops ({} in place), {} layers write their successor's integers",
      activations.to_string(), residual_adds, in_place_residuals, requantized);
}

IntegerFusions fuse_integer_layers(fx::GraphModule& gm) {
  IntegerFusions done;
  done.activations = fx::fuse_activations(gm);
  // fuse_residual erases the add ahead of the walk and moves the conv: walk a snapshot, which
  // skips the erased adds (Note [Erasing during a walk]).
  fx::Graph& g = gm.graph();
  for (fx::Node* n : g.nodes())
    if (fuse_residual(gm, n)) ++done.residual_adds;
  for (fx::Node* n : g.nodes())
    if (requantize_for_successor(gm, n)) ++done.requantized;
  std::unordered_map<const fx::Node*, size_t> order;
  for (const fx::Node* n : g) order.emplace(n, order.size());
  for (fx::Node* n : g.nodes())
    if (sum_residual_in_place(gm, n, order)) ++done.in_place_residuals;
  gm.recompile();
  return done;
}

}  // namespace qflow::quant
