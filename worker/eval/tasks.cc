#include "worker/eval/tasks.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "worker/text/jsonl.h"
#include "worker/text/parquet.h"

namespace spheret::eval {

std::vector<std::string> AllTaskNames() {
  std::vector<std::string> names;
  for (const TaskSpec& task : AllTasks()) names.push_back(task.name);
  return names;
}

absl::StatusOr<std::vector<const TaskSpec*>> FindTasks(const std::vector<std::string>& names) {
  std::vector<const TaskSpec*> found;
  for (const std::string& list : names) {
    for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      const TaskSpec* match = nullptr;
      for (const TaskSpec& task : AllTasks()) {
        if (task.name == name) match = &task;
      }
      if (match == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "unknown task '", name, "' (known: ", absl::StrJoin(AllTaskNames(), ", "), ")"));
      }
      if (std::find(found.begin(), found.end(), match) == found.end()) found.push_back(match);
    }
  }
  if (found.empty()) return absl::InvalidArgumentError("no task named");
  return found;
}

namespace {

using nlohmann::json;

std::string TaskPath(const TaskSpec& task, const std::string& data_dir, const char* extension) {
  return (std::filesystem::path(data_dir) / task.name / (task.split + extension)).string();
}

absl::Status BuildError(const TaskSpec& task, const std::string& where,
                        const absl::Status& status) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, status.message(), " (", task.name, " reads ", task.fields, ")"));
}

absl::Status LoadJsonlDocs(const TaskSpec& task, const std::string& path,
                           std::vector<TaskDoc>* docs) {
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read ", path, " (task ", task.name, ")"));
  train::JsonlReader reader(&in, path, train::kDefaultMaxJsonlLineBytes);
  std::string line;
  for (bool done = false;;) {
    SPHERET_RETURN_IF_ERROR(reader.Next(&line, &done));
    if (done) return absl::OkStatus();
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::Status status = train::CheckJsonlObject(line);  // says why a line is not an object
    TaskDoc built;
    if (status.ok()) status = task.build(json::parse(line, nullptr, false), &built);
    if (!status.ok()) return BuildError(task, reader.Where(), status);
    docs->push_back(std::move(built));
  }
}

// A row is the JSON object its JSONL line would be (train::ReadParquetRows).
absl::Status LoadParquetDocs(const TaskSpec& task, const std::string& path,
                             std::vector<TaskDoc>* docs) {
  return train::ReadParquetRows(path, [&](json& doc, const train::ParquetRow& row) {
    TaskDoc built;
    if (absl::Status status = task.build(doc, &built); !status.ok()) {
      return BuildError(task, train::ParquetWhere(path, row), status);
    }
    docs->push_back(std::move(built));
    return absl::OkStatus();
  });
}

}  // namespace

std::string TaskFile(const TaskSpec& task, const std::string& data_dir) {
  const std::string parquet = TaskPath(task, data_dir, ".parquet");
  std::error_code ec;
  return std::filesystem::exists(parquet, ec) ? parquet : TaskPath(task, data_dir, ".jsonl");
}

absl::Status LoadTaskDocs(const TaskSpec& task, const std::string& data_dir,
                          std::vector<TaskDoc>* docs) {
  const std::string jsonl = TaskPath(task, data_dir, ".jsonl");
  const std::string parquet = TaskPath(task, data_dir, ".parquet");
  std::error_code ec;
  const bool has_jsonl = std::filesystem::exists(jsonl, ec);
  const bool has_parquet = std::filesystem::exists(parquet, ec);
  if (has_jsonl && has_parquet) {
    return absl::InvalidArgumentError(absl::StrCat("task ", task.name, " has two data files, ",
                                                   jsonl, " and ", parquet, ": keep one"));
  }
  if (!has_jsonl && !has_parquet) {
    return absl::NotFoundError(absl::StrCat(
        "no data for task ", task.name, ": expected ", jsonl, " (the ", task.split, " split of ",
        task.dataset, ", one JSON object per line with fields ", task.fields, ") or ", parquet,
        " (a row per document, the same fields as columns)"));
  }
  const std::string& path = has_parquet ? parquet : jsonl;
  SPHERET_RETURN_IF_ERROR(has_parquet ? LoadParquetDocs(task, path, docs)
                                      : LoadJsonlDocs(task, path, docs));
  if (docs->empty()) return absl::InvalidArgumentError(path + ": no documents");
  return absl::OkStatus();
}

}  // namespace spheret::eval
