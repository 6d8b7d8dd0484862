#!/usr/bin/env node
// Unpacks ZIP into DEST the way actions/download-artifact does: its own call,
// artifactClient.downloadArtifact(id, {path, expectedHash, skipDecompress: false}), with no token,
// so @actions/artifact takes its internal path (downloadArtifactInternal: the results service's
// ListArtifacts and GetSignedArtifactURL, then streamExtract into unzip-stream's Extract). A server
// on 127.0.0.1 stands in for the results service and the blob store and serves ZIP.
//   node scripts/artifact-unpack/unpack.cjs ZIP DEST [PACKAGE_DIR]
// PACKAGE_DIR (default: this folder) is a folder here that scripts/install-artifact-unpack.sh
// installed: this one mirrors the pinned release's lock, v4.3.0/ the old one's. Prints one last line: RESULT {versions, outcome}.
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const http = require("http");
const path = require("path");
const { pathToFileURL } = require("url");

const [zipPath, dest, pkgDir = __dirname] = process.argv.slice(2);
if (!zipPath || !dest) {
  console.error("usage: unpack.cjs ZIP DEST [PACKAGE_DIR]");
  process.exit(2);
}
const { modules, version } = require("./installed.cjs").installed(pkgDir);
const versions = { artifact: version("@actions/artifact"), unzipStream: version("unzip-stream") };

const zip = fs.readFileSync(zipPath);
const digest = "sha256:" + crypto.createHash("sha256").update(zip).digest("hex");
const [runId, jobId] = ["run-backend-id", "job-backend-id"];
const service = "/twirp/github.actions.results.api.v1.ArtifactService/";
const server = http.createServer((req, res) => {
  const json = (body) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const base = `http://127.0.0.1:${server.address().port}`;
  if (req.url === service + "ListArtifacts") {
    const artifact = { workflow_run_backend_id: runId, workflow_job_run_backend_id: jobId };
    json({ artifacts: [{ ...artifact, database_id: "1", name: "x", size: String(zip.length), digest }] });
  } else if (req.url === service + "GetSignedArtifactURL") {
    json({ signed_url: `${base}/blob/x.zip?sig=unsigned` });
  } else if (req.url.startsWith("/blob/")) {
    res.writeHead(200, { "content-type": "application/zip", "content-length": zip.length });
    res.end(zip);
  } else {
    res.writeHead(404, { "content-type": "application/json" });
    res.end(JSON.stringify({ msg: `not served: ${req.url}` }));
  }
});

server.listen(0, "127.0.0.1", async () => {
  // the runner's environment, as the library reads it: a JWT whose scp names the run and job
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  const scp = `Actions.Results:${runId}:${jobId}`;
  process.env.ACTIONS_RUNTIME_TOKEN = `${b64({ alg: "none" })}.${b64({ scp })}.sig`;
  process.env.ACTIONS_RESULTS_URL = `http://127.0.0.1:${server.address().port}/`;
  process.env.GITHUB_SERVER_URL = "https://github.com";
  let outcome;
  try {
    const main = require(path.join(modules, "@actions", "artifact", "package.json")).main;
    const lib = await import(pathToFileURL(path.join(modules, "@actions", "artifact", main)));
    const client = lib.default.default || lib.default; // ESM (6.x) or CommonJS (2.x)
    // download-artifact's options for one artifact (its findBy only with a github-token)
    const got = await client.downloadArtifact(1, {
      path: path.resolve(dest),
      expectedHash: digest,
      skipDecompress: false,
    });
    outcome = { downloadPath: got.downloadPath, digestMismatch: got.digestMismatch };
  } catch (e) {
    outcome = { error: String(e && e.message) };
  }
  server.close();
  console.log("RESULT " + JSON.stringify({ ...versions, ...outcome }));
  process.exit(outcome.error ? 1 : 0);
});
