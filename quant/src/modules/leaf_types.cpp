// The quant modules are leaves for fx tracing, like the built-in layers: a traced QAT model
// shows `call_module[target=layer1.0.conv1]` for a QConvBN, not the ops inside it (their
// forward reads observer statistics, which a trace could not follow anyway).
#include "qflow/fx/trace.h"
#include "qflow/quant/deploy.h"
#include "qflow/quant/histogram_observer.h"
#include "qflow/quant/learned_quantizer.h"
#include "qflow/quant/observer.h"

namespace qflow::quant {
namespace {

struct RegisterQuantLeaves {
  RegisterQuantLeaves() {
    fx::register_leaf_type<QConv2d>();
    fx::register_leaf_type<QLinear>();
    fx::register_leaf_type<QConvBN>();
    fx::register_leaf_type<DConv2d>();
    fx::register_leaf_type<DLinear>();
    fx::register_leaf_type<MinMaxObserver>();
    fx::register_leaf_type<MovingAverageMinMaxObserver>();
    fx::register_leaf_type<HistogramObserver>();
    fx::register_leaf_type<LsqQuantizer>();
    fx::register_leaf_type<TqtQuantizer>();
  }
} g_register_quant_leaves;

}  // namespace
}  // namespace qflow::quant
