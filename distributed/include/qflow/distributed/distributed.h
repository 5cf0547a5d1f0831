#pragma once
// The distributed layer: data-parallel training over Open MPI.
#include "qflow/distributed/data_parallel.h"
#include "qflow/distributed/observer_sync.h"
#include "qflow/distributed/process_group.h"
#include "qflow/distributed/sampler.h"
#include "qflow/distributed/sync_batchnorm.h"
