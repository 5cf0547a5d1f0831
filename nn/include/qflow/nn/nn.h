#pragma once
// Everything the nn layer offers, in one include.
#include "qflow/nn/anomaly.h"
#include "qflow/nn/cloneable.h"
#include "qflow/nn/container.h"
#include "qflow/nn/module.h"
#include "qflow/nn/functional.h"
#include "qflow/nn/init.h"
#include "qflow/nn/layers.h"
#include "qflow/nn/module_call_hook.h"
#include "qflow/nn/serialize.h"
#include "qflow/nn/state_dict.h"
