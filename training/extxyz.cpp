#include "extxyz.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace otf {

int LabelledFrame::num_atoms() const { return static_cast<int>(symbols.size()); }

namespace {

std::string system_reason(int error_number) { return std::strerror(error_number); }

// How read errors name a file: the label journal is what this reader was first written for, and
// users and tests know the messages by that name.
std::string quoted_path(const std::string& path) { return "label journal '" + path + "'"; }

// ---- writing ---------------------------------------------------------------------------------

// %.17g, without the C locale's say in the decimal point.
void append_real(std::string& out, double value) {
  char buffer[32];
  const auto result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::general, 17);
  out.append(buffer, result.ptr);
}

void append_integer(std::string& out, int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

template <std::size_t N>
void append_real_list(std::string& out, const std::array<double, N>& values) {
  out += '"';
  for (std::size_t i = 0; i < N; ++i) {
    if (i > 0) out += ' ';
    append_real(out, values[i]);
  }
  out += '"';
}

// A value bare when it is a plain word, otherwise quoted with \" \\ escaped (ASE's extxyz parser
// reads the same escapes) and line breaks as \n \r so that the comment stays one line.
void append_text_value(std::string& out, const std::string& text, bool bare_if_plain) {
  bool plain = !text.empty();
  for (const char c : text) {
    const bool word = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
                      c == '.' || c == '+' || c == '/';
    plain = plain && word;
  }
  if (bare_if_plain && plain) {
    out += text;
    return;
  }
  out += '"';
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
  out += '"';
}

double cell_volume(const std::array<double, 9>& cell) {
  const double* a = cell.data();
  const double* b = cell.data() + 3;
  const double* c = cell.data() + 6;
  return std::abs(a[0] * (b[1] * c[2] - b[2] * c[1]) + a[1] * (b[2] * c[0] - b[0] * c[2]) +
                  a[2] * (b[0] * c[1] - b[1] * c[0]));
}

// The virial (xx yy zz xy xz yz) as the 9 numbers of a 3x3 matrix; symmetric, so row-major and
// ASE's Fortran order agree.
std::array<double, 9> full_matrix(const std::array<double, 6>& v) {
  return {v[0], v[3], v[4], v[3], v[1], v[5], v[4], v[5], v[2]};
}

void require_finite(const std::string& what, const double* values, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      throw std::invalid_argument(what + " has a value that is not finite (" +
                                  std::to_string(values[i]) + " at index " + std::to_string(i) +
                                  ")");
}

void validate(const LabelledFrame& frame, const std::string& where) {
  const std::size_t atoms = frame.symbols.size();
  auto size_error = [&](const std::string& name, std::size_t got, std::size_t expected) {
    return std::invalid_argument(where + ": " + name + " has " + std::to_string(got) +
                                 " entries, expected " + std::to_string(expected) + " (" +
                                 std::to_string(atoms) + " atoms, from symbols)");
  };
  if (atoms == 0) throw std::invalid_argument(where + ": the frame has no atoms");
  if (frame.ids.size() != atoms) throw size_error("ids", frame.ids.size(), atoms);
  if (frame.positions.size() != 3 * atoms)
    throw size_error("positions", frame.positions.size(), 3 * atoms);
  if (frame.forces.size() != 3 * atoms) throw size_error("forces", frame.forces.size(), 3 * atoms);
  if (!frame.uncertainty.empty() && frame.uncertainty.size() != atoms)
    throw size_error("uncertainty (empty or one per atom)", frame.uncertainty.size(), atoms);
  for (std::size_t i = 0; i < atoms; ++i) {
    const std::string& symbol = frame.symbols[i];
    bool printable = !symbol.empty();
    for (const char c : symbol)
      printable = printable && std::isgraph(static_cast<unsigned char>(c));
    if (!printable)
      throw std::invalid_argument(where + ": symbol of atom " + std::to_string(i) + " ('" + symbol +
                                  "') is empty or has spaces or control characters");
  }
  require_finite(where + ": energy", &frame.energy, 1);
  require_finite(where + ": virial", frame.virial.data(), frame.virial.size());
  require_finite(where + ": cell", frame.cell.data(), frame.cell.size());
  require_finite(where + ": origin", frame.origin.data(), frame.origin.size());
  require_finite(where + ": positions", frame.positions.data(), frame.positions.size());
  require_finite(where + ": forces", frame.forces.data(), frame.forces.size());
  require_finite(where + ": uncertainty", frame.uncertainty.data(), frame.uncertainty.size());
}

}  // namespace

