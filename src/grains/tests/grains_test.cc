#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "grains/core.h"
#include "support/temp_dir.h"

namespace brine::grains {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::string_literals;

const std::string k_fixtures = BRINE_GRAINS_FIXTURES;

// YAML → JSON with PyYAML's (YAML 1.1) reading of plain scalars, so values
// compare as Salt sees them: '12' is a string, 12 an int.
json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      json a = json::array();
      for (const auto& e : n) a.push_back(to_json(e));
      return a;
    }
    case YAML::NodeType::Map: {
      json o = json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  std::string s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted
  static const std::regex null_re("~|null|Null|NULL|");
  static const std::regex true_re("yes|Yes|YES|true|True|TRUE|on|On|ON");
  static const std::regex false_re("no|No|NO|false|False|FALSE|off|Off|OFF");
  static const std::regex int_re("[-+]?(0|[1-9][0-9]*)");
  static const std::regex float_re(R"([-+]?([0-9][0-9]*)?\.[0-9]+([eE][-+]?[0-9]+)?)");
  if (std::regex_match(s, null_re)) return nullptr;
  if (std::regex_match(s, true_re)) return true;
  if (std::regex_match(s, false_re)) return false;
  if (std::regex_match(s, int_re)) return std::stoll(s);
  if (std::regex_match(s, float_re)) return std::stod(s);
  return s;
}

json expected(const std::string& distro) {
  return to_json(YAML::LoadFile(k_fixtures + "/expected/" + distro + ".yaml"));
}

