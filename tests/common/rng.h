/* tests/common/rng.h - the generator of the tests is the library's (core/rng.h), the one that
 * draws every synthetic scene. */
#include "core/rng.h"
