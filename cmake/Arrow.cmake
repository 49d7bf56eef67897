# Finds Apache Arrow's C++ Arrow and Parquet libraries for Parquet input (`spheret-lm prepare`,
# zero-shot task data). Debian 12 packages no Arrow; PyPI's pyarrow wheel ships both libraries with
# their headers, the way the torch wheel ships LibTorch: `make deps` installs it into .venv, and
# this file finds it there (pyarrow.get_include(), pyarrow.get_library_dirs()), or in an Arrow
# install the user names with -DARROW_ROOT=DIR (DIR/include, DIR/lib). Without either, the build
# goes on without Parquet (worker/text/parquet_absent.cc says how to enable it).
#
# Defines SPHERET_PARQUET_ENABLED and, when ON, spheret::arrow: the include folder (SYSTEM) and
# both libraries, linked by full path (the wheel ships libarrow.so.2600 and libparquet.so.2600
# without unversioned links) with an rpath to their folder.
option(SPHERET_PARQUET "Read Parquet input when Apache Arrow's C++ libraries are found" ON)
set(ARROW_ROOT "" CACHE PATH "An Arrow C++ install (include/, lib/) to use instead of .venv's pyarrow")

set(SPHERET_PARQUET_ENABLED OFF)
set(spheret_arrow_where "")
if(SPHERET_PARQUET AND ARROW_ROOT)
  set(SPHERET_ARROW_INCLUDE "${ARROW_ROOT}/include")
  set(SPHERET_ARROW_LIBDIR "${ARROW_ROOT}/lib")
  set(spheret_arrow_where "ARROW_ROOT=${ARROW_ROOT}")
elseif(SPHERET_PARQUET AND EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  execute_process(
    COMMAND "${PROJECT_SOURCE_DIR}/.venv/bin/python" -c
            "import pyarrow; print(pyarrow.get_include()); print(pyarrow.get_library_dirs()[0])"
    OUTPUT_VARIABLE spheret_pyarrow_paths
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE spheret_pyarrow_result)
  if(spheret_pyarrow_result EQUAL 0)
    string(REPLACE "\n" ";" spheret_pyarrow_paths "${spheret_pyarrow_paths}")
    list(GET spheret_pyarrow_paths 0 SPHERET_ARROW_INCLUDE)
    list(GET spheret_pyarrow_paths 1 SPHERET_ARROW_LIBDIR)
    set(spheret_arrow_where ".venv's pyarrow")
  endif()
endif()

# The newest libarrow/libparquet in the folder: an unversioned link (an ARROW_ROOT install) or the
# wheel's libX.so.NNNN.
function(spheret_find_arrow_library name out)
  file(GLOB found "${SPHERET_ARROW_LIBDIR}/lib${name}.so" "${SPHERET_ARROW_LIBDIR}/lib${name}.so.*")
  list(SORT found COMPARE NATURAL ORDER DESCENDING)
  list(LENGTH found count)
  if(count GREATER 0)
    list(GET found 0 first)
    set(${out} "${first}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

if(spheret_arrow_where)
  spheret_find_arrow_library(arrow SPHERET_ARROW_LIBRARY)
  spheret_find_arrow_library(parquet SPHERET_PARQUET_LIBRARY)
  if(SPHERET_ARROW_LIBRARY AND SPHERET_PARQUET_LIBRARY
     AND EXISTS "${SPHERET_ARROW_INCLUDE}/parquet/arrow/reader.h")
    set(SPHERET_PARQUET_ENABLED ON)
  endif()
endif()

if(SPHERET_PARQUET_ENABLED)
  find_package(OpenSSL REQUIRED)
  add_library(spheret_arrow_lib SHARED IMPORTED)
  set_target_properties(spheret_arrow_lib PROPERTIES IMPORTED_LOCATION "${SPHERET_ARROW_LIBRARY}")
  add_library(spheret_parquet_lib SHARED IMPORTED)
  set_target_properties(spheret_parquet_lib PROPERTIES IMPORTED_LOCATION "${SPHERET_PARQUET_LIBRARY}")
  # The wheel's libparquet exports a whole OpenSSL 3.5 (EVP_*, SSL_*, unversioned). A program
  # that links it and uses OpenSSL (base/sha256.cc) must bind to Debian's libcrypto: the linker
  # binds a symbol to the first shared library that defines it, and the dynamic linker searches the
  # libraries in the order the program needs them, so libcrypto goes first on the link line
  # (link options come before every object and library), kept even where nothing needs it yet.
  # libparquet's own OpenSSL calls then bind to it too; spheret never asks Parquet for
  # encryption, the only use it makes of them (tests/worker/text/parquet_test.cc checks the link).
  add_library(spheret_arrow INTERFACE)
  add_library(spheret::arrow ALIAS spheret_arrow)
  target_include_directories(spheret_arrow SYSTEM INTERFACE "${SPHERET_ARROW_INCLUDE}")
  # One SHELL: group, which CMake does not merge with Torch.cmake's --push-state/--pop-state.
  target_link_options(spheret_arrow INTERFACE
    "SHELL:-Wl,--push-state,--no-as-needed ${OPENSSL_CRYPTO_LIBRARY} -Wl,--pop-state"
    "LINKER:-rpath,${SPHERET_ARROW_LIBDIR}")
  target_link_libraries(spheret_arrow INTERFACE spheret_parquet_lib spheret_arrow_lib)
  file(STRINGS "${SPHERET_ARROW_INCLUDE}/arrow/util/config.h" spheret_arrow_version
       REGEX "define ARROW_VERSION_STRING")
  string(REGEX REPLACE ".*\"(.*)\".*" "\\1" spheret_arrow_version "${spheret_arrow_version}")
  message(STATUS "Parquet input: on (Arrow ${spheret_arrow_version}, ${spheret_arrow_where}: "
                 "${SPHERET_PARQUET_LIBRARY})")
elseif(NOT SPHERET_PARQUET)
  message(STATUS "Parquet input: off (-DSPHERET_PARQUET=OFF)")
else()
  message(STATUS "Parquet input: off (no Apache Arrow: make deps installs pyarrow into .venv, "
                 "or configure with -DARROW_ROOT=DIR)")
endif()
