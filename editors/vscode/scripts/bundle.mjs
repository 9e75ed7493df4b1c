// Bundles the extension for VS Code with esbuild: src/extension.ts and its imports (the daemon
// client, vscode-jsonrpc) into dist/extension.js, `vscode` left to the host. The .vsix ships
// dist/ only (see .vscodeignore), so it needs no node_modules. `npm run bundle`; `vsce package`
// runs it through `vscode:prepublish`.
import { build } from 'esbuild';
import * as path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');

await build({
    entryPoints: [path.join(root, 'src', 'extension.ts')],
    outfile: path.join(root, 'dist', 'extension.js'),
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    external: ['vscode'],
    sourcemap: true,
    logLevel: 'warning',
});
