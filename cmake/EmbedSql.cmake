# Writes OUTPUT, a C++ source defining spheret::store::kMigrations from the schema/NNNN_*.sql
# files in SCHEMA_DIR, in order. Run at build time by server/store/CMakeLists.txt.
file(GLOB sql_files "${SCHEMA_DIR}/[0-9][0-9][0-9][0-9]_*.sql")
list(SORT sql_files)
set(body "")
foreach(file ${sql_files})
  get_filename_component(name ${file} NAME)
  file(READ ${file} sql)
  string(APPEND body "    {\"${name}\", R\"spheret_sql(${sql})spheret_sql\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp "// Generated from schema/*.sql by cmake/EmbedSql.cmake. Do not edit.
#include \"server/store/migrations.h\"

namespace spheret::store {

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> migrations = {
${body}  };
  return migrations;
}

}  // namespace spheret::store
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
