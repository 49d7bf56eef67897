# Writes OUTPUT, a C++ source defining `const char* NAME()` (in namespace NAMESPACE) that returns
# the text of INPUT. Run at build time.
file(READ ${INPUT} text)
file(WRITE ${OUTPUT}.tmp "// Generated from ${INPUT} by cmake/EmbedText.cmake. Do not edit.
namespace ${NAMESPACE} {
const char* ${NAME}() {
  return R\"spheret_text(${text})spheret_text\";
}
}  // namespace ${NAMESPACE}
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
