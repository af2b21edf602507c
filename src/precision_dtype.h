// The training precision as a LibTorch dtype and back (precision.h is the LibTorch-free part).
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/typeid.h>

#include "precision.h"

namespace otf {

// torch.float32 / torch.bfloat16 / torch.float16 and nothing else; throws std::invalid_argument
// for any other dtype (Double, Int, ...) naming it.
Precision precision_from_dtype(c10::ScalarType dtype);
Precision precision_from_dtype(caffe2::TypeMeta dtype);

c10::ScalarType to_scalar_type(Precision precision);

}  // namespace otf
