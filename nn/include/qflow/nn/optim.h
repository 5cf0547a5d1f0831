#pragma once
// Optimizers and learning-rate schedules.
#include "qflow/nn/optim/adam.h"
#include "qflow/nn/optim/lr_scheduler.h"
#include "qflow/nn/optim/sgd.h"
