# Where built libraries land: the package's lib folder, so `import cute_torch` finds them
# through the RPATH $ORIGIN/lib (for _C) and $ORIGIN (for libraries beside each other).
set(CUTE_PACKAGE_DIR "${CMAKE_SOURCE_DIR}/cute_torch" CACHE PATH "Python package directory")
set(CUTE_LIB_DIR "${CUTE_PACKAGE_DIR}/lib")

function(cute_place_in_package target)
  set_target_properties(${target} PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY "${CUTE_LIB_DIR}"
    BUILD_RPATH "$ORIGIN"
    INSTALL_RPATH "$ORIGIN")
endfunction()
