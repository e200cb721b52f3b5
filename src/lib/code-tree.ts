/**
 * The compiled trees `npm start` runs (scripts/build-server.ts). Every build is a folder of its
 * own beside the checkout's `dist` link, and a platform process marks the tree it runs from as in
 * use (`<tree>/.in-use/<pid>`), so a later build that switches `dist` to a newer tree never
 * removes one that a running process, or an agent it launches from it, still needs.
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const IN_USE_DIR = '.in-use';

/** Marks the tree of the module at `moduleUrl` as in use until this process exits. */
export function markTreeInUse(moduleUrl: string): void {
  const dir = join(dirname(fileURLToPath(moduleUrl)), IN_USE_DIR);
  // the sources (`npm run start:src`, the tests) have no marker folder: nothing to mark
  if (!existsSync(dir)) return;
  const file = join(dir, String(process.pid));
  try {
    writeFileSync(file, `${process.pid}\n`);
  } catch {
    return; // a read-only tree (an image): nobody builds there
  }
  process.on('exit', () => rmSync(file, { force: true }));
}
