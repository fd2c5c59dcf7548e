#include "seqmix/io/csv_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <string_view>

#include "seqmix/io/atomic_file.h"
#include "seqmix/io/error.h"

namespace seqmix {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A cell as it may appear inside a one-line message: printable ASCII only, at most 32 characters.
std::string shown(std::string_view cell) {
  std::string out = "'";
  for (size_t i = 0; i < cell.size() && i < 32; ++i) out += (cell[i] >= 0x20 && cell[i] < 0x7f) ? cell[i] : '?';
  return out + (cell.size() > 32 ? "...'" : "'");
}

std::vector<std::string_view> split_cells(std::string_view line, char delimiter) {
  std::vector<std::string_view> cells;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    cells.push_back(trim(line.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start)));
    if (end == std::string_view::npos) return cells;
    start = end + 1;
  }
}

// Lines without their terminators ("\n" or "\r\n"); a final terminator does not open another line.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

bool blank(std::string_view line) { return trim(line).empty(); }

}  // namespace

CsvTable parse_csv_table(const std::string& text, const std::string& source, const CsvReadOptions& options) {
  std::string_view body(text);
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);  // UTF-8 byte-order mark
  const std::vector<std::string_view> lines = split_lines(body);
  if (lines.empty() || std::all_of(lines.begin(), lines.end(), blank))
    throw Error(source + ": the file is empty (a header line of column names is expected)");
  if (blank(lines[0])) throw Error(source + ": line 1: the header line is empty");

  const std::vector<std::string_view> header = split_cells(lines[0], options.delimiter);
  CsvTable table;
  std::vector<bool> numeric(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    const std::string name(header[c]);
    const std::string where = source + ": line 1, column " + std::to_string(c + 1);
    if (name.empty()) throw Error(where + ": the header has an empty column name");
    for (size_t prior = 0; prior < c; ++prior)
      if (header[prior] == header[c])
        throw Error(where + ": column name " + shown(name) + " already names column " + std::to_string(prior + 1));
    const auto& text_columns = options.text_columns;
    numeric[c] = std::find(text_columns.begin(), text_columns.end(), name) == text_columns.end();
    if (numeric[c]) table.columns.push_back(name);
  }
  if (table.columns.empty()) throw Error(source + ": line 1: the header names no numeric column");

  size_t last = lines.size();
  while (last > 1 && blank(lines[last - 1])) --last;  // trailing blank lines hold nothing
  if (last == 1) throw Error(source + ": the file has a header but no data rows");
  table.values.reserve((last - 1) * table.columns.size());
  for (size_t l = 1; l < last; ++l) {
    const std::string line_name = source + ": line " + std::to_string(l + 1);
    if (blank(lines[l])) throw Error(line_name + " is empty (rows must not be interrupted by blank lines)");
    const std::vector<std::string_view> cells = split_cells(lines[l], options.delimiter);
    if (cells.size() != header.size())
      throw Error(line_name + " has " + std::to_string(cells.size()) + " cells, but the header has " +
                  std::to_string(header.size()));
    for (size_t c = 0; c < cells.size(); ++c) {
      if (!numeric[c]) continue;
      const std::string_view cell = cells[c];
      const std::string where = line_name + ", column " + std::to_string(c + 1) + " (" + shown(header[c]) + ")";
      if (cell.empty()) throw Error(where + ": the cell is empty");
      // from_chars takes no leading '+'; a second sign after it stays an error.
      const char* first = cell.data() + (cell.size() > 1 && cell[0] == '+' && cell[1] != '-' ? 1 : 0);
      const char* end = cell.data() + cell.size();
      double value = 0;
      const auto [stop, error] = std::from_chars(first, end, value);
      if (error == std::errc::result_out_of_range) throw Error(where + ": " + shown(cell) + " is out of the range of a double");
      if (error != std::errc() || stop != end) throw Error(where + ": " + shown(cell) + " is not a number");
      if (!std::isfinite(value)) throw Error(where + ": " + shown(cell) + " is not a finite number");
      table.values.push_back(value);
    }
  }
  return table;
}

CsvTable read_csv_table(const std::string& path, const CsvReadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": the file does not exist");
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a CSV file");
  return parse_csv_table(read_file(path), path, options);
}

}  // namespace seqmix
