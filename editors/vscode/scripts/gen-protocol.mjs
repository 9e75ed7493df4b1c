// Generates src/protocol.generated.ts, the extension's wire types, from the JSON Schemas in
// protocol/schema/ (json-schema-to-typescript), so the types cannot drift from the protocol.
//
//   node scripts/gen-protocol.mjs          writes the file
//   node scripts/gen-protocol.mjs --check  fails when the committed file differs (npm test runs it)
//
// Each schema file is self-contained and repeats the shared definitions (node, revision, ...);
// they are identical in every file (a cargo test checks), so they are merged once here and
// every file's own schema becomes one named type. Type names: `session/tree` params and result
// are TreeParams and TreeResult, `session/didChange` params DidChangeParams, `initialize`
// InitializeParams and InitializeResult, `$/progress` ProgressParams, error.json RpcErrorObject.
// A `Methods` table maps each method's short name to its wire name.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compile } from 'json-schema-to-typescript';

const here = dirname(fileURLToPath(import.meta.url));
const schemaDir = join(here, '..', '..', '..', 'protocol', 'schema');
const outFile = join(here, '..', 'src', 'protocol.generated.ts');

/** Names of the shared definitions' types (the key is the definition's name in the schemas). */
const DEF_NAMES = {
    node: 'TreeNode',
    graphNode: 'GraphNode',
    codexThread: 'CodexThread',
    treeCursor: 'TreeCursor',
    revision: 'Revision',
    tornTail: 'TornTail',
    diagnostic: 'Diagnostic',
    liveMode: 'LiveMode',
    probe: 'RetentionProbe',
    retention: 'Retention',
    expectedLeafId: 'ExpectedLeafId',
    nothingToCompact: 'NothingToCompact',
    writeResult: 'WriteResult',
    compactReport: 'CompactReport',
    preparation: 'CompactionPreparation',
    appendEntry: 'AppendEntry',
    initializationOptions: 'InitializationOptions',
    sessiondCapabilities: 'SessiondCapabilities',
    listedSession: 'SessionSummary',
    searchHit: 'SearchHit',
    rewindFile: 'RewindFile',
    indexProblem: 'IndexProblem',
    contextMessage: 'ContextMessage',
    explainReason: 'ExplainReason',
    pathData: 'PathErrorData',
    corruptData: 'CorruptErrorData',
    unknownEntryData: 'UnknownEntryErrorData',
    conflictData: 'ConflictData',
    busyData: 'BusyData',
    sessionExistsData: 'SessionExistsData',
    invalidEntryData: 'InvalidEntryData',
    retentionLostData: 'RetentionLostData',
    unsupportedVersionData: 'UnsupportedVersionData',
    notAUserMessageData: 'NotAUserMessageData',
    compactionFailedData: 'CompactionFailedData',
    agentActiveData: 'AgentActiveData',
    finding: 'VerifyFinding',
    modelFailedData: 'ModelFailedData',
    unsupportedForFormatData: 'UnsupportedForFormatData',
    piContextAt: 'PiContextAt',
    claudeContextAt: 'ClaudeContextAt',
    codexContextAt: 'CodexContextAt',
    piExplanation: 'PiExplanation',
    claudeExplanation: 'ClaudeExplanation',
    codexExplanation: 'CodexExplanation',
    summarySource: 'SummarySource',
    summarizedBranch: 'SummarizedBranch',
    pathEntry: 'ComparedEntry',
    compareSide: 'ComparedSide',
    compareReason: 'CompareReason',
    contextDifference: 'ContextDifference',
    contextChange: 'ContextChange',
    differ: 'DifferingSetting',
};

const pascal = (s) => s.charAt(0).toUpperCase() + s.slice(1);

/** `session.tree.result.json` → `TreeResult`; returns also the wire method and the kind. */
function typeName(file) {
    if (file === 'error.json') return { name: 'RpcErrorObject' };
    const m = /^(.*)\.(params|result)\.json$/.exec(file);
    if (!m) throw new Error(`unexpected schema file ${file}`);
    const method = m[1].replace('.', '/');
    const short = method.startsWith('session/') ? method.slice('session/'.length) : method.replace('$/', '');
    return { name: pascal(short) + pascal(m[2]), method, short, kind: m[2] };
}

