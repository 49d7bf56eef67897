// Test helper: the store query of one per-layer field's values.
#pragma once

#include <string>

#include "server/domain/records.h"

namespace spheret::store {

// Every value of `field` (of one sublayer unless ""), every layer and step.
inline LayerValueQuery ByField(const std::string& field, const std::string& sublayer = "") {
  LayerValueQuery query;
  query.field = field;
  query.sublayer = sublayer;
  return query;
}

}  // namespace spheret::store
