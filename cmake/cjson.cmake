# cJSON, the JSON parser of the model descriptions and safetensors headers (src/net/, src/io/).
# Found in this order; the first that works wins:
#   1. VOXCONV_CJSON_PREFIX, when set: only that prefix (include/cjson/cJSON.h, lib*/libcjson.*).
#   2. find_package(cJSON CONFIG): Debian's libcjson-dev ships cJSONConfig.cmake.
#   3. pkg-config's libcjson.
#   4. a plain search of CMAKE_PREFIX_PATH, the usual places and .deps/usr (the prefix
#      bench/deps/fetch_cjson unpacks from the Debian packages, whose absolute-path config
#      files it drops). The build tree's programs find it at run time through their RPATH.
#   5. VOXCONV_CJSON_FETCH (default ON): cJSON's release, downloaded (Debian's copy of the
#      upstream tarball, SHA-256 pinned); its one source file is then compiled into voxconv
#      itself, symbols hidden, so consumers need nothing more. VOXCONV_CJSON_BUNDLED=ON skips
#      steps 1-4 and takes this one (a self-contained libvoxconv).
# Results: VOXCONV_CJSON_INCLUDE_DIR (the folder holding cJSON.h), and either
# VOXCONV_CJSON_LIBRARY (full path of the library to link) or VOXCONV_CJSON_SOURCES (cJSON.c).

set(VOXCONV_CJSON_PREFIX "" CACHE PATH "Prefix of the cJSON install to use (empty: search)")
option(VOXCONV_CJSON_FETCH "Download cJSON's release when no installed cJSON is found" ON)
option(VOXCONV_CJSON_BUNDLED "Always compile cJSON's downloaded release into voxconv" OFF)
set(VOXCONV_CJSON_SOURCES "")

function(_vc_cjson_from_target tgt)
  foreach(_p IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_NONE IMPORTED_LOCATION_NOCONFIG
             IMPORTED_LOCATION)
    get_target_property(_loc ${tgt} ${_p})
    if(_loc)
      break()
    endif()
  endforeach()
  get_target_property(_inc ${tgt} INTERFACE_INCLUDE_DIRECTORIES)
  if(_loc AND _inc)
    find_path(VOXCONV_CJSON_INCLUDE_DIR cJSON.h PATHS ${_inc} PATH_SUFFIXES cjson NO_DEFAULT_PATH)
    set(VOXCONV_CJSON_LIBRARY "${_loc}" CACHE FILEPATH "cJSON library" FORCE)
  endif()
endfunction()

# Steps 1-4: an installed cJSON (skipped when VOXCONV_CJSON_BUNDLED asks for the download).
if(NOT VOXCONV_CJSON_BUNDLED)
  if(VOXCONV_CJSON_PREFIX)
    find_path(VOXCONV_CJSON_INCLUDE_DIR cJSON.h PATHS ${VOXCONV_CJSON_PREFIX}/include
              PATH_SUFFIXES cjson NO_DEFAULT_PATH)
    find_library(VOXCONV_CJSON_LIBRARY NAMES cjson PATHS ${VOXCONV_CJSON_PREFIX}/lib
                 ${VOXCONV_CJSON_PREFIX}/lib/${CMAKE_LIBRARY_ARCHITECTURE}
                 ${VOXCONV_CJSON_PREFIX}/lib64 NO_DEFAULT_PATH)
    if(NOT VOXCONV_CJSON_INCLUDE_DIR OR NOT VOXCONV_CJSON_LIBRARY)
      message(FATAL_ERROR "VOXCONV_CJSON_PREFIX=${VOXCONV_CJSON_PREFIX} holds no cJSON "
                          "(include/cjson/cJSON.h and lib*/libcjson)")
    endif()
  endif()

  if(NOT VOXCONV_CJSON_LIBRARY)
    find_package(cJSON CONFIG QUIET)
    if(TARGET cjson)
      _vc_cjson_from_target(cjson)
    endif()
  endif()

  if(NOT VOXCONV_CJSON_LIBRARY)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(VC_PC_CJSON QUIET libcjson)
      if(VC_PC_CJSON_FOUND)
        find_path(VOXCONV_CJSON_INCLUDE_DIR cJSON.h PATHS ${VC_PC_CJSON_INCLUDE_DIRS}
                  PATH_SUFFIXES cjson NO_DEFAULT_PATH)
        find_library(VOXCONV_CJSON_LIBRARY NAMES cjson PATHS ${VC_PC_CJSON_LIBRARY_DIRS}
                     NO_DEFAULT_PATH)
      endif()
    endif()
  endif()

  if(NOT VOXCONV_CJSON_LIBRARY)
    # .deps/usr: where bench/deps/fetch_cjson unpacks it, so that every script building on a
    # machine without cJSON and without network finds it with no option.
    set(_vc_deps ${PROJECT_SOURCE_DIR}/.deps/usr)
    find_path(VOXCONV_CJSON_INCLUDE_DIR cJSON.h PATH_SUFFIXES cjson HINTS ${_vc_deps}/include)
    find_library(VOXCONV_CJSON_LIBRARY NAMES cjson
                 HINTS ${_vc_deps}/lib/${CMAKE_LIBRARY_ARCHITECTURE} ${_vc_deps}/lib)
  endif()
endif()

if(VOXCONV_CJSON_BUNDLED OR NOT VOXCONV_CJSON_LIBRARY OR NOT VOXCONV_CJSON_INCLUDE_DIR)
  if(NOT VOXCONV_CJSON_FETCH)
    message(FATAL_ERROR "cJSON not found: install libcjson-dev (./run.sh deps does), set "
                        "VOXCONV_CJSON_PREFIX, or turn VOXCONV_CJSON_FETCH on")
  endif()
  unset(VOXCONV_CJSON_LIBRARY CACHE)
  unset(VOXCONV_CJSON_INCLUDE_DIR CACHE)
  include(FetchContent)
  # Debian's copy of the upstream v1.7.18 tarball (pinned by hash; the archive keeps released
  # versions in its pool and on snapshot.debian.org). SOURCE_SUBDIR names no folder: cJSON's
  # own build is not added, only its source is used.
  FetchContent_Declare(vc_cjson
    URL http://deb.debian.org/debian/pool/main/c/cjson/cjson_1.7.18.orig.tar.gz
        https://snapshot.debian.org/archive/debian/20240601T000000Z/pool/main/c/cjson/cjson_1.7.18.orig.tar.gz
    URL_HASH SHA256=3aa806844a03442c00769b83e99970be70fbef03735ff898f4811dd03b9f5ee5
    SOURCE_SUBDIR voxconv-none)
  FetchContent_MakeAvailable(vc_cjson)
  set(VOXCONV_CJSON_INCLUDE_DIR ${vc_cjson_SOURCE_DIR})
  set(VOXCONV_CJSON_SOURCES ${vc_cjson_SOURCE_DIR}/cJSON.c)
  message(STATUS "voxconv: cJSON v1.7.18 downloaded, compiled in")
else()
  message(STATUS "voxconv: cJSON ${VOXCONV_CJSON_LIBRARY}")
endif()
