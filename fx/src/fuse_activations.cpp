// fuse_activations: the ReLU fusions that keep a graph's results bit for bit (see fuse.h).
#include <algorithm>
#include <map>

#include "qflow/fx/fuse.h"
#include "qflow/fx/pattern.h"
#include "qflow/nn/layers/activation.h"
#include "qflow/nn/layers/linear.h"

namespace qflow::fx {

namespace {

NodePattern relu_node() { return any_of({module_type<nn::ReLU>(), function({"relu", "relu_"})}); }

// x + y with two tensor operands and alpha 1 (a residual connection).
NodePattern plain_tensor_add() {
  return where("add of two tensors", [](const Node& n, const GraphModule&) {
    if ((n.op() != NodeOp::CallFunction && n.op() != NodeOp::CallMethod) || n.target() != "add") return false;
    const Argument *self = n.arg("self"), *other = n.arg("other"), *alpha = n.arg("alpha");
    if (self == nullptr || self->node() == nullptr || other == nullptr || !other->is_node()) return false;
    return alpha == nullptr || (!alpha->is_node() && alpha->to_double() == 1.0);
  });
}

// Replaces `relu` (a ReLU module, relu or relu_) by its input node's value computed by
// `producer`: every user of the ReLU reads `producer` instead.
void absorb_relu(GraphModule& gm, Node* producer, Node* relu) {
  const std::string module = relu->op() == NodeOp::CallModule ? relu->target() : "";
  producer->meta().outputs = relu->meta().outputs;
  relu->replace_all_uses_with(producer);
  gm.graph().erase_node(relu);
  if (!module.empty()) delete_unused_submodule(gm, module);
}

// True when the node's value is a fresh tensor whose producer's backward does not read it, so
// a ReLU may overwrite it (autograd's version check would refuse otherwise, never a wrong
// gradient): convolutions, linear layers and element-wise sums and products.
bool overwritable_output(const Node& n, const GraphModule& gm) {
  static const NodePattern fresh = any_of({module_type<nn::Conv2d>(), module_type<nn::Linear>(),
                                           function({"conv2d", "linear", "add", "sub", "mul", "matmul"})});
  return fresh.matches(n, gm);
}

}  // namespace

size_t ActivationFusions::modules(const std::string& type) const {
  const auto it = module_relu.find(type);
  return it == module_relu.end() ? 0 : it->second;
}

std::string ActivationFusions::to_string() const {
  std::string s;
  for (const auto& [type, n] : module_relu) s += fmt::format("{} {}+ReLU fused, ", n, type);
  if (module_relu.empty()) s = "no module+ReLU fused, ";
  return s + fmt::format("{} add+ReLU fused, {} ReLU made in-place", add_relu, inplace_relu);
}

ActivationFusions fuse_activations(GraphModule& gm) {
  ActivationFusions done;
  // Module → ReLU, for every module with a fused form (nn::Module::fused_with_relu): BatchNorm2d,
  // Conv2d (every conv → BN → ReLU once fuse_conv_bn folded the BN), QConvBN, DConv2d. The fused
  // module takes the module's path and shares its tensors.
  const NodePattern fusable = where("module with a fused ReLU form", [](const Node& n, const GraphModule& owner) {
    return n.op() == NodeOp::CallModule && owner.get_submodule(n.target())->fused_with_relu() != nullptr;
  });
  replace_pattern(gm, {fusable, relu_node()}, [&done](GraphModule& owner, const Match& m) -> nn::ModulePtr {
    const nn::ModulePtr module = owner.get_submodule(m.nodes[0]->target());
    ++done.module_relu[module->type_name()];
    return module->fused_with_relu();
  });
  // add → ReLU: the add node becomes add_relu.
  for (const Match& m : match_chains(gm, {plain_tensor_add(), relu_node()})) {
    Node* add = m.nodes[0];
    add->set_target("add_relu");
    add->set_kwargs({});
    absorb_relu(gm, add, m.nodes[1]);
    ++done.add_relu;
  }
  // Any other ReLU overwrites its input when nothing else reads it.
  std::vector<Node*> relus;
  const NodePattern is_relu = any_of({module_type<nn::ReLU>(), function({"relu"})});
  for (Node* n : gm.graph())
    if (is_relu.matches(*n, gm)) relus.push_back(n);
  for (Node* relu : relus) {
    Node* input = relu->args().empty() ? nullptr : relu->args()[0].node();
    if (input == nullptr || input->users().size() != 1 || !overwritable_output(*input, gm)) continue;
    if (relu->op() == NodeOp::CallModule) {
      Node* inplace = nullptr;
      {
        auto guard = gm.graph().inserting_before(relu);
        inplace = gm.graph().create_node(NodeOp::CallFunction, "relu_", {Argument(input)}, {}, relu->name());
      }
      absorb_relu(gm, inplace, relu);
    } else {
      relu->set_target("relu_");
    }
    ++done.inplace_relu;
  }
  gm.recompile();
  return done;
}

}  // namespace qflow::fx
