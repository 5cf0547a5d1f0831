#pragma once
// Everything the fx layer offers, in one include. See ARCHITECTURE.md §6.
#include "qflow/fx/argument.h"
#include "qflow/fx/fuse.h"
#include "qflow/fx/graph.h"
#include "qflow/fx/graph_dot.h"
#include "qflow/fx/graph_module.h"
#include "qflow/fx/interpreter.h"
#include "qflow/fx/node.h"
#include "qflow/fx/pattern.h"
#include "qflow/fx/shape_prop.h"
#include "qflow/fx/trace.h"
#include "qflow/fx/trace_error.h"
