# brine_library(NAME SOURCES ... DEPS ...): one library per module under src/,
# static in a BRINE_STATIC (release) build and shared in every other build.
# A sanitized debug build links some 40 executables (the unit tests, brine,
# the microbenchmarks); with static libraries each carried its own copy of
# every module it used, ASan's and UBSan's data and relocations with it, up to
# 640 MB an executable and 12 GB a build directory, and a CI machine with less
# free disk than that failed to link. Shared, each module is on disk once.
if(BRINE_STATIC)
  set(BRINE_LIBRARY_TYPE STATIC)
else()
  set(BRINE_LIBRARY_TYPE SHARED)
endif()
#
# The sources are compiled once, into the object library brine_NAME_objects,
# which the library brine_NAME is made of: a unit's own settings (defines,
# include directories it compiles with) go on brine_NAME_objects. A sanitized
# `brine` links every module's objects itself (brine_link_modules), so that
# the thousands of brine processes a test run starts do not each relocate 30
# shared modules.
#
# The presets turn on CMAKE_UNITY_BUILD: each object library compiles its
# sources in batches (CMake's default, eight a unit), a third of the CPU
# one by one took; docs/architecture.md ("Modules") says what that asks of
# a file's local names. A source with COMPILE_DEFINITIONS of its own is
# compiled alone.
function(brine_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(objects brine_${name}_objects)
  add_library(${objects} OBJECT ${ARG_SOURCES})
  if(NOT BRINE_STATIC)
    # As CMake compiles a shared library's own sources (the define names
    # the library being built; brine's code does not read it).
    set_target_properties(${objects} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    target_compile_definitions(${objects} PRIVATE brine_${name}_EXPORTS)
  endif()
  target_include_directories(${objects} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  # A module's objects compile with what its dependencies' objects export
  # (include directories, defines) and carry their external libraries; a
  # module's library links the other modules' libraries.
  set(object_deps)
  foreach(dep IN LISTS ARG_DEPS)
    if(TARGET ${dep}_objects)
      list(APPEND object_deps ${dep}_objects)
    elseif(dep MATCHES "^brine_" AND NOT TARGET ${dep})
      message(FATAL_ERROR "module ${name} depends on ${dep}, which src/CMakeLists.txt adds after "
                          "it: list the modules in dependency order")
    else()
      list(APPEND object_deps ${dep})
    endif()
  endforeach()
  target_link_libraries(${objects} PUBLIC ${object_deps})
  brine_warnings(${objects})
  add_library(brine_${name} ${BRINE_LIBRARY_TYPE})
  target_link_libraries(brine_${name} PUBLIC ${objects} ${ARG_DEPS})
  set_property(GLOBAL APPEND PROPERTY BRINE_MODULE_OBJECTS ${objects})
endfunction()

# brine_link_modules(TARGET): links every module's objects into TARGET (an
# executable) instead of the modules' shared libraries. Measured on the ASan
# build, `brine --version` (perf stat, 10 runs): 107 ms of CPU linked against
# the 30 shared modules, 43 ms with their objects in a position-dependent
# executable (-no-pie: the loader has no relative relocations of its own to
# apply, and copies no pages to apply them).
function(brine_link_modules target)
  get_property(objects GLOBAL PROPERTY BRINE_MODULE_OBJECTS)
  target_link_libraries(${target} PRIVATE ${objects})
  target_link_options(${target} PRIVATE -no-pie)
endfunction()

# brine_test(NAME SOURCES ... DEPS ...): a GoogleTest binary registered with
# CTest as one entry, unit.NAME, that runs all of its tests in one process.
# (One entry per gtest case started ~1,400 ASan processes, most of the suite's
# time.) The binary writes its results as JUnit XML into test-results/, from
# which tests/summary.py lists skips with their reasons and the slowest tests.
# Without BRINE_TESTS the target is still declared, but never built, so that a
# test's own lines (target_compile_definitions ...) need no guard of their own.
#
# COST: the seconds it takes under ASan on 2 cores, for a test run's first
# schedule (CTest starts the costly entries first, and then goes by its own
# measurements); only the slow ones give it.
function(brine_test name)
  cmake_parse_arguments(ARG "" "COST" "SOURCES;DEPS" ${ARGN})
  if(NOT BRINE_TESTS)
    add_executable(${name} EXCLUDE_FROM_ALL ${ARG_SOURCES})
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  brine_warnings(${name})
  add_test(NAME unit.${name}
           COMMAND ${name} --gtest_output=xml:${CMAKE_BINARY_DIR}/test-results/unit.${name}.xml)
  set_tests_properties(unit.${name} PROPERTIES TIMEOUT 900)
  if(ARG_COST)
    set_tests_properties(unit.${name} PROPERTIES COST ${ARG_COST})
  endif()
endfunction()

function(brine_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
  # GCC 12 at -O2 warns -Wrestrict inside libstdc++'s own operator+ on
  # std::string (GCC bug 105651, fixed in 13): screens of false positives in
  # a release build, none of them in brine's code.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
endfunction()

# UBSan without its `alignment` and `null` checks. Those two check every
# member access and reference binding, and each check site keeps a static
# record (source location, type descriptor) with pointers the loader relocates
# at start: 96% of UBSan's data, 340 MB of .data and 12 million relocations
# over the modules, so that every process (each `brine` command a test runs,
# each daemon) spent 2 s and 490 MB before main. A null dereference still
# stops the program with ASan's SEGV report and its stack; a misaligned load
# is harmless on x86-64. Every other UBSan check stays, with its message.
if(BRINE_SANITIZE)
  set(brine_sanitizers -fsanitize=address,undefined -fno-sanitize=alignment,null)
  add_compile_options(${brine_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(${brine_sanitizers})
endif()

# Shared modules' relative relocations packed as DT_RELR (glibc 2.36, binutils
# 2.38): a bitmap instead of 24 bytes per pointer, read at every start.
if(NOT BRINE_STATIC)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" brine_have_relr)
  if(brine_have_relr)
    add_link_options(-Wl,-z,pack-relative-relocs)
  endif()
endif()

# Debug information compressed (zlib) in objects and executables: a third of
# the size on disk; gdb and the sanitizers' symbolizer read it as it is.
# -g1 (line tables and functions, no types or variables), not -g: every
# sanitizer report and gdb backtrace still has its files and lines, and
# compiling costs 18% less (six of the heaviest units, paired: 103.6 s with
# -g, 85.0 s with -g1; -O1 -g1 took 145.6 s, so the ASan build stays at -O0).
# BRINE_DEBUG_INFO=-g for a debugging session that needs variables.
set(BRINE_DEBUG_INFO "-g1" CACHE STRING "Debug information of a Debug build (-g1: lines only; -g: full)")
if(CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(CMAKE_CXX_FLAGS_DEBUG "${BRINE_DEBUG_INFO}")
  add_compile_options(-gz)
  add_link_options(-gz)
endif()

# brine_static_imports(): the targets yaml-cpp, fmt::fmt and spdlog::spdlog
# for BRINE_STATIC, in place of their packages' CMake files, which name only
# the shared libraries. Debian 12 ships yaml-cpp's archive but no archive of
# fmt or spdlog: those two are compiled in from their headers (their
# header-only modes).
function(brine_static_imports)
  find_library(BRINE_YAML_CPP_ARCHIVE NAMES libyaml-cpp.a)
  find_path(BRINE_FMT_INCLUDE_DIR fmt/format.h)
  find_path(BRINE_SPDLOG_INCLUDE_DIR spdlog/spdlog.h)
  if(NOT BRINE_YAML_CPP_ARCHIVE OR NOT BRINE_FMT_INCLUDE_DIR OR NOT BRINE_SPDLOG_INCLUDE_DIR)
    message(FATAL_ERROR "BRINE_STATIC: libyaml-cpp.a, fmt or spdlog headers not found: install "
                        "libyaml-cpp-dev, libfmt-dev and libspdlog-dev (scripts/deps.sh does)")
  endif()
  add_library(yaml-cpp STATIC IMPORTED GLOBAL)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION ${BRINE_YAML_CPP_ARCHIVE})
  add_library(fmt::fmt INTERFACE IMPORTED GLOBAL)
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
  add_library(spdlog::spdlog INTERFACE IMPORTED GLOBAL)
  set_target_properties(spdlog::spdlog PROPERTIES
    INTERFACE_COMPILE_DEFINITIONS SPDLOG_FMT_EXTERNAL
    INTERFACE_LINK_LIBRARIES "fmt::fmt;Threads::Threads")
endfunction()

# brine_forget_libraries_if_link_mode_changed(): library paths are cached, so a
# build directory configured before BRINE_STATIC was switched (or before it
# existed) would keep linking the shared libraries it found then. When the
# mode changes, every cached library path is dropped and found again.
function(brine_forget_libraries_if_link_mode_changed)
  if(BRINE_STATIC)
    set(mode static)
  else()
    set(mode shared)
  endif()
  if(NOT "${BRINE_LIBRARIES_FOUND_FOR}" STREQUAL mode)
    get_cmake_property(variables CACHE_VARIABLES)
    foreach(variable IN LISTS variables)
      get_property(type CACHE ${variable} PROPERTY TYPE)
      if(type STREQUAL "FILEPATH" AND "$CACHE{${variable}}" MATCHES "\\.(a|so)(\\.[0-9.]+)?$")
        unset(${variable} CACHE)
      endif()
    endforeach()
    set(BRINE_LIBRARIES_FOUND_FOR ${mode} CACHE INTERNAL "static or shared: how the cached library paths were found")
  endif()
endfunction()

# brine_use_ccache(): every compile goes through ccache (Debian's package) when
# it is installed and BRINE_CCACHE is on. The cache lives outside the clone
# (ccache's own default, $HOME/.cache/ccache, or $CCACHE_DIR), so a clean clone
# in another directory reuses what any earlier clone of the machine compiled:
# CCACHE_BASEDIR makes the compiler's absolute paths under the clone relative,
# CCACHE_NOHASHDIR leaves the working directory out of the hash, and
# -ffile-prefix-map writes the clone's path as "." into the debug
# information and into __FILE__, so an object compiled in one clone is the
# same bytes as one compiled in another. (A unity batch includes its sources
# by absolute path; with -fdebug-prefix-map alone, every batch whose code
# expands __FILE__ — gtest's assertions, assert() — held the clone's path
# and missed: 40 hits, 49 misses in a clean clone of a warm cache.)
# Measured (.ci/run on a clean clone, warm cache): the
# ASan build's compile goes from about 17 minutes to a few seconds of cache
# hits; scripts/test.sh prints the hit rate.
function(brine_use_ccache)
  option(BRINE_CCACHE "Compile through ccache when it is installed" ON)
  if(NOT BRINE_CCACHE)
    return()
  endif()
  find_program(BRINE_CCACHE_PROGRAM ccache)
  if(NOT BRINE_CCACHE_PROGRAM)
    message(STATUS "ccache not found: compiling without a cache (apt-get install ccache)")
    return()
  endif()
  set(launcher ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} CCACHE_NOHASHDIR=1
               ${BRINE_CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${launcher} PARENT_SCOPE)
  add_compile_options(-ffile-prefix-map=${PROJECT_SOURCE_DIR}=.)
endfunction()
