#include "local_environments.h"

namespace otf {

double padding_distance(double cutoff) { return 2.0 * cutoff; }

}  // namespace otf
