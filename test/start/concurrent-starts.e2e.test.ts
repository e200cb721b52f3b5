/**
 * Several `npm start` at once in one checkout (a copy of this one, so the test neither rebuilds
 * nor edits the developer's tree): a web and a backend process sharing one DATA_DIR (and so one
 * embedded PostgreSQL server) and two whole platforms on data of their own all come up. A later
 * start with changed sources builds a new tree and switches `dist` to it without disturbing the
 * running ones: their tree stays as it was, and they still launch agents from it. Each stops with
 * exit code 0 on Ctrl-C, and the shared PostgreSQL server stops with the last of its processes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, copyFileSync, cpSync, mkdtempSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import {
  agentPids,
  eventually,
  isAlive,
  killLeftovers,
  postgresPid,
  ROOT,
  removeTree,
  TROUBLE,
  trackChild,
  waitFor,
  webClient,
} from './helpers.ts';

const checkout = mkdtempSync(join(tmpdir(), 'platform-checkout-'));
chmodSync(checkout, 0o755); // the embedded server runs as the postgres OS user when we are root
const skipBuilds = (src: string) => !/\/(dist|\.dist-[^/]*|node_modules)(\/|$)/.test(src.slice(ROOT.length));
for (const dir of ['src', 'scripts', 'dashboard']) cpSync(join(ROOT, dir), join(checkout, dir), { recursive: true, filter: skipBuilds });
for (const file of ['package.json', 'package-lock.json']) copyFileSync(join(ROOT, file), join(checkout, file));
symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'));

const dataDirs = ['shared', 'a', 'b', 'c'].map((name) => {
  const dir = join(checkout, `data-${name}`);
  return dir;
});
afterAll(async () => {
  await killLeftovers(dataDirs);
  removeTree(checkout);
});

type Instance = { child: ChildProcess; exited: Promise<number | null>; output(): string };

/** `npm start [-- app]` in the copy, as its own process group (a terminal's job). */
function npmStart(app: string | undefined, env: Record<string, string>): Instance {
  const child = spawn('npm', ['start', ...(app ? ['--', app] : [])], {
    cwd: checkout,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/root',
      LOG_LEVEL: 'warn',
      npm_config_update_notifier: 'false',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  trackChild(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(signal ? -1 : code)));
  return { child, exited, output: () => output };
}

async function up(instance: Instance, url: string) {
  const res = await Promise.race([
    waitFor(url, 120_000),
    instance.exited.then((code) => {
      throw new Error(`exited with ${code} before answering:\n${instance.output()}`);
    }),
  ]);
  expect(res.status, instance.output()).toBe(200);
}

async function ctrlC(instance: Instance) {
  process.kill(-instance.child.pid!, 'SIGINT');
  expect(await instance.exited, instance.output()).toBe(0);
  expect(instance.output()).not.toMatch(TROUBLE);
}

describe('npm start, several at once in one checkout', () => {
  it('all come up, a rebuild does not disturb the running ones, each stops cleanly', async () => {
    const port = async () => String(await freePort());
    const [sharedWeb, sharedBackend, aWeb, aBackend, bWeb, bBackend, cWeb, cBackend] = await Promise.all(Array.from({ length: 8 }, port));
    const whole = (dataDir: string, web: string, backend: string) => ({
      DATA_DIR: dataDir,
      WEB_PORT: web,
      BACKEND_PORT: backend,
      PUBLIC_URL: `http://127.0.0.1:${web}`,
    });
    const split = { DATA_DIR: dataDirs[0]!, INTERNAL_API_KEY: 'split-internal-key', WEB_PORT: sharedWeb!, BACKEND_PORT: sharedBackend! };

    // four starts at once: each runs the prestart builds, two share a DATA_DIR
    const backend = npmStart('backend', split);
    const web = npmStart('web', { ...split, BACKEND_URL: `http://127.0.0.1:${sharedBackend}` });
    const a = npmStart(undefined, { ...whole(dataDirs[1]!, aWeb!, aBackend!), ADMIN_EMAILS: 'a@example.com' });
    const b = npmStart(undefined, whole(dataDirs[2]!, bWeb!, bBackend!));
    await Promise.all([
      up(backend, `http://127.0.0.1:${sharedBackend}/health`),
      up(web, `http://127.0.0.1:${sharedWeb}/api/health`),
      up(a, `http://127.0.0.1:${aWeb}/api/health`),
      up(b, `http://127.0.0.1:${bWeb}/api/health`),
    ]);
    // the web process reaches the database through the backend's PostgreSQL server: one server for the DATA_DIR
    const webApi = webClient(`http://127.0.0.1:${sharedWeb}`);
    expect((await webApi('POST', '/api/register', { email: 'split@example.com', password: 'correct horse battery' })).status).toBe(201);

    // the tree the running platforms use, then a start with changed sources
    const tree = realpathSync(join(checkout, 'dist'));
    const main = readFileSync(join(tree, 'main.js'), 'utf8');
    appendFileSync(join(checkout, 'src', 'main.ts'), '\n// changed while other platforms run\n');
    const c = npmStart(undefined, whole(dataDirs[3]!, cWeb!, cBackend!));
    await up(c, `http://127.0.0.1:${cWeb}/api/health`);
    expect(realpathSync(join(checkout, 'dist'))).not.toBe(tree);
    expect(readFileSync(join(tree, 'main.js'), 'utf8')).toBe(main);

    // a platform started before the rebuild still launches agents, from its own tree
    const api = webClient(`http://127.0.0.1:${aWeb}`);
    expect((await api('POST', '/api/register', { email: 'a@example.com', password: 'correct horse battery' })).status).toBe(201);
    expect((await api('POST', '/api/auth/login', { email: 'a@example.com', password: 'correct horse battery' })).status).toBe(200);
    const prov = await api('POST', '/api/agents/provision', { name: 'After rebuild' });
    expect(prov.status, JSON.stringify(prov.body)).toBe(201);
    await eventually(async () => (await api('GET', `/api/agents/${prov.body.agent.id}`)).body.agent?.status === 'running', 60_000, 100);
    const agentPid = agentPids(dataDirs[1]!).get(prov.body.agent.id)!;
    expect(readFileSync(`/proc/${agentPid}/cmdline`, 'utf8')).toContain(join(tree, 'runtime', 'main.js'));

    // the web process stops; the backend it shared PostgreSQL with keeps it
    await ctrlC(web);
    const operatorAgents = await fetch(`http://127.0.0.1:${sharedBackend}/api/agents`, {
      headers: { authorization: 'Bearer split-internal-key' },
    });
    expect(operatorAgents.status).toBe(200);
    expect(postgresPid(dataDirs[0]!)).toBeDefined();
    await ctrlC(backend);
    expect(postgresPid(dataDirs[0]!)).toBeUndefined();

    await Promise.all([ctrlC(a), ctrlC(b), ctrlC(c)]);
    expect(isAlive(agentPid)).toBe(false);
    for (const dir of dataDirs) expect(postgresPid(dir), dir).toBeUndefined();
  }, 300_000);
});
