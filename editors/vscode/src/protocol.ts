//! The wire types of sessiond's JSON-RPC protocol (`protocol/README.md`), as the extension
//! uses them. The types are generated from `protocol/schema/` into `protocol.generated.ts`
//! (`npm run gen-protocol`; `npm test` fails when that file is stale), so they cannot drift
//! from the daemon; this file only adds what a schema does not name. Pure: no runtime code but
//! the method table and one type guard.

import { CompactResult, NothingToCompact } from './protocol.generated';

export * from './protocol.generated';

/** An entry id as written in the session file (8 hex digits in pi 1.6.0 files). */
export type EntryId = string;

/** Whether `session/compact` answered pi's "nothing to compact" (a result, not an error). */
export function isNothingToCompact(c: CompactResult): c is NothingToCompact {
    return (c as NothingToCompact).nothingToCompact === true;
}
