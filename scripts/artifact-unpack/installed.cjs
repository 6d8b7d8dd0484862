// One folder's install of scripts/artifact-unpack/ (scripts/install-artifact-unpack.sh): where its
// node_modules is, and the version of a package there. Only that folder's: no fall-through to a
// node_modules further up, so a script always runs the release its folder's lock names.
"use strict";
const fs = require("fs");
const path = require("path");

function installed(pkgDir) {
  const modules = path.join(path.resolve(pkgDir), "node_modules");
  const version = (name) => {
    try {
      return JSON.parse(fs.readFileSync(path.join(modules, name, "package.json"), "utf8")).version;
    } catch {
      console.error(`no ${name} in ${modules}: run bash scripts/install-artifact-unpack.sh`);
      process.exit(2);
    }
  };
  return { modules, version };
}

module.exports = { installed };
