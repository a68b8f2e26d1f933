#include "base/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace brine::base {
namespace {

// Resident KiB of the mapping that starts at `at`, from /proc/self/smaps.
long rss_kib_of(const void* at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    unsigned long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx ", &begin, &end) == 2 && line.find(' ') < 40) {
      in = begin == reinterpret_cast<uintptr_t>(at);
      continue;
    }
    if (in && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

class MappedFile : public ::testing::Test {
 protected:
  static constexpr size_t k_size = 256 * 1024;

  void SetUp() override {
    path_ = dir_.path() + "/data";
    std::string content(k_size, '\0');
    for (size_t i = 0; i < k_size; ++i) content[i] = static_cast<char>('a' + i % 26);
    std::ofstream(path_, std::ios::binary) << content;
    fd_ = ::open(path_.c_str(), O_RDONLY);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override { ::close(fd_); }

  // Sums every byte, so that every page is touched.
  static long touch(const char* p) {
    long sum = 0;
    for (size_t i = 0; i < k_size; ++i) sum += p[i];
    return sum;
  }

  test::temp_dir dir_;
  std::string path_;
  int fd_ = -1;
};

TEST_F(MappedFile, CleanReadOnlyPagesAreDroppedAndReadBackUnchanged) {
  void* m = ::mmap(nullptr, k_size, PROT_READ, MAP_PRIVATE, fd_, 0);
  ASSERT_NE(m, MAP_FAILED);
  const char* p = static_cast<const char*>(m);
  long sum = touch(p);
  ASSERT_GT(rss_kib_of(m), 0);

  released_pages r = release_clean_file_pages();
  EXPECT_GE(r.mappings, 1u);
  EXPECT_GE(r.bytes, k_size);
  EXPECT_EQ(rss_kib_of(m), 0);
  EXPECT_EQ(touch(p), sum);  // faulted back in from the page cache
  ::munmap(m, k_size);
}

TEST_F(MappedFile, PrivatelyModifiedPagesAreKept) {
  // Like relocated data: written while writable, then made read-only.
  void* m = ::mmap(nullptr, k_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* p = static_cast<char*>(m);
  p[0] = 'Z';
  p[k_size - 1] = 'Y';
  ASSERT_EQ(::mprotect(m, k_size, PROT_READ), 0);
  long before = rss_kib_of(m);

  release_clean_file_pages();
  EXPECT_EQ(p[0], 'Z');
  EXPECT_EQ(p[k_size - 1], 'Y');
  EXPECT_EQ(rss_kib_of(m), before);
  ::munmap(m, k_size);
}

}  // namespace
}  // namespace brine::base
