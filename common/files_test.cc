#include "common/files.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tandem {
namespace {

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

std::string Contents(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Names in `dir`, without "." and "..".
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

bool IsDirectory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

TEST(ErrnoStatusTest, MapsErrnoToCodeAndNamesThePath) {
  EXPECT_TRUE(absl::IsNotFound(ErrnoStatus("cannot open", "/x", ENOENT)));
  EXPECT_TRUE(absl::IsNotFound(ErrnoStatus("cannot open", "/x", ENOTDIR)));
  EXPECT_TRUE(absl::IsPermissionDenied(ErrnoStatus("cannot open", "/x", EACCES)));
  const absl::Status other = ErrnoStatus("cannot write", "/a/b", EIO);
  EXPECT_TRUE(absl::IsUnavailable(other));
  EXPECT_EQ(other.message(), std::string("cannot write '/a/b': ") + std::strerror(EIO));
}

TEST(MakeDirectoriesTest, CreatesMissingParentsAndAcceptsExisting) {
  const std::string path = TempDir() + "/mkdirs/a/b/c";
  ASSERT_TRUE(MakeDirectories(path).ok());
  EXPECT_TRUE(IsDirectory(TempDir() + "/mkdirs/a/b"));
  EXPECT_TRUE(IsDirectory(path));
  EXPECT_TRUE(MakeDirectories(path).ok());  // Already there.
  EXPECT_TRUE(MakeDirectories(path + "/").ok());
}

TEST(MakeDirectoriesTest, RejectsEmptyPathAndAFileInTheWay) {
  EXPECT_TRUE(absl::IsInvalidArgument(MakeDirectories("")));
  const std::string file = TempDir() + "/plain_file";
  std::ofstream(file) << "x";
  EXPECT_TRUE(absl::IsFailedPrecondition(MakeDirectories(file)));
  // A file as a parent: mkdir of the child fails with ENOTDIR.
  EXPECT_FALSE(MakeDirectories(file + "/child").ok());
}

TEST(WriteFileAtomicallyTest, ReplacesContentsAndLeavesNoTemporaryFile) {
  const std::string dir = TempDir() + "/atomic";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  const std::string path = dir + "/value";
  ASSERT_TRUE(WriteFileAtomically(path, "first, longer contents").ok());
  EXPECT_EQ(Contents(path), "first, longer contents");
  ASSERT_TRUE(WriteFileAtomically(path, std::string("sec\0nd", 6)).ok());
  EXPECT_EQ(Contents(path), std::string("sec\0nd", 6));
  ASSERT_TRUE(WriteFileAtomically(path, "").ok());
  EXPECT_EQ(Contents(path), "");
  EXPECT_EQ(Entries(dir), std::vector<std::string>{"value"});
}

TEST(WriteFileAtomicallyTest, FailsInAMissingDirectory) {
  const absl::Status s = WriteFileAtomically(TempDir() + "/no/such/dir/value", "x");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find("cannot create"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace tandem
