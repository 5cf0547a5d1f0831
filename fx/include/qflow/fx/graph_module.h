#pragma once
// GraphModule: an nn::Module whose forward is a Graph (torch.fx's GraphModule, in C++).
//
// It owns the submodules that call_module nodes target and the parameters/buffers that
// get_attr nodes target, at the same dotted paths as in the module it was built from, with
// plain containers (type "Module") in between: a traced ResNet has `layer1.0.conv1` and the
// same state_dict keys, in the same order, as the original. The entries are shared with the
// original (same module objects, same tensors), as in torch.fx: training a GraphModule
// trains the model it was traced from. Passes that change a submodule's weights in place
// should put a copy in its place (add_submodule(path, module->clone())).
//
// Tensors that are neither parameters nor buffers but appear in the graph (created while
// tracing) are constants: get_attr targets like "_tensor_constant0", held outside
// state_dict. forward runs the graph with fx::Interpreter.
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "qflow/fx/graph.h"
#include "qflow/nn/module.h"

namespace qflow::fx {

class GraphModule : public nn::Module {
 public:
  /// Builds a GraphModule running `graph`, taking from `root` every submodule a call_module
  /// node targets and every parameter/buffer a get_attr node targets (in root's registration
  /// order), and `constants` for the remaining get_attr targets. Calls recompile().
  GraphModule(nn::Module& root, std::unique_ptr<Graph> graph, std::map<std::string, Tensor> constants = {},
              std::string class_name = "GraphModule");

  Graph& graph() { return *graph_; }
  const Graph& graph() const { return *graph_; }

  /// Runs the graph (one input per placeholder, in order).
  TensorList forward_list(const TensorList& inputs) override;
  Tensor forward(const Tensor& input) override;

  /// Validates the graph against this module after a pass changed it: Graph::lint(this)
  /// (order, references, names, users, and that every target exists). Throws qflow::Error.
  void recompile();
  /// The forward as straight-line, Python-like code (torch.fx's gm.code), e.g.
  ///   def forward(self, x):
  ///       conv1 = self.conv1(x)
  ///       relu = qflow.relu(conv1)
  ///       return relu
  std::string code() const;

  // ---- submodules and attributes by dotted path ------------------------------------------
  /// Installs `module` at `path`, creating missing intermediate containers; an existing
  /// submodule at `path` is replaced in place (same position in state_dict order).
  void add_submodule(std::string_view path, nn::ModulePtr module);
  /// Removes the submodule at `path`; false when there is none.
  bool delete_submodule(std::string_view path);
  /// Removes every submodule that no call_module/get_attr target uses (after a fusion, say).
  void delete_all_unused_submodules();
  /// The parameter, buffer or constant a get_attr target names; throws when absent.
  Tensor get_attr(std::string_view target) const;
  /// True when get_attr(target) would succeed.
  bool has_attr(std::string_view target) const;

  const std::map<std::string, Tensor>& constants() const { return constants_; }
  /// Stores `value` as a constant under a fresh name derived from `hint`; returns the name.
  std::string add_constant(Tensor value, std::string_view hint = "_tensor_constant");

  /// Deep copy: graph, constants and every submodule copied (see Note [Module cloning]).
  nn::ModulePtr clone() const override;
  std::string type_name() const override { return class_name_; }

 private:
  struct CloneTag {};
  explicit GraphModule(CloneTag) {}
  void copy_entries_from(nn::Module& root);
  bool has_submodule_path(std::string_view path) const;
  /// The module at `path`, creating missing containers on the way.
  nn::ModulePtr add_submodule_chain(std::string_view path);

  std::unique_ptr<Graph> graph_;
  std::map<std::string, Tensor> constants_;
  std::string class_name_ = "GraphModule";
};

/// The plain container GraphModule creates at intermediate paths ("layer1", "layer1.0"):
/// holds entries, has no forward; prints as "Module" like torch.nn.Module().
class ModuleContainer : public nn::Module {
 public:
  nn::ModulePtr clone() const override;
  std::string type_name() const override { return "Module"; }
};

}  // namespace qflow::fx