const files = readdirSync(schemaDir).filter((f) => f.endsWith('.json')).sort();
const defs = {};
const methods = new Map();
const combined = { title: 'SessiondProtocol', type: 'object', additionalProperties: false, $defs: defs };
for (const file of files) {
    const schema = JSON.parse(readFileSync(join(schemaDir, file), 'utf8'));
    for (const [key, def] of Object.entries(schema.$defs ?? {})) {
        const name = DEF_NAMES[key];
        if (!name) throw new Error(`${file}: no type name for $defs/${key}; add it to DEF_NAMES`);
        defs[key] ??= { ...def, title: name };
    }
    const { $defs: _defs, $schema: _dialect, title, ...own } = schema;
    const { name, method, short, kind } = typeName(file);
    if (defs[name]) throw new Error(`${file}: type name ${name} taken`);
    const ref = /^#\/\$defs\/(\w+)$/.exec(own.$ref ?? '');
    defs[name] =
        ref && Object.keys(own).length === 1
            ? // A file that is one shared definition (every append's result): an alias of its type.
              { tsType: DEF_NAMES[ref[1]], title: name, description: `${title}.` }
            : { ...own, title: name, description: own.description ?? `${title}.` };
    if (method) {
        const entry = methods.get(short) ?? { method, kinds: [] };
        entry.kinds.push(kind);
        methods.set(short, entry);
    }
}

// A type whose properties include all of another named type's (three or more: two, such as
// `path` and `id`, are a coincidence, not a kinship), the same and required alike, extends it
// and lists only its own: compactReport within preparation, prepareCompaction's params within
// compact's. The shared fields are then written, and documented, once.
const isDeepStrictEqual = (a, b) => JSON.stringify(a) === JSON.stringify(b);
function extendsWhich(key, def) {
    const props = def.properties;
    if (!props || def.extends) return null;
    const required = new Set(def.required ?? []);
    let best = null;
    for (const [baseKey, base] of Object.entries(defs)) {
        const baseProps = base.properties;
        if (baseKey === key || !baseProps || base.extends) continue;
        const shared = Object.keys(baseProps);
        if (shared.length < 3 || shared.length >= Object.keys(props).length) continue;
        const baseRequired = new Set(base.required ?? []);
        const fits = shared.every(
            (p) => p in props && isDeepStrictEqual(props[p], baseProps[p]) && required.has(p) === baseRequired.has(p),
        );
        if (fits && base.additionalProperties === def.additionalProperties && shared.length > (best?.size ?? 0)) {
            best = { baseKey, size: shared.length, shared: new Set(shared) };
        }
    }
    return best;
}
for (const [key, def] of Object.entries(defs)) {
    const base = extendsWhich(key, def);
    if (!base) continue;
    const own = (p) => !base.shared.has(p);
    defs[key] = {
        ...def,
        extends: { $ref: `#/$defs/${base.baseKey}` },
        properties: Object.fromEntries(Object.entries(def.properties).filter(([p]) => own(p))),
        ...(def.required ? { required: def.required.filter(own) } : {}),
    };
}

// Titles inside a schema would name nested types after them; only the types above get names.
// Keys of `properties` are field names (a field may be called `title`), not keywords.
function stripNestedTitles(schema, top) {
    if (Array.isArray(schema)) return schema.map((s) => stripNestedTitles(s, false));
    if (schema === null || typeof schema !== 'object') return schema;
    const out = {};
    // Any JSON value: without this a schema with only a description would read as an object.
    const TYPED = ['type', '$ref', 'oneOf', 'anyOf', 'allOf', 'enum', 'const', 'tsType', 'properties', 'items'];
    if (!TYPED.some((k) => k in schema)) out.tsType = 'unknown';
    for (const [k, v] of Object.entries(schema)) {
        if (k === 'title' && !top) continue;
        // Per-type rules (`if`/`then`) have no TypeScript form; they would only add aliases.
        if (k === 'allOf' && Array.isArray(v) && v.every((rule) => 'if' in rule)) continue;
        if (k === 'properties' && v && typeof v === 'object') {
            out[k] = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, stripNestedTitles(s, false)]));
        } else {
            out[k] = stripNestedTitles(v, false);
        }
    }
    return out;
}
for (const key of Object.keys(defs)) defs[key] = stripNestedTitles(defs[key], true);

