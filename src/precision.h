// The training precision of an OTF-Torch run (float32, bfloat16 or float16) and the one parser
// every caller uses for it: the LAMMPS fix and pair style, the engine and model files all accept
// the same spellings and reject everything else with the same message. Free of LibTorch (the
// settings the LAMMPS styles hold carry it); the mapping to torch dtypes is precision_dtype.h.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace otf {

// Mirrors the `precision` field of nvalchemi's MixedPrecisionHook
// (docs/design.md §7.1):
//   Float32  - no autocast and no GradScaler;
//   BFloat16 - autocast to bfloat16, no GradScaler (bf16 has float32's exponent range);
//   Float16  - autocast to float16 and a GradScaler (fp16 overflows above 65504).
enum class Precision { Float32, BFloat16, Float16 };

// Accepts exactly the spellings of docs/design.md §7.1: the canonical names float32, bfloat16,
// float16 and the aliases fp32, bf16, fp16, plus what a user types when copying a torch dtype: an
// optional "torch." prefix, any letter case and surrounding whitespace ("TORCH.Float16",
// " BF16 "). Deliberately rejected: "half", "bfloat", "float", "double", "float64"... The
// reference lists no such names, and "float" would be ambiguous (torch.float is float32, C's float
// is too, but a user writing "float" for fp16 is not rare). Throws std::invalid_argument naming the
// bad value and listing what is accepted.
Precision parse_precision(std::string_view text);

// The canonical name ("float32", "bfloat16", "float16"); parse_precision(to_string(p)) == p.
std::string to_string(Precision precision);
std::ostream& operator<<(std::ostream& out, Precision precision);

// Only float16 needs loss scaling: its smallest normal value is 6.1e-5 and its largest 65504,
// whereas bfloat16 shares float32's exponent range (docs/design.md §7.8, pitfall 6).
bool needs_grad_scaler(Precision precision);

}  // namespace otf
