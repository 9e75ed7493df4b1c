// The pi 1.6.0 the oracle scripts ask: SESSIOND_ORACLE_DIR names the folder holding
// node_modules/@earendil-works/pi-coding-agent (a copy of ../shared/oracle after `npm install`);
// a script run without it exits 2.
import { basename, join } from "node:path";

const oracleDir = process.env.SESSIOND_ORACLE_DIR;
if (!oracleDir) {
  console.error(
    `${basename(process.argv[1])}: set SESSIOND_ORACLE_DIR to the directory holding node_modules/@earendil-works/pi-coding-agent`,
  );
  process.exit(2);
}

/** A module of pi's `dist/core`, by its path there (`session-manager.js`, `compaction/utils.js`). */
export function piCore(path) {
  return import(join(oracleDir, "node_modules/@earendil-works/pi-coding-agent/dist/core", path));
}
