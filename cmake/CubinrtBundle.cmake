# Turns a kernel catalog (manifest/catalog.json format) into cubins and one packed bundle.
#
#   cubinrt_add_bundle(<target> CATALOG <catalog.json> OUTPUT <bundle file>)
#
# Every variant of the catalog is one `nvcc -cubin` of its family's source with the variant's
# defines; the build runs them in parallel. The pack step (cubin-manifest pack) then reads the
# catalog again, expands it itself and fails unless every variant has its cubin, so this file
# and the C++ catalog expansion cannot silently disagree.

set(CUBINRT_DTYPE_CODE_fp16 1)
set(CUBINRT_DTYPE_CODE_bf16 2)
set(CUBINRT_DTYPE_CODE_fp8_e4m3 3)
set(CUBINRT_DTYPE_CODE_fp8_e5m2 4)

# _cubinrt_json_list(<out> <json> <key path...>): a JSON array's elements as a CMake list.
function(_cubinrt_json_list out json)
  string(JSON n LENGTH "${json}" ${ARGN})
  set(items "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON item GET "${json}" ${ARGN} ${i})
      list(APPEND items "${item}")
    endforeach()
  endif()
  set(${out} "${items}" PARENT_SCOPE)
endfunction()

function(cubinrt_add_bundle target)
  cmake_parse_arguments(ARG "" "CATALOG;OUTPUT" "" ${ARGN})
  file(READ "${ARG_CATALOG}" catalog)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${ARG_CATALOG}")
  set(cubin_dir "${CMAKE_CURRENT_BINARY_DIR}/${target}.cubins")
  # A second build of the same checkout (the sanitizer build) can pack the cubins the first one
  # compiled instead of compiling them again: CUBINRT_REUSE_CUBINS_FROM=<first build dir>.
  set(reuse "")
  if(CUBINRT_REUSE_CUBINS_FROM)
    file(RELATIVE_PATH rel "${PROJECT_BINARY_DIR}" "${CMAKE_CURRENT_BINARY_DIR}")
    set(reuse "${CUBINRT_REUSE_CUBINS_FROM}/${rel}/${target}.cubins")
    set(cubin_dir "${reuse}")
  endif()
  file(MAKE_DIRECTORY "${cubin_dir}")
  set(cubins "")

  string(JSON nfam LENGTH "${catalog}" families)
  math(EXPR lastfam "${nfam} - 1")
  foreach(f RANGE ${lastfam})
    string(JSON family GET "${catalog}" families ${f} name)
    string(JSON source GET "${catalog}" families ${f} source)
    string(JSON symbol_pattern GET "${catalog}" families ${f} symbol)
    set(source "${PROJECT_SOURCE_DIR}/${source}")
    # The headers beside the source (its main loops) are part of every variant too.
    get_filename_component(source_name "${source}" NAME_WE)
    get_filename_component(source_dir "${source}" DIRECTORY)
    file(GLOB source_headers CONFIGURE_DEPENDS "${source_dir}/${source_name}/*.cuh")
    string(JSON ngroups LENGTH "${catalog}" families ${f} groups)
    math(EXPR lastgroup "${ngroups} - 1")
    foreach(g RANGE ${lastgroup})
      _cubinrt_json_list(archs "${catalog}" families ${f} groups ${g} arch)
      _cubinrt_json_list(head_dims "${catalog}" families ${f} groups ${g} head_dim)
      _cubinrt_json_list(q_dtypes "${catalog}" families ${f} groups ${g} q_dtype)
      _cubinrt_json_list(kv_dtypes "${catalog}" families ${f} groups ${g} kv_dtype)
      _cubinrt_json_list(page_sizes "${catalog}" families ${f} groups ${g} page_size)
      foreach(arch IN LISTS archs)
        string(REGEX REPLACE "^sm_" "" sm "${arch}")
        foreach(hd IN LISTS head_dims)
          foreach(q IN LISTS q_dtypes)
            foreach(kv_decl IN LISTS kv_dtypes)
              set(kv "${kv_decl}")
              if(kv STREQUAL "same_as_q")
                set(kv "${q}")
              endif()
              foreach(ps IN LISTS page_sizes)
                set(id "${family}.${arch}.hd${hd}.${q}.${kv}.p${ps}")
                string(REPLACE "{head_dim}" "${hd}" sym "${symbol_pattern}")
                string(REPLACE "{q_dtype}" "${q}" sym "${sym}")
                string(REPLACE "{kv_dtype}" "${kv}" sym "${sym}")
                string(REPLACE "{page_size}" "${ps}" sym "${sym}")
                set(out "${cubin_dir}/${id}.cubin")
                list(APPEND cubins "${out}")
                if(reuse)
                  continue()
                endif()
                add_custom_command(
                  OUTPUT "${out}"
                  COMMAND "${CMAKE_CUDA_COMPILER}" -cubin -std=c++17 -O3 -diag-suppress 177
                          "-gencode=arch=compute_${sm},code=sm_${sm}"
                          "-I${PROJECT_SOURCE_DIR}/runtime/include"
                          -DCUBINRT_HEAD_DIM=${hd}
                          -DCUBINRT_Q_DTYPE=${CUBINRT_DTYPE_CODE_${q}}
                          -DCUBINRT_KV_DTYPE=${CUBINRT_DTYPE_CODE_${kv}}
                          -DCUBINRT_PAGE_SIZE=${ps}
                          -DCUBINRT_KERNEL=${sym}
                          "${source}" -o "${out}"
                  DEPENDS "${source}" ${source_headers} "${PROJECT_SOURCE_DIR}/runtime/include/cubinrt/abi/paged_decode_v1.h"
                  COMMENT "nvcc ${id}"
                  VERBATIM)
              endforeach()
            endforeach()
          endforeach()
        endforeach()
      endforeach()
    endforeach()
  endforeach()

  list(LENGTH cubins count)
  if(reuse)
    # Packing fails, naming the variant, if the first build lacks one of these cubins.
    set(cubins "")
  endif()
  message(STATUS "cubinrt: ${target}: ${count} cubins from ${ARG_CATALOG}")
  add_custom_command(
    OUTPUT "${ARG_OUTPUT}"
    COMMAND cubin-manifest-stage0 pack --catalog "${ARG_CATALOG}" --cubin-dir "${cubin_dir}"
            --output "${ARG_OUTPUT}"
    DEPENDS ${cubins} "${ARG_CATALOG}" cubin-manifest-stage0
    COMMENT "pack ${target}: ${count} cubins"
    VERBATIM)
  add_custom_target(${target} ALL DEPENDS "${ARG_OUTPUT}")
  set(${target}_CUBIN_DIR "${cubin_dir}" PARENT_SCOPE)
endfunction()