/** Names and descriptions of the long enums written in more than one place, by their first value. */
const ENUM_NAMES = {
    emptyFile: ['CorruptionKind', 'What is wrong at a corrupt spot of a session file.'],
    holdsFile: ['AgentEvidence', 'Why a process is taken to be an agent working on the session.'],
};

// A long enum the schemas write out in several places (the kinds of corruption: a diagnostic's,
// an error's data, didCorrupt's) becomes one named type that each place refers to.
function enumsIn(schema, seen) {
    if (schema === null || typeof schema !== 'object') return;
    if (Array.isArray(schema.enum) && schema.enum.length >= 4 && schema.enum.every((v) => typeof v === 'string')) {
        const key = JSON.stringify(schema.enum);
        seen.set(key, (seen.get(key) ?? 0) + 1);
    }
    for (const v of Object.values(schema)) enumsIn(v, seen);
}
const enumCounts = new Map();
for (const def of Object.values(defs)) enumsIn(def, enumCounts);
const sharedEnums = new Map();
for (const [key, count] of enumCounts) {
    if (count < 2) continue;
    const values = JSON.parse(key);
    const [name, description] = ENUM_NAMES[values[0]] ?? [];
    if (!name) throw new Error(`the enum ${key} is written ${count} times; name it in ENUM_NAMES`);
    sharedEnums.set(key, name);
    defs[name] = { title: name, description, enum: values };
}
function referToSharedEnums(schema) {
    if (Array.isArray(schema)) return schema.map(referToSharedEnums);
    if (schema === null || typeof schema !== 'object') return schema;
    const name = Array.isArray(schema.enum) ? sharedEnums.get(JSON.stringify(schema.enum)) : undefined;
    if (name && schema.title !== name) {
        const { enum: _values, ...rest } = schema;
        return { ...rest, tsType: name };
    }
    return Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, referToSharedEnums(v)]));
}
for (const key of Object.keys(defs)) defs[key] = referToSharedEnums(defs[key]);

const body = await compile(combined, 'SessiondProtocol', {
    bannerComment: '',
    unreachableDefinitions: true,
    additionalProperties: true,
    declareExternallyReferenced: true,
    style: { tabWidth: 4, singleQuote: true, printWidth: 120 },
});

const requests = [...methods.entries()].filter(([, e]) => e.kinds.includes('result'));
const notifications = [...methods.entries()].filter(([, e]) => !e.kinds.includes('result'));
const table = (entries) => entries.map(([short, e]) => `    ${JSON.stringify(short).replace(/^"([a-zA-Z]+)"$/, '$1')}: '${e.method}',`).join('\n');
const text = `// Generated by scripts/gen-protocol.mjs from protocol/schema/: do not edit; run \`npm run gen-protocol\`.
// The wire types of sessiond's JSON-RPC protocol (protocol/README.md).

${body
    .replace(/export interface SessiondProtocol \{\}\n\n?/, '')
    .replace(/ \*\n \* This interface was referenced by `SessiondProtocol`'s JSON-Schema\n \* via the `definition` "[^"]*"\.\n/g, '')
    .replace(/\/\*\*\n \* This interface was referenced by `SessiondProtocol`'s JSON-Schema\n \* via the `definition` "[^"]*"\.\n \*\/\n/g, '')
    .trimEnd()}

/** Every request method, by short name. */
export const Requests = {
${table(requests)}
} as const;

/** Every notification the server sends, by short name. */
export const Notifications = {
${table(notifications)}
} as const;

/** Requests and notifications, by short name. */
export const Methods = { ...Requests, ...Notifications } as const;
`;

if (process.argv.includes('--check')) {
    let committed = '';
    try {
        committed = readFileSync(outFile, 'utf8');
    } catch {
        // Missing: reported below.
    }
    if (committed !== text) {
        console.error(`${outFile} is not what protocol/schema/ generates; run \`npm run gen-protocol\` and commit it.`);
        process.exit(1);
    }
} else {
    writeFileSync(outFile, text);
}
