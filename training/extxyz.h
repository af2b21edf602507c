// The extended-XYZ (extxyz) codec of labelled configurations: one frame written as text that
// round-trips exactly and that ASE reads, and frames parsed back from text or from any extxyz
// file (ASE-written ones included). No file durability here: training/label_journal.h adds that.
//
// Format, per frame: a line with the atom count; one comment line of key=value pairs; one line
// per atom, `symbol x y z fx fy fz id [uncertainty]`. The comment line:
//   Lattice="ax ay az bx by bz cx cy cz" Properties=species:S:1:pos:R:3:forces:R:3:id:I:1
//   [:force_uncertainty:R:1] energy=E virial="xx xy xz yx yy yz zx zy zz"
//   stress="(-virial / volume, same layout)" pbc="T T T" origin="x y z" step=S call=C
//   [walker=W] units=U reference="any text" (quotes, backslashes and line breaks written as
//   \", \\ and \n)
// Reals are written with %.17g (exact round trip). `virial` is what this reader uses; `stress` is
// there only for ASE, which takes a calculator's stress from `stress` and nothing else.
// A frame is whole only when all its lines, the last included, end with a newline.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace otf {

// One labelled configuration, whole (every atom, ordered by atom id), in the MD code's units.
struct LabelledFrame {
  int64_t step = 0;                  // MD step of the label
  int64_t call = 0;                  // reference call number (1-based) in the run that wrote it
  int64_t walker = -1;               // the walker (LAMMPS partition) that labelled it; -1: none
  std::string units;                 // the MD code's unit style, e.g. "metal" (LAMMPS' names)
  std::string reference;             // what labelled it, e.g. "i-PI client (cp2k ...)"; any text
  std::array<double, 9> cell{};      // rows a, b, c (Cartesian)
  std::array<double, 3> origin{};    // lower corner of the cell
  std::vector<std::string> symbols;  // [atoms] chemical symbols
  std::vector<int64_t> ids;          // [atoms] MD atom ids
  std::vector<double> positions;     // [atoms][3] Cartesian, absolute (origin not subtracted)
  std::vector<double> forces;        // [atoms][3]
  double energy = 0.0;               // whole frame
  // Whole frame, xx yy zz xy xz yz, energy units (sum r_i f_i; LAMMPS' sign).
  std::array<double, 6> virial{};
  // [atoms] committee force uncertainty when labelled, or empty (not known).
  std::vector<double> uncertainty;
  int num_atoms() const;  // symbols.size()
};

// The frame as extxyz text, every line ending with a newline. An invalid frame (sizes that
// disagree, a number that is not finite, an empty symbol or one with spaces) throws
// std::invalid_argument "<where>: <what is wrong>".
std::string extxyz_frame_text(const LabelledFrame& frame, const std::string& where);

struct ExtxyzContents {
  std::vector<LabelledFrame> frames;
  // A last frame cut short (a kill or a full disk during a write) is dropped and counted here.
  int64_t truncated_frames = 0;
};

// Reads every complete frame. A truncated last frame is dropped (counted). A malformed frame that
// is not cut short, a missing file, or a frame without energy or forces throws std::runtime_error
// naming the file, the line and what is wrong. Reads extxyz files of other tools too (ASE's
// ase.io.write with a SinglePointCalculator): positions from `pos`, forces from `forces` (or
// `force`), energy from `energy` (or `free_energy`), the virial from `virial` (9 numbers) or from
// `stress` (9, or 6 in Voigt order xx yy zz yz xz xy) as -stress * volume; when absent: units
// empty, ids 1..N, step -1, call 0, walker -1, uncertainty empty, origin zero, cell zero, virial
// zero.
ExtxyzContents read_extxyz_file(const std::string& path);
// The same for text in memory; errors say "extxyz text, line N: ...".
ExtxyzContents parse_extxyz_text(const std::string& text);

// Where a frame cut short at the end of `in` begins (a byte offset), or -1 when there is none or
// when the text cannot be split into frames (then a reader says what is wrong).
int64_t extxyz_cut_short_tail_offset(std::istream& in);

}  // namespace otf
