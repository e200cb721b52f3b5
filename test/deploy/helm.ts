/**
 * The `helm` of the machine, for the chart's render and lint tests: the binary on PATH, installed
 * the way Helm's own documentation installs it (its release archive, its install script, a package
 * manager). Nothing is downloaded by the tests. Without one, the tests that need helm skip with a
 * message and chart-source.test.ts still checks the chart's sources (docs/production.md
 * "How the chart is checked").
 */
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const probe = spawnSync('helm', ['version', '--short'], { encoding: 'utf8' });
/** helm's version (`v4.1.4+g05fa379`), or undefined when no helm is on PATH. */
export const helmVersion = probe.status === 0 ? probe.stdout.trim() : undefined;

/** Whether helm runs here; says once, for `what`, why its tests skip when it does not. */
export function helmAvailable(what: string): boolean {
  if (!helmVersion) console.warn(`${what} skipped: no helm on PATH (install it as https://helm.sh/docs/intro/install/ says)`);
  return helmVersion !== undefined;
}

// no kubeconfig, cache or plugins of the machine's user: lint and template need none
const home = join(tmpdir(), 'agent-platform-helm-home');

/** Runs helm; returns its exit status and output (helm's messages go to stderr). */
export function helm(args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync('helm', args, {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
    env: { PATH: process.env.PATH ?? '', HOME: home, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config') },
  });
  if (r.error) throw r.error;
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
