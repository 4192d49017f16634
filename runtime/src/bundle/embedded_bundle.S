/* Embeds the default bundle built from manifest/catalog.json (path given by the build). */
  .section .rodata.cubinrt_bundle,"a"
  .balign 64
  .globl cubinrt_embedded_bundle_begin
  .hidden cubinrt_embedded_bundle_begin
cubinrt_embedded_bundle_begin:
  .incbin CUBINRT_BUNDLE_PATH
cubinrt_embedded_bundle_end:
  .balign 8
  .globl cubinrt_embedded_bundle_size
  .hidden cubinrt_embedded_bundle_size
cubinrt_embedded_bundle_size:
  .quad cubinrt_embedded_bundle_end - cubinrt_embedded_bundle_begin
  .section .note.GNU-stack,"",@progbits
