// Scratch: start the host, open the Sessions view, dump rows.
import { startHost, screenshot, runCommand } from './harness.mjs';
const h = await startHost();
try {
    const { page } = h;
    await page.waitForTimeout(8000);
    await screenshot(page, 'explore-1');
    await runCommand(page, 'Explorer: Focus on Sessions View').catch((e) => console.log('focus failed', e.message));
    await page.waitForTimeout(5000);
    await screenshot(page, 'explore-2');
    const rows = await page.locator('[role=treeitem]').evaluateAll((els) => els.map((e) => `${e.getAttribute('aria-label')} | ${e.getAttribute('aria-level')} | ${e.getAttribute('aria-expanded')}`));
    console.log(rows.join('\n'));
    const headers = await page.locator('.pane-header').evaluateAll((els) => els.map((e) => e.getAttribute('aria-label')));
    console.log(headers);
} finally {
    await h.stop();
}
