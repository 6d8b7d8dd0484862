#!/usr/bin/env node
// Zips RECORDS into ZIP the way actions/upload-artifact@v4.6.2 does, through its library's own
// code: the action's findFilesToUpload (src/shared/search.ts, ported below: @actions/glob with the
// action's options, include-hidden-files as gate-mi300x.yml sets it), then what
// @actions/artifact's uploadArtifact does before it sends anything: validateArtifactName,
// validateRootDirectory, getUploadZipSpecification(files, rootDirectory) and
// createZipUploadStream(specification, compressionLevel) (archiver, whose sanitizePath turns every
// `\` of an entry name into `/`). The stream goes to ZIP instead of the blob store.
//   node scripts/artifact-unpack/pack.cjs RECORDS ZIP [PACKAGE_DIR]
// PACKAGE_DIR (default: upload-v4.6.2/ here, mirroring the action's lock) is a folder that
// scripts/install-artifact-unpack.sh installed.
// Prints one last line: RESULT {versions, specification: [[sourcePath, destinationPath]...]}.
"use strict";
const fs = require("fs");
const path = require("path");

const [records, zipPath, pkgDir = path.join(__dirname, "upload-v4.6.2")] = process.argv.slice(2);
if (!records || !zipPath) {
  console.error("usage: pack.cjs RECORDS ZIP [PACKAGE_DIR]");
  process.exit(2);
}
const { modules, version } = require("./installed.cjs").installed(pkgDir);
const versions = {
  artifact: version("@actions/artifact"),
  glob: version("@actions/glob"),
  archiver: version("archiver"),
};
const need = (name) => require(path.join(modules, name));
const glob = need("@actions/glob");
const upload = path.join("@actions", "artifact", "lib", "internal", "upload");
const { validateRootDirectory, getUploadZipSpecification } = need(
  path.join(upload, "upload-zip-specification.js"),
);
const { validateArtifactName } = need(path.join(upload, "path-and-artifact-name-validation.js"));
const { createZipUploadStream } = need(path.join(upload, "zip.js"));

// upload-artifact v4.6.2, src/shared/search.ts: findFilesToUpload for one search path (the
// workflow's `path:` is one folder; several would take the least common ancestor, not ported)
async function findFilesToUpload(searchPath, includeHiddenFiles) {
  const globber = await glob.create(searchPath, {
    followSymbolicLinks: true,
    implicitDescendants: true,
    omitBrokenSymbolicLinks: true,
    excludeHiddenFiles: !includeHiddenFiles,
  });
  const filesToUpload = [];
  for (const found of await globber.glob()) {
    if (!fs.statSync(found).isDirectory()) filesToUpload.push(found);
  }
  const searchPaths = globber.getSearchPaths();
  if (searchPaths.length > 1) throw new Error("pack.cjs takes one search path");
  if (filesToUpload.length === 1 && searchPaths[0] === filesToUpload[0]) {
    return { filesToUpload, rootDirectory: path.dirname(filesToUpload[0]) };
  }
  return { filesToUpload, rootDirectory: searchPaths[0] };
}

(async () => {
  // the workflow's `path: .../records/` (a trailing separator) and `include-hidden-files: true`
  const searchPath = path.resolve(records) + path.sep;
  const { filesToUpload, rootDirectory } = await findFilesToUpload(searchPath, true);
  if (filesToUpload.length === 0) throw new Error(`no files under ${searchPath}`); // if-no-files-found: error
  // @actions/artifact 2.x, lib/internal/upload/upload-artifact.js, up to the upload
  validateArtifactName("tilegate-mi300x-shard-1-1");
  validateRootDirectory(rootDirectory);
  const specification = getUploadZipSpecification(filesToUpload, rootDirectory);
  if (specification.length === 0) throw new Error("empty zip specification");
  const stream = await createZipUploadStream(specification, undefined); // no compression-level
  await new Promise((resolve, reject) => {
    const out = fs.createWriteStream(zipPath);
    stream.on("error", reject);
    out.on("error", reject);
    out.on("finish", resolve);
    stream.pipe(out);
  });
  const spec = specification.map((s) => [s.sourcePath, s.destinationPath]);
  console.log("RESULT " + JSON.stringify({ ...versions, rootDirectory, specification: spec }));
})().catch((e) => {
  console.error(`pack.cjs: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
