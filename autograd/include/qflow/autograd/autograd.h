#pragma once
// Everything a user of autograd needs.
#include "qflow/autograd/anomaly_mode.h"
#include "qflow/autograd/autograd_meta.h"
#include "qflow/autograd/derivatives.h"
#include "qflow/autograd/engine.h"
#include "qflow/autograd/grad_hooks.h"
#include "qflow/autograd/grad_mode.h"
#include "qflow/autograd/gradcheck.h"
#include "qflow/autograd/node.h"
