// The label journal: every labelled configuration appended to an extended-XYZ (extxyz) file and on
// disk (fsync) before it is used, so that a crash, a kill or a full disk loses no label that the
// ab initio reference was paid for; a warm start reads such files (and ASE-written ones) back.
//
// Format, per frame: a line with the atom count; one comment line of key=value pairs; one line
// per atom, `symbol x y z fx fy fz id [uncertainty]`. The comment line:
//   Lattice="ax ay az bx by bz cx cy cz" Properties=species:S:1:pos:R:3:forces:R:3:id:I:1
//   [:force_uncertainty:R:1] energy=E virial="xx xy xz yx yy yz zx zy zz"
//   stress="(-virial / volume, same layout)" pbc="T T T" origin="x y z" step=S call=C units=U
//   reference="any text" (quotes, backslashes and line breaks written as \", \\ and \n)
// Reals are written with %.17g (exact round trip). `virial` is what this reader uses; `stress` is
// there only for ASE, which takes a calculator's stress from `stress` and nothing else.
// A frame is whole only when all its lines, the last included, end with a newline.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace otf {

// One labelled configuration, whole (every atom, ordered by atom id), in the MD code's units.
struct JournalFrame {
  int64_t step = 0;                  // MD step of the label
  int64_t call = 0;                  // reference call number (1-based) in the run that wrote it
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

// Appends frames to one journal file; each append is on disk when it returns, or not there at all.
class LabelJournalWriter {
 public:
  // Opens `path` for appending (creates it, 0644). A last frame cut short by a killed writer is
  // removed first (so that new frames do not follow half a frame); dropped_cut_short_frame() tells.
  // Throws std::runtime_error naming the path and the system's reason.
  explicit LabelJournalWriter(std::string path);
  ~LabelJournalWriter();
  LabelJournalWriter(const LabelJournalWriter&) = delete;
  LabelJournalWriter& operator=(const LabelJournalWriter&) = delete;
  LabelJournalWriter(LabelJournalWriter&& other) noexcept;
  LabelJournalWriter& operator=(LabelJournalWriter&& other) noexcept;

  // Appends one frame, then fsync()s. All-or-nothing: when any byte cannot be written (ENOSPC,
  // EIO...) the file is truncated back to its size before the call and std::runtime_error names
  // the path, the step and the system's reason. An invalid frame (sizes that disagree, a number
  // that is not finite, an empty symbol) throws std::invalid_argument and writes nothing.
  void append(const JournalFrame& frame);

  const std::string& path() const { return path_; }
  int64_t frames_written() const { return frames_written_; }  // by this writer
  bool dropped_cut_short_frame() const { return dropped_cut_short_frame_; }

 private:
  std::string path_;
  int fd_ = -1;
  int64_t frames_written_ = 0;
  bool dropped_cut_short_frame_ = false;
};

struct JournalContents {
  std::vector<JournalFrame> frames;
  // A last frame cut short (a kill or a full disk during a write by another program) is dropped
  // and counted here.
  int64_t truncated_frames = 0;
};

// Reads every complete frame. A truncated last frame is dropped (counted). A malformed frame that
// is not cut short, a missing file, or a frame without energy or forces throws std::runtime_error
// naming the file, the line and what is wrong. Also reads extxyz files of other tools (ASE's
// ase.io.write with a SinglePointCalculator): positions from `pos`, forces from `forces` (or
// `force`), energy from `energy` (or `free_energy`), the virial from `virial` (9 numbers) or from
// `stress` (9, or 6 in Voigt order xx yy zz yz xz xy) as -stress * volume; when absent: units
// empty, ids 1..N, step -1, call 0, uncertainty empty, origin zero, cell zero, virial zero.
JournalContents read_label_journal(const std::string& path);

}  // namespace otf
