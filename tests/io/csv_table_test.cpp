#include "seqmix/io/csv_table.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "seqmix/io/error.h"
#include "support/test_support.h"

namespace seqmix {
namespace {
namespace fs = std::filesystem;

// A fresh directory for this test's files.
fs::path temp_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  fs::path dir = fs::temp_directory_path() / ("seqmix_csv_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string write(const fs::path& dir, const std::string& name, const std::string& text) {
  const fs::path p = dir / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

// The message of the Error that reading text as a CSV file throws ("" if it throws none).
std::string read_error(const std::string& text, const CsvReadOptions& options = {{"date"}}) {
  const std::string path = write(temp_dir(), "bad.csv", text);
  try {
    read_csv_table(path, options);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
    EXPECT_NE(message.find(path), std::string::npos) << "the file is not named: " << message;
    return message;
  }
  return "";
}

TEST(CsvTable, ReadsNumericColumnsAndSkipsTheDateColumn) {
  const std::string path = write(temp_dir(), "t.csv", "date,a,b\n2020-01-01 00:00:00,1,2.5\n2020-01-01 01:00:00,-3,4e2\n");
  const CsvTable t = read_csv_table(path, {{"date"}});
  EXPECT_EQ(t.columns, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(t.rows(), 2);
  ASSERT_EQ(t.cols(), 2);
  EXPECT_EQ(t.at(0, 0), 1.0);
  EXPECT_EQ(t.at(0, 1), 2.5);
  EXPECT_EQ(t.at(1, 0), -3.0);
  EXPECT_EQ(t.at(1, 1), 400.0);
}

TEST(CsvTable, AcceptsCrlfByteOrderMarkSpacesPlusSignsAndTrailingBlankLines) {
  const CsvTable t = parse_csv_table("\xEF\xBB\xBFx, y\r\n 1 ,+2\r\n3,\t-0.5\r\n\r\n\n", "mem.csv");
  EXPECT_EQ(t.columns, (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(t.rows(), 2);
  EXPECT_EQ(t.at(0, 1), 2.0);
  EXPECT_EQ(t.at(1, 1), -0.5);
}

TEST(CsvTable, TextColumnsAreDroppedWhereverTheyAreAndAbsentOnesAreFine) {
  const CsvTable t = parse_csv_table("a,label,b\n1,x,2\n", "mem.csv", {{"label", "date"}});
  EXPECT_EQ(t.columns, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(t.values, (std::vector<double>{1, 2}));
}

TEST(CsvTable, MissingFileAndDirectoryAreClearErrors) {
  const fs::path dir = temp_dir();
  try {
    read_csv_table((dir / "absent.csv").string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "absent.csv").string() + ": the file does not exist");
  }
  try {
    read_csv_table(dir.string());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

TEST(CsvTable, BadInputsNameTheFileLineAndColumn) {
  EXPECT_NE(read_error("").find("the file is empty"), std::string::npos);
  EXPECT_NE(read_error("\n\n").find("the file is empty"), std::string::npos);
  EXPECT_NE(read_error("date,a\n").find("a header but no data rows"), std::string::npos);
  EXPECT_NE(read_error("\ndate,a\n1,2\n").find("line 1: the header line is empty"), std::string::npos);
  EXPECT_NE(read_error("date,a,,b\nd,1,2,3\n").find("line 1, column 3: the header has an empty column name"),
            std::string::npos);
  EXPECT_NE(read_error("a,b,a\n1,2,3\n").find("line 1, column 3: column name 'a' already names column 1"),
            std::string::npos);
  EXPECT_NE(read_error("date\nx\n").find("names no numeric column"), std::string::npos);
  EXPECT_NE(read_error("date,a,b\nd,1,2\nd,3\n").find("line 3 has 2 cells, but the header has 3"), std::string::npos);
  EXPECT_NE(read_error("date,a,b\nd,1,2,4\n").find("line 2 has 4 cells, but the header has 3"), std::string::npos);
  EXPECT_NE(read_error("date,a,b\nd,1,2\nd,abc,2\n").find("line 3, column 2 ('a'): 'abc' is not a number"),
            std::string::npos);
  EXPECT_NE(read_error("date,a,b\nd,1,1.5x\n").find("line 2, column 3 ('b'): '1.5x' is not a number"), std::string::npos);
  EXPECT_NE(read_error("date,a,b\nd,1,\n").find("line 2, column 3 ('b'): the cell is empty"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,NaN\n").find("line 2, column 2 ('a'): 'NaN' is not a finite number"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,nan\n").find("'nan' is not a finite number"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,-inf\n").find("'-inf' is not a finite number"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,1e999\n").find("'1e999' is out of the range of a double"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,+-1\n").find("'+-1' is not a number"), std::string::npos);
  EXPECT_NE(read_error("date,a\nd,1\n\nd,2\n").find("line 3 is empty"), std::string::npos);
  // Control bytes and NULs in a cell are shown as '?' so that the message stays one printable line.
  EXPECT_NE(read_error(std::string("date,a\nd,1\x01\r\x00z\n", 15)).find("'1???z' is not a number"), std::string::npos);
}

// Random short texts over CSV's alphabet: every one either parses or throws Error, never anything else.
TEST(CsvTable, NoInputCrashesTheReader) {
  const std::string alphabet = "0123456789.,-+eE\n\r nainfNAx\"\t";
  std::mt19937 rng(3);
  int parsed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = "a,b\n";
    const int length = static_cast<int>(rng() % 40);
    for (int k = 0; k < length; ++k) text += alphabet[rng() % alphabet.size()];
    try {
      const CsvTable t = parse_csv_table(text, "fuzz.csv");
      EXPECT_EQ(t.values.size(), static_cast<size_t>(t.rows() * t.cols()));
      ++parsed;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(CsvTable, ReadsTheRealEtth1File) {
  const std::string path = testing::shared_data("ett/ETTh1.csv");
  if (path.empty()) GTEST_SKIP() << "ETTh1.csv is not in " SEQMIX_SHARED_DATA_DIR "/ett; nothing to read";
  const CsvTable t = read_csv_table(path, {{"date"}});
  EXPECT_EQ(t.rows(), 17420);
  EXPECT_EQ(t.columns, (std::vector<std::string>{"HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"}));
  EXPECT_NEAR(t.at(0, 6), 30.531, 1e-3);  // the first OT reading
}

}  // namespace
}  // namespace seqmix