void write(const std::string& path, const std::string& content, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
  ::chmod(path.c_str(), mode);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool is_os_grain(const std::string& key) {
  static const std::set<std::string> keys = {
      "os",         "os_family", "osrelease", "osrelease_info", "osmajorrelease",
      "oscodename", "osfinger",  "osfullname"};
  return keys.contains(key) || key.starts_with("lsb_distrib_");
}

// Every OS-derived grain of `got` equals the fixture's, and the fixture has no
// OS-derived grain that `got` lacks.
void expect_os_grains(const json& got, const json& want) {
  for (const auto& [key, value] : got.items()) {
    if (!is_os_grain(key)) continue;
    ASSERT_TRUE(want.contains(key)) << key << " = " << value << " is not in the fixture";
    EXPECT_EQ(value, want[key]) << key;
  }
  for (const auto& [key, value] : want.items()) {
    if (!is_os_grain(key)) continue;
    EXPECT_TRUE(got.contains(key)) << key << " (" << value << ") is missing";
  }
}

class distro_fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(distro_fixture, OsGrainsMatchSalt) {
  json got = os_grains(fs_root(k_fixtures + "/" + GetParam()));
  json want = expected(GetParam());
  expect_os_grains(got, want);
  for (const auto& [key, value] : got.items()) {
    EXPECT_TRUE(is_os_grain(key)) << "os_grains returned " << key;
  }
}

INSTANTIATE_TEST_SUITE_P(Distros, distro_fixture,
                         ::testing::Values("debian-12", "ubuntu-22", "rocky-9"));

TEST(OsGrains, TypesAreSalts) {
  json g = os_grains(fs_root(k_fixtures + "/ubuntu-22"));
  EXPECT_TRUE(g["osrelease"].is_string());
  EXPECT_TRUE(g["osmajorrelease"].is_number_integer());
  EXPECT_EQ(g["osrelease_info"], json::array({22, 4}));
  EXPECT_TRUE(g["lsb_distrib_release"].is_string());
}

// A fixture tree with only the files given.
json os_of(const std::map<std::string, std::string>& files) {
  test::temp_dir dir;
  for (const auto& [path, content] : files) write(dir.path() + path, content);
  return os_grains(fs_root(dir.path()));
}

TEST(OsGrains, OpenSuseLeapTakesOsFromCpeName) {
  json g =
      os_of({{"/etc/os-release",
              "NAME=\"openSUSE Leap\"\nVERSION=\"15.5\"\nID=\"opensuse-leap\"\n"
              "ID_LIKE=\"suse opensuse\"\nVERSION_ID=\"15.5\"\n"
              "PRETTY_NAME=\"openSUSE Leap 15.5\"\nCPE_NAME=\"cpe:/o:opensuse:leap:15.5\"\n"}});
  EXPECT_EQ(g["os"], "SUSE");
  EXPECT_EQ(g["os_family"], "Suse");
  EXPECT_EQ(g["osfullname"], "Leap");
  EXPECT_EQ(g["osrelease"], "15.5");
  EXPECT_EQ(g["oscodename"], "openSUSE Leap 15.5");
  EXPECT_EQ(g["osfinger"], "Leap-15");
  EXPECT_EQ(g["lsb_distrib_id"], "openSUSE Leap");
}

TEST(OsGrains, LinuxMintMapsThroughShortName) {
  json g = os_of({{"/etc/os-release",
                   "NAME=\"Linux Mint\"\nVERSION=\"21.1 (Vera)\"\nID=linuxmint\n"
                   "ID_LIKE=\"ubuntu debian\"\nPRETTY_NAME=\"Linux Mint 21.1\"\n"
                   "VERSION_ID=\"21.1\"\nVERSION_CODENAME=vera\nUBUNTU_CODENAME=jammy\n"},
                  {"/etc/lsb-release",
                   "DISTRIB_ID=LinuxMint\nDISTRIB_RELEASE=21.1\nDISTRIB_CODENAME=vera\n"
                   "DISTRIB_DESCRIPTION=\"Linux Mint 21.1 Vera\"\n"}});
  EXPECT_EQ(g["os"], "Mint");
  EXPECT_EQ(g["os_family"], "Debian");
  EXPECT_EQ(g["osfullname"], "Linux Mint");
  EXPECT_EQ(g["osfinger"], "Linux Mint-21");
  EXPECT_EQ(g["oscodename"], "vera");
  EXPECT_EQ(g["lsb_distrib_id"], "LinuxMint");
  EXPECT_EQ(g["lsb_distrib_description"], "Linux Mint 21.1 Vera");
}

// Salt's CentOS 7 quirk: the os-release release has no minor number, so Salt
// drops it and takes the most precise version it finds (/etc/centos-release).
TEST(OsGrains, CentOs7TakesReleaseFromCentosRelease) {
  json g = os_of({{"/etc/os-release",
                   "NAME=\"CentOS Linux\"\nVERSION=\"7 (Core)\"\nID=\"centos\"\n"
                   "ID_LIKE=\"rhel fedora\"\nVERSION_ID=\"7\"\n"
                   "PRETTY_NAME=\"CentOS Linux 7 (Core)\"\nCPE_NAME=\"cpe:/o:centos:centos:7\"\n"},
                  {"/etc/centos-release", "CentOS Linux release 7.9.2009 (Core)\n"},
                  {"/etc/redhat-release", "CentOS Linux release 7.9.2009 (Core)\n"}});
  EXPECT_EQ(g["os"], "CentOS");
  EXPECT_EQ(g["os_family"], "RedHat");
  EXPECT_EQ(g["osrelease"], "7.9.2009");
  EXPECT_EQ(g["osrelease_info"], json::array({7, 9, 2009}));
  EXPECT_EQ(g["osmajorrelease"], 7);
  EXPECT_EQ(g["oscodename"], "CentOS Linux 7 (Core)");
  EXPECT_EQ(g["osfinger"], "CentOS Linux-7");
  EXPECT_FALSE(g.contains("lsb_distrib_release"));
}

TEST(OsGrains, NoVersionIdFallsBackToDebianVersion) {
  json g = os_of({{"/etc/os-release",
                   "PRETTY_NAME=\"Debian GNU/Linux trixie/sid\"\nNAME=\"Debian GNU/Linux\"\n"
                   "VERSION_CODENAME=trixie\nID=debian\n"},
                  {"/etc/debian_version", "trixie/sid\n"}});
  EXPECT_EQ(g["os"], "Debian");
  EXPECT_EQ(g["osrelease"], "trixie/sid");
  EXPECT_EQ(g["osrelease_info"], json::array({"trixie/sid"}));
  EXPECT_FALSE(g.contains("osmajorrelease"));
  EXPECT_EQ(g["osfinger"], "Debian-trixie/sid");
  EXPECT_EQ(g["oscodename"], "trixie");
  EXPECT_FALSE(g.contains("lsb_distrib_release"));
}

// _LSB_REGEX stops a value at the first character outside [\w\s.-].
TEST(OsGrains, LsbValueStopsWhereSaltsRegexDoes) {
  json g =
      os_of({{"/etc/os-release", read_text(k_fixtures + "/debian-12/etc/os-release")},
             {"/etc/lsb-release", "DISTRIB_DESCRIPTION=\"Debian GNU/Linux 12 (bookworm)\"\n"}});
  EXPECT_EQ(g["lsb_distrib_description"], "Debian GNU");
  EXPECT_EQ(g["lsb_distrib_id"], "Debian GNU/Linux");  // still from os-release
  EXPECT_EQ(g["lsb_distrib_release"], "12");
}

TEST(OsGrains, OsReleaseQuotesAndEscapes) {
  json g = os_of({{"/etc/os-release",
                   "# comment\nNAME='Foo \\\"Bar\\\" Linux'\nID=foo\nVERSION_ID=\"3.1\n"
                   "PRETTY_NAME=Foo\n"}});
  EXPECT_EQ(g["osfullname"], "Foo \"Bar\" Linux");
  EXPECT_EQ(g["os"], "Foo \"Bar\"");   // " Linux" removed, not in _OS_NAME_MAP
  EXPECT_EQ(g["osrelease"], "\"3.1");  // unbalanced quote kept, as Python's regex does
}

TEST(OsGrains, NoOsReleaseUsesLsbRelease) {
  json g = os_of({{"/etc/lsb-release",
                   "DISTRIB_ID=Ubuntu\nDISTRIB_RELEASE=14.04\nDISTRIB_CODENAME=trusty\n"
                   "DISTRIB_DESCRIPTION=\"Ubuntu 14.04.6 LTS\"\n"}});
  EXPECT_EQ(g["os"], "Ubuntu");
  EXPECT_EQ(g["osfullname"], "Ubuntu");
  EXPECT_EQ(g["osrelease"], "14.04");
  EXPECT_EQ(g["osfinger"], "Ubuntu-14.04");
  EXPECT_EQ(g["os_family"], "Debian");
}

TEST(OsReleaseData, MatchesSalt) {
  EXPECT_EQ(
      osrelease_data("Ubuntu", "Ubuntu", "22.04"),
      json({{"osrelease_info", {22, 4}}, {"osmajorrelease", 22}, {"osfinger", "Ubuntu-22.04"}}));
  EXPECT_EQ(osrelease_data("Debian", "Debian GNU/Linux", "12.7")["osfinger"], "Debian-12");
  EXPECT_EQ(osrelease_data("Fedora", "Fedora Linux", "39")["osfinger"], "Fedora Linux-39");
  json arch = osrelease_data("Arch", "Arch Linux", "rolling");
  EXPECT_EQ(arch["osrelease_info"], json::array({"rolling"}));
  EXPECT_FALSE(arch.contains("osmajorrelease"));
  EXPECT_EQ(arch["osfinger"], "Arch Linux-rolling");
  EXPECT_EQ(osrelease_data("X", "X", "9.4b")["osrelease_info"], json::array({9, "4b"}));
}

const char* k_cpuinfo_x86 =
    "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2690 v4 @ "
    "2.60GHz\nflags\t\t: fpu vme de\n\n"
    "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU E5-2690 v4 @ "
    "2.60GHz\nflags\t\t: fpu vme de\n\n";

TEST(CpuGrains, X86) {
  EXPECT_EQ(cpu_grains(k_cpuinfo_x86),
            json({{"num_cpus", 2},
                  {"cpu_model", "Intel(R) Xeon(R) CPU E5-2690 v4 @ 2.60GHz"},
                  {"cpu_flags", {"fpu", "vme", "de"}}}));
}

TEST(CpuGrains, OtherArchitectures) {
  // aarch64 has no model name: Salt reports "Unknown".
  json arm64 = cpu_grains(
      "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n\n"
      "processor\t: 1\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n");
  EXPECT_EQ(arm64["num_cpus"], 2);
  EXPECT_EQ(arm64["cpu_model"], "Unknown");
  EXPECT_EQ(arm64["cpu_flags"], json::array({"fp", "asimd"}));
  json armv6 = cpu_grains("Processor\t: ARMv6-compatible processor rev 7 (v6l)\n");
  EXPECT_EQ(armv6["cpu_model"], "ARMv6");
  EXPECT_EQ(armv6["num_cpus"], 1);
  json s390 = cpu_grains("vendor_id       : IBM/S390\n# processors    : 4\n");
  EXPECT_EQ(s390["num_cpus"], 4);
  EXPECT_EQ(s390["cpu_model"], "IBM/S390");
  EXPECT_EQ(cpu_grains(""),
            json({{"num_cpus", 0}, {"cpu_model", "Unknown"}, {"cpu_flags", json::array()}}));
}

TEST(MemGrains, FloorMiB) {
  EXPECT_EQ(
      mem_grains("MemTotal:        4009484 kB\nMemFree:  1 kB\nSwapTotal:       2097148 kB\n"),
      json({{"mem_total", 3915}, {"swap_total", 2047}}));
  EXPECT_EQ(mem_grains(""), json({{"mem_total", 0}, {"swap_total", 0}}));
}

TEST(InterfaceGrains, ShapesOfTheFixture) {
  std::vector<interface> ifaces = {
      {.name = "eth0",
       .hwaddr = "52:54:00:12:34:56",
       .inet = {"10.0.2.15"},
       .inet6 = {"fe80::5054:ff:fe12:3456"}},
      {.name = "lo", .hwaddr = "00:00:00:00:00:00", .inet = {"127.0.0.1"}, .inet6 = {"::1"}},
  };
  json got = interface_grains(ifaces);
  json want = expected("debian-12");
  for (const char* key :
       {"ipv4", "ipv6", "ip_interfaces", "ip4_interfaces", "ip6_interfaces", "hwaddr_interfaces"}) {
    EXPECT_EQ(got[key], want[key]) << key;
  }
}

TEST(InterfaceGrains, NumericOrderDuplicatesAndSecondaries) {
  std::vector<interface> ifaces = {
      {.name = "eth0", .inet = {"10.0.0.1"}, .inet6 = {"fe80::1"}, .secondary = {"10.0.0.2"}},
      {.name = "eth1", .inet = {"9.9.9.9", "10.0.0.1"}, .inet6 = {"2001:db8::1", "::1"}},
      {.name = "wg0"},
  };
  json g = interface_grains(ifaces);
  EXPECT_EQ(g["ipv4"], json::array({"9.9.9.9", "10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(g["ipv6"], json::array({"::1", "2001:db8::1", "fe80::1"}));
  EXPECT_EQ(g["ip_interfaces"]["eth0"], json::array({"10.0.0.1", "fe80::1", "10.0.0.2"}));
  EXPECT_EQ(g["ip4_interfaces"]["eth0"], json::array({"10.0.0.1", "10.0.0.2"}));
  EXPECT_EQ(g["ip_interfaces"]["wg0"], json::array());
  EXPECT_FALSE(g["hwaddr_interfaces"].contains("wg0"));
}

TEST(Which, SearchesPathThenSaltsExtras) {
  test::temp_dir dir;
  fs_root root(dir.path());
  write(dir.path() + "/opt/x/bin/tool", "#!/bin/sh\n", 0755);
  write(dir.path() + "/usr/sbin/tool", "#!/bin/sh\n", 0755);
  write(dir.path() + "/usr/sbin/dmidecode", "#!/bin/sh\n", 0755);
  write(dir.path() + "/usr/bin/notexec", "", 0644);
  EXPECT_EQ(which(root, "tool", "/opt/x/bin:/usr/sbin"), "/opt/x/bin/tool");
  EXPECT_EQ(which(root, "dmidecode", "/nowhere"), "/usr/sbin/dmidecode");  // Salt's extra dirs
  EXPECT_EQ(which(root, "notexec", "/usr/bin"), std::nullopt);
  EXPECT_EQ(which(root, "/usr/sbin/tool", ""), "/usr/sbin/tool");
  EXPECT_EQ(which(root, "/usr/bin/notexec", ""), std::nullopt);
}

TEST(InitGrain, AsSaltDetectsIt) {
  {
    test::temp_dir dir;
    fs::create_directories(dir.path() + "/run/systemd/system");
    EXPECT_EQ(init_grain(fs_root(dir.path()), "/usr/bin"), "systemd");
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/proc/1/cmdline", "/sbin/init\0splash\0"s);
    write(dir.path() + "/sbin/init",
          "\x7f"
          "ELF...INIT: SysVinit version 3.06\0"s,
          0755);
    EXPECT_EQ(init_grain(fs_root(dir.path()), "/usr/bin"), "sysvinit");
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/proc/1/cmdline", "/usr/bin/tini\0--\0app\0"s);
    write(dir.path() + "/usr/bin/tini", "", 0755);
    EXPECT_EQ(init_grain(fs_root(dir.path()), "/usr/bin"), "tini");
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/proc/1/cmdline", "runit\0"s);
    EXPECT_EQ(init_grain(fs_root(dir.path()), "/usr/bin"), "runit");
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/proc/1/cmdline", "sleep\0infinity\0"s);
    EXPECT_EQ(init_grain(fs_root(dir.path()), "/usr/bin"), "unknown");
  }
}

// A QEMU/KVM guest as the fixtures describe it.
void write_qemu_dmi(const std::string& root) {
  const std::string d = root + "/sys/class/dmi/id/";
  write(d + "sys_vendor", "QEMU\n");
  write(d + "product_name", "Standard PC (i440FX + PIIX, 1996)\n");
  write(d + "bios_vendor", "SeaBIOS\n");
  write(d + "bios_version", "1.16.2-debian-1.16.2-1\n");
  write(d + "bios_date", "04/01/2014\n");
  write(d + "product_uuid", "2C1F3C3A-6B1E-4A8C-9F7E-0D6A5B4C3E21\n");
  write(d + "product_serial", "\n");
  write(d + "board_name", "\n");
}

const live_facts k_kvm = {.cpuid_hypervisor = true, .cpuid_vendor = "KVMKVMKVM"};

TEST(HwGrains, FromSysfsAsTheFixtureHasThem) {
  test::temp_dir dir;
  write_qemu_dmi(dir.path());
  json hw = hw_grains(fs_root(dir.path()));
  json want = expected("debian-12");
  for (const char* key : {"biosvendor", "biosversion", "biosreleasedate", "manufacturer",
                          "productname", "uuid", "serialnumber"}) {
    EXPECT_EQ(hw[key], want[key]) << key;
  }
  EXPECT_EQ(hw["boardname"], "");
  EXPECT_EQ(hw_grains(fs_root("/nonexistent")), json::object());
}

TEST(DetectVirt, ContainerBeforeVm) {
  test::temp_dir dir;
  write_qemu_dmi(dir.path());
  fs_root root(dir.path());
  EXPECT_EQ(detect_virt(root, k_kvm), "kvm");
  EXPECT_EQ(detect_virt(root, {}), "qemu");  // no CPUID: DMI says QEMU
  EXPECT_EQ(detect_virt(root, {.cpuid_hypervisor = true, .cpuid_vendor = "Microsoft Hv"}),
            "microsoft");
  EXPECT_EQ(detect_virt(root, {.cpuid_hypervisor = true, .cpuid_vendor = "NoSuchVMM"}), "qemu");
  write(dir.path() + "/.dockerenv", "");
  EXPECT_EQ(detect_virt(root, k_kvm), "docker");
  write(dir.path() + "/run/systemd/container", "lxc\n");
  EXPECT_EQ(detect_virt(root, k_kvm), "lxc");

  test::temp_dir bare;
  EXPECT_EQ(detect_virt(fs_root(bare.path()), {}), "none");
  EXPECT_EQ(detect_virt(fs_root(bare.path()), {.cpuid_hypervisor = true, .cpuid_vendor = "?"}),
            "vm-other");
  write(bare.path() + "/sys/class/dmi/id/sys_vendor", "innotek GmbH\n");
  EXPECT_EQ(detect_virt(fs_root(bare.path()), k_kvm), "oracle");  // DMI first for VirtualBox
}

json virtual_of(const std::string& root, const live_facts& live,
                const std::string& path = "/usr/bin") {
  fs_root r(root);
  return virtual_grains(r, live, path, hw_grains(r));
}

TEST(VirtualGrains, KvmGuestThroughSystemdDetectVirt) {
  test::temp_dir dir;
  write_qemu_dmi(dir.path());
  write(dir.path() + "/usr/bin/systemd-detect-virt", "", 0755);
  EXPECT_EQ(virtual_of(dir.path(), k_kvm), json({{"virtual", "kvm"}}));
  EXPECT_EQ(virtual_of(dir.path(), k_kvm)["virtual"], expected("rocky-9")["virtual"]);
}

// Salt's answer depends on which commands are installed; so does ours.
TEST(VirtualGrains, WithoutCommandsSaltSeesLess) {
  test::temp_dir dir;
  write_qemu_dmi(dir.path());
  EXPECT_EQ(virtual_of(dir.path(), k_kvm), json({{"virtual", "physical"}}));
  write(dir.path() + "/usr/sbin/dmidecode", "", 0755);
  EXPECT_EQ(virtual_of(dir.path(), k_kvm), json({{"virtual", "physical"}}));  // not root
  live_facts root_kvm = k_kvm;
  root_kvm.is_root = true;
  EXPECT_EQ(virtual_of(dir.path(), root_kvm), json({{"virtual", "kvm"}}));  // Manufacturer: QEMU
}

TEST(VirtualGrains, Containers) {
  {
    test::temp_dir dir;
    write_qemu_dmi(dir.path());
    write(dir.path() + "/usr/bin/systemd-detect-virt", "", 0755);
    write(dir.path() + "/.dockerenv", "");
    write(dir.path() + "/proc/1/cgroup", "12:pids:/docker/0123abcd\n0::/docker/0123abcd\n");
    EXPECT_EQ(virtual_of(dir.path(), k_kvm),
              json({{"virtual", "container"}, {"virtual_subtype", "Docker"}}));
  }
  {
    // cgroup v2 with a private namespace: /proc/1/cgroup says nothing, and
    // systemd-detect-virt's "docker" is not a value Salt takes.
    test::temp_dir dir;
    write(dir.path() + "/usr/bin/systemd-detect-virt", "", 0755);
    write(dir.path() + "/.dockerenv", "");
    write(dir.path() + "/proc/1/cgroup", "0::/\n");
    EXPECT_EQ(virtual_of(dir.path(), k_kvm), json({{"virtual", "physical"}}));
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/usr/bin/systemd-detect-virt", "", 0755);
    write(dir.path() + "/proc/1/environ", "container=lxc\0TERM=linux\0"s);
    EXPECT_EQ(virtual_of(dir.path(), {}),
              json({{"virtual", "container"}, {"virtual_subtype", "LXC"}}));
  }
  {
    test::temp_dir dir;
    write(dir.path() + "/proc/1/cgroup", "1:name=systemd:/kubepods/besteffort/pod1\n");
    EXPECT_EQ(virtual_of(dir.path(), {}),
              json({{"virtual", "virtual"}, {"virtual_subtype", "kubernetes"}}));
  }
}

TEST(VirtualGrains, HypervisorsByName) {
  auto with_dmi = [](const std::string& vendor, const std::string& product,
                     const live_facts& live) {
    test::temp_dir dir;
    write(dir.path() + "/usr/bin/systemd-detect-virt", "", 0755);
    write(dir.path() + "/sys/class/dmi/id/sys_vendor", vendor + "\n");
    write(dir.path() + "/sys/class/dmi/id/product_name", product + "\n");
    return virtual_of(dir.path(), live);
  };
  EXPECT_EQ(with_dmi("VMware, Inc.", "VMware Virtual Platform", {})["virtual"], "VMware");
  EXPECT_EQ(with_dmi("Microsoft Corporation", "Virtual Machine",
                     {.cpuid_hypervisor = true, .cpuid_vendor = "Microsoft Hv"})["virtual"],
            "VirtualPC");
  EXPECT_EQ(with_dmi("innotek GmbH", "VirtualBox", {})["virtual"], "VirtualBox");
  EXPECT_EQ(with_dmi("Google", "Google Compute Engine", k_kvm)["virtual"], "gce");
  EXPECT_EQ(with_dmi("Amazon EC2", "m5.large", k_kvm),
            json({{"virtual", "Nitro"}, {"virtual_subtype", "Amazon EC2"}}));
  EXPECT_EQ(with_dmi("ASUS", "System Product Name", {})["virtual"], "physical");
  EXPECT_EQ(virtual_of("/nonexistent", {.chroot = true}),
            json({{"virtual", "virtual"}, {"virtual_subtype", "chroot"}}));
}

TEST(Blacklist, GlobsAndRegexes) {
  std::vector<std::string> b = {"ip*", "os_.*", "mem_total"};
  EXPECT_TRUE(blacklisted("ipv4", b));
  EXPECT_TRUE(blacklisted("ip_interfaces", b));
  EXPECT_TRUE(blacklisted("os_family", b));  // as a regular expression
  EXPECT_TRUE(blacklisted("mem_total", b));
  EXPECT_FALSE(blacklisted("os", b));
  EXPECT_FALSE(blacklisted("fqdn_ip4", b));
  EXPECT_FALSE(blacklisted("swap_total", b));
  EXPECT_TRUE(blacklisted("a/b", {"a*"}));       // '*' crosses '/'
  EXPECT_TRUE(blacklisted("a\\b", {"a\\b"}));    // no escapes, as Python's fnmatch
  EXPECT_FALSE(blacklisted("anything", {"("}));  // neither a glob match nor a regex
}

TEST(ApplyCustom, BlacklistThenConfigured) {
  json core = {{"id", "m1"}, {"os", "Debian"}, {"ipv4", {"127.0.0.1"}}, {"ipv6", {"::1"}}};
  EXPECT_EQ(apply_custom(core, {{"os", "Custom"}, {"role", "db"}}, {}),
            json({{"id", "m1"},
                  {"os", "Custom"},
                  {"ipv4", {"127.0.0.1"}},
                  {"ipv6", {"::1"}},
                  {"role", "db"}}));
  EXPECT_EQ(apply_custom(core, nullptr, {"ip*"}), json({{"id", "m1"}, {"os", "Debian"}}));
  EXPECT_EQ(apply_custom(core, {{"ipv4", {"10.0.0.1"}}}, {"ip*"}),
            json({{"id", "m1"}, {"os", "Debian"}, {"ipv4", {"10.0.0.1"}}}));
  EXPECT_THROW(apply_custom(core, json::array({"os"}), {}), std::invalid_argument);
}

// The fixtures' promise: with grains_blacklist ['*'] the configured grains
// are exactly what the minion has.
TEST(ApplyCustom, StarLeavesExactlyTheConfiguredGrains) {
  json core = core_grains({.id = "live", .brine_version = "0.0.0"});
  for (const char* distro : {"debian-12", "ubuntu-22", "rocky-9"}) {
    json configured = expected(distro);
    EXPECT_EQ(apply_custom(core, configured, {"*"}), configured) << distro;
  }
}

// A whole host as a tree: the OS files of the Debian fixture plus the /proc
// and /sys files of the fixture's hardware.
TEST(CoreGrains, FixtureHost) {
  test::temp_dir dir;
  fs::copy(k_fixtures + "/debian-12", dir.path(), fs::copy_options::recursive);
  json want = expected("debian-12");
  std::string flags;
  for (const auto& f : want["cpu_flags"])
    flags += (flags.empty() ? "" : " ") + f.get<std::string>();
  std::string cpu;
  for (int i = 0; i < 2; ++i) {
    cpu += "processor\t: " + std::to_string(i) +
           "\nvendor_id\t: GenuineIntel\nmodel name\t: " + want["cpu_model"].get<std::string>() +
           "\nflags\t\t: " + flags + "\n\n";
  }
  write(dir.path() + "/proc/cpuinfo", cpu);
  write(dir.path() + "/proc/meminfo", "MemTotal:        4009484 kB\nSwapTotal:             0 kB\n");
  write(dir.path() + "/etc/machine-id", want["machine_id"].get<std::string>() + "\n");
  fs::create_directories(dir.path() + "/run/systemd/system");
  write_qemu_dmi(dir.path());

  json g = core_grains({.id = "minion1", .brine_version = "1.2.3", .root = dir.path()});
  expect_os_grains(g, want);
  for (const char* key : {"id", "num_cpus", "cpu_model", "cpu_flags", "mem_total", "swap_total",
                          "machine_id", "init", "biosvendor", "biosversion", "biosreleasedate",
                          "manufacturer", "productname", "uuid", "serialnumber", "ps", "kernel"}) {
    EXPECT_EQ(g[key], want[key]) << key;
  }
#if defined(__x86_64__) && !defined(__ILP32__)
  EXPECT_EQ(g["osarch"], want["osarch"]);
  fs::remove_all(dir.path() + "/etc");
  fs::copy(k_fixtures + "/rocky-9", dir.path(), fs::copy_options::recursive);
  EXPECT_EQ(core_grains({.root = dir.path()})["osarch"], expected("rocky-9")["osarch"]);
#endif
  EXPECT_EQ(g["brineversion"], "1.2.3");
  // The Salt release brine reproduces, as formulas test it.
  EXPECT_EQ(g["saltversion"], "3006.23");
  EXPECT_EQ(g["saltversioninfo"], json::array({3006, 23}));
  EXPECT_EQ(g["pythonversion"][0], 3);
}

bool sorted_by_value(const json& list, int family) {
  std::vector<std::array<unsigned char, 16>> raw;
  for (const auto& a : list) {
    std::array<unsigned char, 16> r{};
    if (::inet_pton(family, a.get<std::string>().c_str(), r.data()) != 1) return false;
    raw.push_back(r);
  }
  return std::is_sorted(raw.begin(), raw.end()) &&
         std::adjacent_find(raw.begin(), raw.end()) == raw.end();
}

// This very machine: values we cannot know in advance are checked for shape.
TEST(CoreGrains, LiveHost) {
  json g = core_grains({.id = "minion-under-test", .brine_version = "9.9.9-test"});

  for (const char* key : {"id",
                          "host",
                          "fqdn",
                          "domain",
                          "nodename",
                          "localhost",
                          "os",
                          "os_family",
                          "osrelease",
                          "oscodename",
                          "osfullname",
                          "osarch",
                          "kernel",
                          "kernelrelease",
                          "kernelversion",
                          "cpuarch",
                          "num_cpus",
                          "cpu_model",
                          "mem_total",
                          "swap_total",
                          "ipv4",
                          "ipv6",
                          "fqdn_ip4",
                          "fqdn_ip6",
                          "ip_interfaces",
                          "hwaddr_interfaces",
                          "init",
                          "virtual",
                          "path",
                          "shell",
                          "lsb_distrib_id",
                          "brineversion"}) {
    EXPECT_TRUE(g.contains(key)) << key;
  }
  EXPECT_EQ(g["id"], "minion-under-test");
  EXPECT_EQ(g["brineversion"], "9.9.9-test");

  struct utsname u {};
  ASSERT_EQ(::uname(&u), 0);
  EXPECT_EQ(g["kernel"], "Linux");
  EXPECT_EQ(g["kernelrelease"], u.release);
  EXPECT_EQ(g["kernelversion"], u.version);
  EXPECT_EQ(g["cpuarch"], u.machine);
  EXPECT_EQ(g["nodename"], u.nodename);
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(g["localhost"], host);

  std::string fqdn = g["fqdn"];
  EXPECT_FALSE(fqdn.empty());
  EXPECT_EQ(g["host"], fqdn.substr(0, fqdn.find('.')));
  EXPECT_EQ(g["domain"],
            fqdn.find('.') == std::string::npos ? "" : fqdn.substr(fqdn.find('.') + 1));

  EXPECT_FALSE(g["os"].get<std::string>().empty());
  EXPECT_FALSE(g["os_family"].get<std::string>().empty());
  EXPECT_FALSE(g["osarch"].get<std::string>().empty());
  if (!g["osrelease"].get<std::string>().empty()) {
    EXPECT_TRUE(g["osrelease_info"].is_array());
    EXPECT_TRUE(g["osfinger"].is_string());
  }
  EXPECT_EQ(os_grains(fs_root("/"))["os"], g["os"]);

  ASSERT_TRUE(g["num_cpus"].is_number_integer());
  EXPECT_EQ(g["num_cpus"].get<int64_t>(),
            static_cast<int64_t>(std::thread::hardware_concurrency()));
  EXPECT_TRUE(g["cpu_model"].is_string());
  EXPECT_TRUE(g["cpu_flags"].is_array());

  struct sysinfo si {};
  ASSERT_EQ(::sysinfo(&si), 0);
  ASSERT_TRUE(g["mem_total"].is_number_integer());
  EXPECT_GT(g["mem_total"].get<int64_t>(), 0);
  EXPECT_EQ(g["mem_total"].get<int64_t>(),
            static_cast<int64_t>(uint64_t{si.totalram} * si.mem_unit / 1024 / 1024));
  ASSERT_TRUE(g["swap_total"].is_number_integer());
  EXPECT_GE(g["swap_total"].get<int64_t>(), 0);

  const json& ipv4 = g["ipv4"];
  EXPECT_NE(std::find(ipv4.begin(), ipv4.end(), "127.0.0.1"), ipv4.end()) << ipv4;
  EXPECT_TRUE(sorted_by_value(ipv4, AF_INET)) << ipv4;
  EXPECT_TRUE(sorted_by_value(g["ipv6"], AF_INET6)) << g["ipv6"];
  EXPECT_TRUE(sorted_by_value(g["fqdn_ip4"], AF_INET)) << g["fqdn_ip4"];
  EXPECT_TRUE(sorted_by_value(g["fqdn_ip6"], AF_INET6)) << g["fqdn_ip6"];
  ASSERT_TRUE(g["ip_interfaces"].contains("lo"));
  const json& lo = g["ip_interfaces"]["lo"];
  EXPECT_NE(std::find(lo.begin(), lo.end(), "127.0.0.1"), lo.end()) << lo;
  EXPECT_EQ(g["hwaddr_interfaces"]["lo"], "00:00:00:00:00:00");
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator("/sys/class/net"))
    names.insert(e.path().filename().string());
  for (const auto& [name, addrs] : g["ip_interfaces"].items()) {
    EXPECT_TRUE(names.contains(name)) << name;
    EXPECT_TRUE(addrs.is_array());
  }

  if (fs::exists("/etc/machine-id")) {
    EXPECT_TRUE(std::regex_match(g["machine_id"].get<std::string>(), std::regex("[0-9a-f]{32}")))
        << g["machine_id"];
  }
  static const std::set<std::string> inits = {"systemd",   "upstart", "sysvinit", "supervisord",
                                              "dumb-init", "tini",    "runit",    "unknown"};
  EXPECT_TRUE(inits.contains(g["init"].get<std::string>())) << g["init"];
  EXPECT_FALSE(g["virtual"].get<std::string>().empty());

  const char* path = std::getenv("PATH");
  EXPECT_EQ(g["path"], path != nullptr ? path : "");
  const char* shell = std::getenv("SHELL");
  EXPECT_EQ(g["shell"], shell != nullptr ? shell : "/bin/sh");
}

}  // namespace
}  // namespace brine::grains
