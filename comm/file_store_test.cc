// FileStore: values survive across store objects (and so across processes), keys with
// any bytes, waiting, timeouts, fresh directories.
#include "comm/file_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <thread>

namespace tandem {
namespace {

std::string TempParent() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(FileStoreTest, ValuesAreSharedThroughTheDirectory) {
  auto writer = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto reader = FileStore::Open((*writer)->directory());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string binary("\0\1\2\xff", 4);
  ASSERT_TRUE((*writer)->Set("run/rank 0:addr", binary).ok());
  ASSERT_TRUE((*writer)->Set(".hidden", "").ok());
  auto values = (*reader)->Get({".hidden", "run/rank 0:addr"}, absl::ZeroDuration());
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"", binary}));
  ASSERT_TRUE((*writer)->Set("run/rank 0:addr", "new").ok());
  EXPECT_EQ(*(*reader)->GetOne("run/rank 0:addr", absl::ZeroDuration()), "new");
}

TEST(FileStoreTest, FreshDirectoriesAreDistinct) {
  auto a = FileStore::CreateFresh(TempParent());
  auto b = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->directory(), (*b)->directory());
  ASSERT_TRUE((*a)->Set("k", "a").ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded((*b)->GetOne("k", absl::ZeroDuration()).status()));
}

TEST(FileStoreTest, GetWaitsThenTimesOut) {
  auto store = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(store.ok());
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(60));
    ASSERT_TRUE((*store)->Set("late", "v").ok());
  });
  auto value = (*store)->GetOne("late", absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ(*value, "v");

  absl::Time start = absl::Now();
  auto missing = (*store)->Get({"late", "never"}, absl::Milliseconds(100));
  EXPECT_TRUE(absl::IsDeadlineExceeded(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("'never'"), std::string::npos);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(FileStoreTest, RejectsBadKeysValuesAndDirectories) {
  auto store = FileStore::CreateFresh(TempParent());
  ASSERT_TRUE(store.ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*store)->Set("", "x")));
  EXPECT_TRUE(absl::IsInvalidArgument((*store)->Set("k", std::string(kMaxStoreValueBytes + 1, 0))));
  // 200 bytes that each escape to 3 characters do not fit a file name.
  EXPECT_TRUE(absl::IsInvalidArgument((*store)->Set(std::string(200, '/'), "x")));
  std::string file = (*store)->directory() + "/plain_file";
  ASSERT_TRUE((*store)->Set("plain_file", "x").ok());
  EXPECT_FALSE(FileStore::Open(file).ok());
}

}  // namespace
}  // namespace tandem
