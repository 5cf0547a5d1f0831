#pragma once
// Deploy state_dicts written before deployed weights were stored as integers (Note [Deployed
// module layout] in deploy.h): their "<layer>.weight" is the float weight on its grid,
// (q - z) * s. load_state_dict refuses those float values for the integer weights (Note
// [load_state_dict converts dtypes]); upgrade_deploy_state_dict converts them, exactly.
#include <cstddef>

#include "qflow/nn/state_dict.h"
#include "qflow/quant/qconfig.h"

namespace qflow::quant {

/// Replaces every float "<layer>.weight" that has quantized grids beside it ("<layer>.weight_scale"
/// not all 0, "<layer>.weight_zero_point") with the integers of `qconfig`'s grid that reproduce
/// it exactly (detail::grid_integers), as the deploy pass stores them now; returns how many it
/// converted. Throws, naming the key and the first element, when a weight is not on its grid
/// (or the file was saved with another QConfig). Integer weights and unquantized layers (all
/// scales 0) are left as they are, so an up-to-date state_dict passes through unchanged.
size_t upgrade_deploy_state_dict(nn::StateDict& dict, const QConfig& qconfig);

}  // namespace qflow::quant
