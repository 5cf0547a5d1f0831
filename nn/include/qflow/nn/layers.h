#pragma once
// Every built-in layer.
#include "qflow/nn/layers/activation.h"
#include "qflow/nn/layers/batchnorm.h"
#include "qflow/nn/layers/conv.h"
#include "qflow/nn/layers/linear.h"
#include "qflow/nn/layers/pooling.h"
