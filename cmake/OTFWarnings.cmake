# Warnings and sanitizers for OTF-Torch's own targets (never for third-party code).
function(otf_target_defaults target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(OTF_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

if(OTF_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
