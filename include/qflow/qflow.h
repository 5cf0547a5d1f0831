#pragma once
// The public API of qflow in one include.
#include "qflow/autograd/autograd.h"
#include "qflow/core/conv_ops.h"
#include "qflow/core/dispatch.h"
#include "qflow/core/factory.h"
#include "qflow/core/nn_ops.h"
#include "qflow/core/ops.h"
#include "qflow/core/parallel.h"
#include "qflow/core/tensor.h"
#include "qflow/data/data.h"
#include "qflow/nn/nn.h"
#include "qflow/nn/optim.h"
#include "qflow/models/models.h"
