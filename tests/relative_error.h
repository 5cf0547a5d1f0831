#pragma once
// relative_error, for the tests that compare kernels computing the same values in another
// order or precision: defined in compare.h with the other comparisons (and its rules for NaN
// and Inf, which fail it); this header stays for the tests that include it by this name.
#include "compare.h"
