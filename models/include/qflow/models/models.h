#pragma once
// The model zoo.
#include "qflow/models/registry.h"
#include "qflow/models/resnet.h"
#include "qflow/models/small_nets.h"
