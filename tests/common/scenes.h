/* tests/common/scenes.h - the synthetic scenes of the tests: the library's generators
 * (synth/scenes.h), the one copy that `voxconv synth`, `voxconv bench` and the benchmark
 * programs use too. */
#include "synth/scenes.h"
