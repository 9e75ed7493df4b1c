// pi 1.6.0's own listing of every session, for scripts/bench_scale.py: SessionManager.listAll()
// over the sessions directory of PI_CODING_AGENT_DIR (what pi's /resume picker reads with
// "all projects"). Prints the number of sessions listed.
//
//   SESSIOND_ORACLE_DIR=DIR PI_CODING_AGENT_DIR=AGENT node scripts/pi-list-all.mjs
import { join } from "node:path";

const oracleDir = process.env.SESSIOND_ORACLE_DIR;
if (!oracleDir || !process.env.PI_CODING_AGENT_DIR) {
  console.error("pi-list-all.mjs: set SESSIOND_ORACLE_DIR and PI_CODING_AGENT_DIR");
  process.exit(2);
}
const sm = await import(
  join(oracleDir, "node_modules/@earendil-works/pi-coding-agent/dist/core/session-manager.js")
);
const sessions = await sm.SessionManager.listAll();
console.log(sessions.length);
