/**
 * What every dashboard browser test needs (docs/dashboard.md "Quality checks"): Debian's Chromium driven by
 * playwright-core, a fresh build of dashboard/ for the live platform to serve, a page per viewport,
 * axe-core (no serious or critical violation), screenshots and the no-sideways-scroll check.
 * A test file skips with a message when Chromium is not installed (`chromium.available`).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';
import { buildDashboard } from '../../scripts/build-dashboard.ts';

// page.evaluate callbacks run in the browser; this project's types are Node's (no DOM lib)
declare const window: unknown;
declare const document: { documentElement: { scrollWidth: number } };

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const ROOT = resolve(import.meta.dirname, '../..');
const SHOTS = process.env.UPDATE_SCREENSHOTS ? join(ROOT, 'docs/screenshots') : join(ROOT, '.test-results/screenshots');
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Whether Chromium is installed; says once, for `what`, how to install it when not. */
export function chromiumAvailable(what: string): boolean {
  const available = existsSync(CHROMIUM);
  if (!available) console.warn(`${what} skipped: no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);
  return available;
}

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** A fresh build of the dashboard in a temporary folder (for DASHBOARD_DIR); `remove` deletes it. */
export async function buildDashboardForTest(): Promise<{ dir: string; remove: () => void }> {
  const dir = mkdtempSync(join(tmpdir(), 'dashboard-e2e-'));
  await buildDashboard(dir);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * A page in a context of its own at `width` px, with the page's uncaught errors collected.
 * The dashboard polls what can change behind it (an agent's status, the agents list, channels)
 * every 5 or 10 s; in these pages a poll of a second or more comes ten times as often, so a test
 * waits for the change itself rather than for the next poll. `realPolling` keeps the page's own
 * periods, for a test that tells an update at once from one at the next poll.
 */
export async function openPage(
  browser: Browser,
  baseURL: string,
  options: { width: number; height?: number; clipboard?: boolean; realPolling?: boolean },
): Promise<{ page: Page; errors: string[] }> {
  const { width } = options;
  // bypassCSP only so the test can inject axe-core: the page's own policy forbids inline scripts
  const context = await browser.newContext({
    viewport: { width, height: options.height ?? (width < 600 ? 800 : 900) },
    baseURL,
    bypassCSP: true,
  });
  if (options.clipboard) await context.grantPermissions(['clipboard-read', 'clipboard-write']);
  if (!options.realPolling) {
    await context.addInitScript(() => {
      const w = window as unknown as { setInterval: (fn: () => void, ms?: number) => number };
      const setInterval = w.setInterval.bind(window);
      w.setInterval = (fn, ms) => setInterval(fn, ms !== undefined && ms >= 1000 ? ms / 10 : ms);
    });
  }
  const page = await context.newPage();
  page.setDefaultTimeout(20_000);
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  return { page, errors };
}

/** axe-core on the page as it is: no serious or critical violation of WCAG 2.1 A/AA or best practice. */
export async function expectAccessible(page: Page, name: string): Promise<void> {
  await page.addScriptTag({ content: AXE });
  const violations = await page.evaluate(async () => {
    const w = window as unknown as {
      axe: { run(o: unknown): Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> };
    };
    const r = await w.axe.run({ runOnly: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')).slice(0, 3) }));
  });
  expect(
    violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'),
    `axe on ${name}`,
  ).toEqual([]);
}

/** A screenshot in .test-results/screenshots (docs/screenshots with UPDATE_SCREENSHOTS=1). */
export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`) });
}

export async function expectNoHorizontalScroll(page: Page, width: number, name: string): Promise<void> {
  const scrollWidth = await page.evaluate(() => document.documentElement.scrollWidth);
  expect(scrollWidth, `${name} at ${width} px`).toBeLessThanOrEqual(width);
}
