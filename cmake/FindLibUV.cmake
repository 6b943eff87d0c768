# Finds libuv through pkg-config, falling back to a plain search. Defines LibUV::LibUV.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_LIBUV QUIET libuv)
endif()
find_path(LibUV_INCLUDE_DIR NAMES uv.h HINTS ${PC_LIBUV_INCLUDE_DIRS})
find_library(LibUV_LIBRARY NAMES uv libuv HINTS ${PC_LIBUV_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibUV REQUIRED_VARS LibUV_LIBRARY LibUV_INCLUDE_DIR)
if(LibUV_FOUND AND NOT TARGET LibUV::LibUV)
  add_library(LibUV::LibUV UNKNOWN IMPORTED)
  set_target_properties(LibUV::LibUV PROPERTIES
    IMPORTED_LOCATION ${LibUV_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${LibUV_INCLUDE_DIR})
endif()
mark_as_advanced(LibUV_INCLUDE_DIR LibUV_LIBRARY)
