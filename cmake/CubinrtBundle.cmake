# Turns a kernel catalog (manifest/catalog.json format) into cubins and one packed bundle.
#
#   cubinrt_add_bundle(<target> CATALOG <catalog.json> OUTPUT <bundle file> [PACK_TOOL <target>])
#
# The catalog is expanded in one place, the C++ catalog code: catalog-expand writes, for each
# family and arch, one translation unit that includes the family's kernel source once per variant
# (each in its own namespace, with the variant's macros), and nvcc compiles it into one cubin that
# holds all of that unit's kernels. The front end reads the CUDA headers once a unit instead of
# once a variant. This file reads from the catalog only which units exist (each family's name,
# source, include directories and the archs its groups name); it never expands axes. The pack
# step (PACK_TOOL pack, default cubin-manifest-stage0) expands the catalog again through the same
# code and fails unless every variant's kernel is in its unit's cubin and no other kernel is.

# _cubinrt_json_list(<out> <json> <key path...>): a JSON array's elements as a CMake list.
function(_cubinrt_json_list out json)
  string(JSON n ERROR_VARIABLE err LENGTH "${json}" ${ARGN})
  set(items "")
  if(NOT err AND n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON item GET "${json}" ${ARGN} ${i})
      list(APPEND items "${item}")
    endforeach()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

function(cubinrt_add_bundle target)
  cmake_parse_arguments(ARG "" "CATALOG;OUTPUT;PACK_TOOL" "" ${ARGN})
  if(NOT ARG_PACK_TOOL)
    set(ARG_PACK_TOOL cubin-manifest-stage0)
  endif()
  file(READ "${ARG_CATALOG}" catalog)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ARG_CATALOG}")
  set(cubin_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.cubins")
  set(unit_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.units")
  # A second build of the same checkout (the sanitizer build) can pack the cubins the first one
  # compiled instead of compiling them again: CUBINRT_REUSE_CUBINS_FROM=<first build dir>.
  set(reuse "")
  if(CUBINRT_REUSE_CUBINS_FROM)
    file(RELATIVE_PATH rel "${PROJECT_BINARY_DIR}" "${CMAKE_CURRENT_BINARY_DIR}")
    set(reuse "${CUBINRT_REUSE_CUBINS_FROM}/${rel}/${target}.cubins")
    set(cubin_dir "${reuse}")
  endif()
  file(MAKE_DIRECTORY "${cubin_dir}" "${unit_dir}")
  set(cubins "")

  string(JSON nfam LENGTH "${catalog}" families)
  math(EXPR lastfam "${nfam} - 1")
  foreach(f RANGE ${lastfam})
    string(JSON family GET "${catalog}" families ${f} name)
    string(JSON source GET "${catalog}" families ${f} source)
    _cubinrt_json_list(includes "${catalog}" families ${f} include)
    set(source "${PROJECT_SOURCE_DIR}/${source}")
    # Everything a unit includes: the source, the headers beside it (those every family shares,
    # such as grid_dependency.cuh) and in its folder (its main loops), its include directories'
    # headers (its ABI) and the dtype table.
    get_filename_component(source_name "${source}" NAME_WE)
    get_filename_component(source_dir "${source}" DIRECTORY)
    file(GLOB deps CONFIGURE_DEPENDS "${source_dir}/${source_name}/*.cuh" "${source_dir}/*.cuh")
    set(include_flags "-I${PROJECT_SOURCE_DIR}/runtime/include")
    foreach(inc IN LISTS includes)
      list(APPEND include_flags "-I${PROJECT_SOURCE_DIR}/${inc}")
      file(GLOB inc_deps CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${inc}/*.h" "${PROJECT_SOURCE_DIR}/${inc}/*.cuh")
      list(APPEND deps ${inc_deps})
    endforeach()
    string(JSON ngroups LENGTH "${catalog}" families ${f} groups)
    set(archs "")
    if(ngroups GREATER 0)  # none: catalog-expand and pack refuse the family, naming it
      math(EXPR lastgroup "${ngroups} - 1")
      foreach(g RANGE ${lastgroup})
        _cubinrt_json_list(group_archs "${catalog}" families ${f} groups ${g} arch)
        list(APPEND archs ${group_archs})
      endforeach()
    endif()
    list(REMOVE_DUPLICATES archs)
    foreach(arch IN LISTS archs)
      string(REGEX REPLACE "^sm_" "" sm "${arch}")
      set(unit "${family}.${arch}")
      set(out "${cubin_dir}/${unit}.cubin")
      list(APPEND cubins "${out}")
      if(reuse)
        continue()
      endif()
      set(wrapper "${unit_dir}/${unit}.cu")
      # Rewritten only when its text changes, so a rebuilt catalog-expand recompiles nothing.
      add_custom_command(
        OUTPUT "${wrapper}"
        COMMAND catalog-expand --catalog "${ARG_CATALOG}" --root "${PROJECT_SOURCE_DIR}" --unit "${unit}" --output "${wrapper}"
        DEPENDS "${ARG_CATALOG}" catalog-expand
        COMMENT "catalog-expand ${unit}"
        VERBATIM)
      add_custom_command(
        OUTPUT "${out}"
        COMMAND "${CMAKE_CUDA_COMPILER}" -cubin -std=c++17 -O3 -diag-suppress 177
                "-gencode=arch=compute_${sm},code=sm_${sm}" ${include_flags} "${wrapper}" -o "${out}"
        DEPENDS "${wrapper}" "${source}" ${deps} "${PROJECT_SOURCE_DIR}/runtime/include/cubinrt/dtypes.h"
        COMMENT "nvcc ${unit}"
        VERBATIM)
    endforeach()
  endforeach()

  list(LENGTH cubins count)
  if(reuse)
    # Packing fails, naming the variant, if the first build lacks one of these cubins.
    set(cubins "")
  endif()
  message(STATUS "cubinrt: ${target}: ${count} cubins (one a family and arch) from ${ARG_CATALOG}")
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND ${ARG_PACK_TOOL} pack --catalog "${ARG_CATALOG}" --cubin-dir "${cubin_dir}" --output "${ARG_OUTPUT}"
    DEPENDS ${cubins} "${ARG_CATALOG}" ${ARG_PACK_TOOL}
    COMMENT "pack ${target}: ${count} cubins"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${ARG_OUTPUT}")
  set(${target}_CUBIN_DIR "${cubin_dir}" PARENT_SCOPE)
endfunction()
