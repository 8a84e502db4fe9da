// A results folder for measurements taken elsewhere (`attnbench append --init`): the manifest a
// sweep of the config would write (machine, build, peaks, config) and the producer's description
// ({"name", "peaks", "peer"}, each optional), checked before anything is made.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attnbench {

struct ProducerFolderRequest {
  std::string path;
  std::string config_path;
  std::vector<std::string> overrides;  // --set KEY=VALUE
  bool cuda = false;                   // the GPU's peaks are measured too
  std::string description_text;        // the producer's JSON object; empty for none
  std::string command;                 // the command line, kept in the manifest
};

// Makes the folder; refuses (std::invalid_argument, one line) a bad config or description, or a
// path that exists and is not an empty folder, so nothing is overwritten.
void make_producer_folder(const ProducerFolderRequest& request);

}  // namespace attnbench
