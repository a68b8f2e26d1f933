# brine_library(NAME SOURCES ... DEPS ...): one static library per module under src/.
function(brine_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(brine_${name} STATIC ${ARG_SOURCES})
  target_include_directories(brine_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(brine_${name} PUBLIC ${ARG_DEPS})
  brine_warnings(brine_${name})
endfunction()

# brine_test(NAME SOURCES ... DEPS ...): a GoogleTest binary registered with CTest.
function(brine_test name)
  if(NOT BRINE_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  brine_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120)
endfunction()

function(brine_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
endfunction()

if(BRINE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