std::string extxyz_frame_text(const LabelledFrame& frame, const std::string& where) {
  validate(frame, where);
  const std::size_t atoms = frame.symbols.size();
  const bool has_uncertainty = !frame.uncertainty.empty();
  std::string out;
  out.reserve(512 + atoms * (has_uncertainty ? 200 : 180));
  append_integer(out, static_cast<int64_t>(atoms));
  out += "\nLattice=";
  append_real_list(out, frame.cell);
  out += " Properties=species:S:1:pos:R:3:forces:R:3:id:I:1";
  if (has_uncertainty) out += ":force_uncertainty:R:1";
  out += " energy=";
  append_real(out, frame.energy);
  out += " virial=";
  append_real_list(out, full_matrix(frame.virial));
  // ASE 3.22 keeps `virial` only as an info entry (SPECIAL_3_3_KEYS in ase/io/extxyz.py) and gives
  // its calculator a stress only from `stress`; so the stress is written too, for ASE alone.
  const double volume = cell_volume(frame.cell);
  if (std::isfinite(volume) && volume > 0.0) {
    std::array<double, 9> stress = full_matrix(frame.virial);
    for (double& s : stress) s = -s / volume;
    out += " stress=";
    append_real_list(out, stress);
  }
  out += " pbc=\"T T T\" origin=";
  append_real_list(out, frame.origin);
  out += " step=";
  append_integer(out, frame.step);
  out += " call=";
  append_integer(out, frame.call);
  if (frame.walker >= 0) {
    out += " walker=";
    append_integer(out, frame.walker);
  }
  out += " units=";
  append_text_value(out, frame.units, /*bare_if_plain=*/true);
  out += " reference=";
  append_text_value(out, frame.reference, /*bare_if_plain=*/false);
  out += '\n';
  for (std::size_t i = 0; i < atoms; ++i) {
    out += frame.symbols[i];
    for (int d = 0; d < 3; ++d) {
      out += ' ';
      append_real(out, frame.positions[3 * i + d]);
    }
    for (int d = 0; d < 3; ++d) {
      out += ' ';
      append_real(out, frame.forces[3 * i + d]);
    }
    out += ' ';
    append_integer(out, frame.ids[i]);
    if (has_uncertainty) {
      out += ' ';
      append_real(out, frame.uncertainty[i]);
    }
    out += '\n';
  }
  return out;
}

namespace {

// ---- splitting a file into frames ------------------------------------------------------------

// What is wrong at a line of the text; the reader adds the file's name.
struct FormatError {
  int64_t line;
  std::string what;
};

// Lines of a stream with their byte offsets; a last line without its newline is "cut short":
// the writer ends every line with one, so a line without may have lost characters.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  enum class Result { line, cut_short, end };
  Result next(std::string& line) {
    line_start_ = offset_;
    if (!std::getline(in_, line)) return Result::end;
    ++line_number_;
    if (in_.eof()) {  // getline stopped at the end of the file, not at a newline
      offset_ += line.size();
      return Result::cut_short;
    }
    offset_ += line.size() + 1;
    return Result::line;
  }
  int64_t line_number() const { return line_number_; }  // of the line last read, 1-based
  int64_t line_start() const { return line_start_; }    // byte offset of the line last read

 private:
  std::istream& in_;
  int64_t offset_ = 0;
  int64_t line_start_ = 0;
  int64_t line_number_ = 0;
};

bool is_blank(std::string_view text) {
  for (const char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// One frame's lines, not yet parsed: the count line, the comment line, the atom lines.
struct RawFrame {
  int64_t first_line = 0;    // line number of the count line
  int64_t begin_offset = 0;  // byte offset of the count line
  int atoms = 0;
  std::vector<std::string> lines;  // comment line, then the atom lines
};

// Frames by their count lines, without parsing them. Blank lines between frames are skipped.
class FrameSplitter {
 public:
  explicit FrameSplitter(std::istream& in) : lines_(in) {}
  enum class Result { frame, cut_short, end };
  // On cut_short, frame.begin_offset is where the cut-short frame (or line) starts.
  Result next(RawFrame& frame) {
    std::string line;
    while (true) {
      const LineReader::Result got = lines_.next(line);
      if (got == LineReader::Result::end) return Result::end;
      if (is_blank(line)) {
        if (got == LineReader::Result::cut_short) return Result::end;
        continue;
      }
      frame.first_line = lines_.line_number();
      frame.begin_offset = lines_.line_start();
      if (got == LineReader::Result::cut_short) return Result::cut_short;
      break;
    }
    const std::string_view count_text = trimmed(line);
    int64_t count = -1;
    const auto parsed =
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    if (parsed.ec != std::errc() || parsed.ptr != count_text.data() + count_text.size() ||
        count < 0 || count > std::numeric_limits<int>::max())
      throw FormatError{frame.first_line, "expected the atom count that starts a frame, found '" +
                                              std::string(count_text.substr(0, 80)) + "'"};
    frame.atoms = static_cast<int>(count);
    frame.lines.clear();
    for (int64_t i = 0; i <= count; ++i) {
      frame.lines.emplace_back();
      if (lines_.next(frame.lines.back()) != LineReader::Result::line) return Result::cut_short;
    }
    return Result::frame;
  }

 private:
  LineReader lines_;
};

// ---- parsing a frame --------------------------------------------------------------------------

// The comment line's key=value pairs, as ASE's key_val_str_to_dict reads them: values bare or in
// "", '' or {}, backslash escapes the next character (\n and \r: line breaks, as written here), a
// key without a value is a flag ("T").
std::map<std::string, std::string> key_values(const std::string& line, int64_t line_number) {
  std::map<std::string, std::string> result;
  std::size_t i = 0;
  const std::size_t n = line.size();
  auto skip_space = [&] {
    while (i < n && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
  };
  auto read_escaped = [&](std::string& out) {  // at a backslash
    ++i;
    if (i >= n) throw FormatError{line_number, "comment line ends with a lone backslash"};
    out += line[i] == 'n' ? '\n' : line[i] == 'r' ? '\r' : line[i];
    ++i;
  };
  while (true) {
    skip_space();
    if (i >= n) break;
    std::string key;
    while (i < n && line[i] != '=' && !std::isspace(static_cast<unsigned char>(line[i]))) {
      if (line[i] == '"' || line[i] == '\'' || line[i] == '{')
        throw FormatError{line_number,
                          "comment line: a quote where a key was expected, at "
                          "column " +
                              std::to_string(i + 1)};
      key += line[i++];
    }
    if (key.empty())
      throw FormatError{line_number,
                        "comment line: '=' without a key, at column " + std::to_string(i + 1)};
    skip_space();
    if (i >= n || line[i] != '=') {
      // A moved temporary, not operator=(const char*): GCC 12 at -O3 warns falsely
      // (-Wstringop-overflow) about the inlined assign in this function.
      result[key] = std::string(1, 'T');
      continue;
    }
    ++i;
    skip_space();
    std::string value;
    if (i < n && (line[i] == '"' || line[i] == '\'' || line[i] == '{')) {
      const char close = line[i] == '{' ? '}' : line[i];
      ++i;
      while (true) {
        if (i >= n)
          throw FormatError{line_number, "comment line: the value of '" + key +
                                             "' has no closing " + std::string(1, close)};
        if (line[i] == close) {
          ++i;
          break;
        }
        if (line[i] == '\\')
          read_escaped(value);
        else
          value += line[i++];
      }
    } else {
      while (i < n && !std::isspace(static_cast<unsigned char>(line[i]))) {
        if (line[i] == '\\')
          read_escaped(value);
        else
          value += line[i++];
      }
    }
    result[key] = value;
  }
  return result;
}

double parse_real(std::string_view text, int64_t line_number, const std::string& what) {
  double value = 0.0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size())
    throw FormatError{line_number, what + ": '" + std::string(text) + "' is not a number"};
  if (!std::isfinite(value))
    throw FormatError{line_number, what + ": '" + std::string(text) + "' is not finite"};
  return value;
}

int64_t parse_integer(std::string_view text, int64_t line_number, const std::string& what) {
  int64_t value = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size())
    throw FormatError{line_number, what + ": '" + std::string(text) + "' is not an integer"};
  return value;
}

// Whitespace- or comma-separated numbers (as ASE splits them).
std::vector<double> parse_reals(const std::string& text, int64_t line_number,
                                const std::string& what) {
  std::vector<double> values;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto separator = [&](char c) {
      return c == ',' || std::isspace(static_cast<unsigned char>(c));
    };
    while (i < text.size() && separator(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !separator(text[i])) ++i;
    if (i > start)
      values.push_back(
          parse_real(std::string_view(text).substr(start, i - start), line_number, what));
  }
  return values;
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

struct Column {
  std::size_t first = 0;  // word index on an atom line
  char type = 'R';
  int width = 0;
};

// Properties=name:type:width:... as columns of an atom line.
std::map<std::string, Column> parse_properties(const std::string& text, int64_t line_number,
                                               std::size_t& total_width) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t colon = text.find(':', start);
    parts.push_back(text.substr(start, colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() % 3 != 0)
    throw FormatError{line_number,
                      "Properties='" + text + "' is not a list of name:type:columns triples"};
  std::map<std::string, Column> columns;
  total_width = 0;
  for (std::size_t p = 0; p < parts.size(); p += 3) {
    const std::string& type = parts[p + 1];
    const int64_t width =
        parse_integer(parts[p + 2], line_number, "Properties, columns of '" + parts[p] + "'");
    if (type.size() != 1 || std::string("SRIL").find(type[0]) == std::string::npos || width < 1)
      throw FormatError{line_number, "Properties: '" + parts[p] + ":" + type + ":" + parts[p + 2] +
                                         "' (expected a type S, R, I or L and a column count)"};
    columns[parts[p]] = Column{total_width, type[0], static_cast<int>(width)};
    total_width += static_cast<std::size_t>(width);
  }
  return columns;
}

const Column* find_column(const std::map<std::string, Column>& columns,
                          std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const auto found = columns.find(name);
    if (found != columns.end()) return &found->second;
  }
  return nullptr;
}

void require_layout(const Column* column, const std::string& name, char type, int width,
                    int64_t line_number) {
  if (column != nullptr && (column->type != type || column->width != width))
    throw FormatError{line_number, "Properties: column '" + name + "' is " +
                                       std::string(1, column->type) + ":" +
                                       std::to_string(column->width) + ", expected " +
                                       std::string(1, type) + ":" + std::to_string(width)};
}

LabelledFrame parse_frame(const RawFrame& raw) {
  const int64_t comment_line = raw.first_line + 1;
  if (raw.atoms == 0) throw FormatError{raw.first_line, "a frame with no atoms"};
  const std::map<std::string, std::string> info = key_values(raw.lines[0], comment_line);
  auto find = [&](std::initializer_list<const char*> names) -> const std::string* {
    for (const char* name : names) {
      const auto found = info.find(name);
      if (found != info.end()) return &found->second;
    }
    return nullptr;
  };
  auto numbers = [&](const std::string* value, const std::string& key, std::size_t count) {
    const std::vector<double> values = parse_reals(*value, comment_line, key);
    if (values.size() != count)
      throw FormatError{comment_line, key + " has " + std::to_string(values.size()) +
                                          " numbers, expected " + std::to_string(count)};
    return values;
  };

  LabelledFrame frame;
  if (const std::string* lattice = find({"Lattice"})) {
    const std::vector<double> values = numbers(lattice, "Lattice", 9);
    std::copy(values.begin(), values.end(), frame.cell.begin());
  }
  if (const std::string* origin = find({"origin"})) {
    const std::vector<double> values = numbers(origin, "origin", 3);
    std::copy(values.begin(), values.end(), frame.origin.begin());
  }
  const std::string* energy = find({"energy", "free_energy"});
  if (energy == nullptr)
    throw FormatError{comment_line,
                      "the frame has no energy (expected energy= or free_energy= "
                      "on the comment line)"};
  frame.energy = parse_real(trimmed(*energy), comment_line, "energy");
  if (const std::string* virial = find({"virial"})) {
    const std::vector<double> v = numbers(virial, "virial", 9);
    // Symmetrised; exact for a symmetric matrix (any order of the 9 numbers).
    frame.virial = {v[0], v[4], v[8], (v[1] + v[3]) / 2, (v[2] + v[6]) / 2, (v[5] + v[7]) / 2};
  } else if (const std::string* stress = find({"stress"})) {
    const std::vector<double> s = parse_reals(*stress, comment_line, "stress");
    std::array<double, 6> voigt{};  // xx yy zz yz xz xy, ASE's order
    if (s.size() == 9)
      voigt = {s[0], s[4], s[8], (s[5] + s[7]) / 2, (s[2] + s[6]) / 2, (s[1] + s[3]) / 2};
    else if (s.size() == 6)
      std::copy(s.begin(), s.end(), voigt.begin());
    else
      throw FormatError{comment_line, "stress has " + std::to_string(s.size()) +
                                          " numbers, expected 9 or 6 (Voigt xx yy zz yz xz xy)"};
    const double volume = cell_volume(frame.cell);
    if (!(volume > 0.0))
      throw FormatError{comment_line,
                        "stress without a cell of non-zero volume (Lattice) to "
                        "turn it into a virial"};
    frame.virial = {-voigt[0] * volume, -voigt[1] * volume, -voigt[2] * volume,
                    -voigt[5] * volume, -voigt[4] * volume, -voigt[3] * volume};
  }
  frame.step = -1;
  if (const std::string* step = find({"step"}))
    frame.step = parse_integer(trimmed(*step), comment_line, "step");
  if (const std::string* call = find({"call"}))
    frame.call = parse_integer(trimmed(*call), comment_line, "call");
  if (const std::string* walker = find({"walker"}))
    frame.walker = parse_integer(trimmed(*walker), comment_line, "walker");
  if (const std::string* units = find({"units"})) frame.units = *units;
  if (const std::string* reference = find({"reference"})) frame.reference = *reference;

  std::size_t width = 0;
  const std::map<std::string, Column> columns = parse_properties(
      find({"Properties"}) ? *find({"Properties"}) : "species:S:1:pos:R:3", comment_line, width);
  const Column* species = find_column(columns, {"species"});
  const Column* positions = find_column(columns, {"pos", "positions"});
  const Column* forces = find_column(columns, {"forces", "force"});
  const Column* ids = find_column(columns, {"id"});
  const Column* uncertainty = find_column(columns, {"force_uncertainty"});
  if (species == nullptr || positions == nullptr)
    throw FormatError{comment_line, "Properties has no species:S:1 or no pos:R:3 column"};
  if (forces == nullptr)
    throw FormatError{comment_line,
                      "the frame has no forces (expected forces:R:3 or force:R:3 "
                      "in Properties)"};
  require_layout(species, "species", 'S', 1, comment_line);
  require_layout(positions, "pos", 'R', 3, comment_line);
  require_layout(forces, "forces", 'R', 3, comment_line);
  require_layout(ids, "id", 'I', 1, comment_line);
  require_layout(uncertainty, "force_uncertainty", 'R', 1, comment_line);

  const auto atoms = static_cast<std::size_t>(raw.atoms);
  frame.symbols.reserve(atoms);
  frame.ids.reserve(atoms);
  frame.positions.reserve(3 * atoms);
  frame.forces.reserve(3 * atoms);
  if (uncertainty != nullptr) frame.uncertainty.reserve(atoms);
  for (std::size_t a = 0; a < atoms; ++a) {
    const int64_t line_number = comment_line + 1 + static_cast<int64_t>(a);
    const std::vector<std::string_view> words = split_words(raw.lines[a + 1]);
    if (words.size() != width)
      throw FormatError{line_number, "atom line has " + std::to_string(words.size()) +
                                         " columns, Properties gives " + std::to_string(width)};
    frame.symbols.emplace_back(words[species->first]);
    for (int d = 0; d < 3; ++d)
      frame.positions.push_back(parse_real(words[positions->first + d], line_number, "position"));
    for (int d = 0; d < 3; ++d)
      frame.forces.push_back(parse_real(words[forces->first + d], line_number, "force"));
    frame.ids.push_back(ids != nullptr ? parse_integer(words[ids->first], line_number, "id")
                                       : static_cast<int64_t>(a) + 1);
    if (uncertainty != nullptr)
      frame.uncertainty.push_back(
          parse_real(words[uncertainty->first], line_number, "force_uncertainty"));
  }
  return frame;
}

// Every frame of `in`; a FormatError names the line.
ExtxyzContents read_frames(std::istream& in) {
  ExtxyzContents contents;
  FrameSplitter splitter(in);
  RawFrame raw;
  while (true) {
    const FrameSplitter::Result got = splitter.next(raw);
    if (got == FrameSplitter::Result::end) break;
    if (got == FrameSplitter::Result::cut_short) {
      ++contents.truncated_frames;
      break;
    }
    contents.frames.push_back(parse_frame(raw));
  }
  return contents;
}

}  // namespace

int64_t extxyz_cut_short_tail_offset(std::istream& in) {
  FrameSplitter splitter(in);
  RawFrame raw;
  try {
    FrameSplitter::Result got = FrameSplitter::Result::frame;
    while (got == FrameSplitter::Result::frame) got = splitter.next(raw);
    return got == FrameSplitter::Result::cut_short ? raw.begin_offset : -1;
  } catch (const FormatError&) {
    return -1;
  }
}

ExtxyzContents parse_extxyz_text(const std::string& text) {
  std::istringstream in(text);
  try {
    return read_frames(in);
  } catch (const FormatError& error) {
    throw std::runtime_error("extxyz text, line " + std::to_string(error.line) + ": " + error.what);
  }
}

ExtxyzContents read_extxyz_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error("cannot open " + quoted_path(path) + ": " + system_reason(errno));
  ExtxyzContents contents;
  try {
    contents = read_frames(in);
  } catch (const FormatError& error) {
    throw std::runtime_error(quoted_path(path) + ", line " + std::to_string(error.line) + ": " +
                             error.what);
  }
  if (in.bad())
    throw std::runtime_error("cannot read " + quoted_path(path) + ": " + system_reason(errno));
  return contents;
}

}  // namespace otf
