/**
 * Start-up: parse config, open the database (embedded server when DATABASE_URL is unset), run
 * migrations, wire the domains, start the app(s). `npm start` runs both apps;
 * `npm start -- web` / `npm start -- backend` (or APP=web|backend) runs one.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { type Config, ConfigError, loadConfig } from './config/env.ts';
import { resolveSecrets, storedSecret } from './config/secrets.ts';
import { createDb, type Db } from './db/client.ts';
import { EmbeddedPostgresError, type EmbeddedServer, startEmbeddedPostgres } from './db/embedded.ts';
import { migrate } from './db/migrate.ts';
import { connectsAsPrivileged, ensureOwnerRole } from './db/roles.ts';
import type { App } from './http/shared/base-app.ts';
import { createLogger } from './http/shared/logging.ts';
import { markTreeInUse } from './lib/code-tree.ts';
import { acquireHostLock } from './lib/host-lock.ts';
import {
  livePlatformProcesses,
  overlap,
  portFree,
  refusedBesideLine,
  refusedPortLine,
  registerPlatformProcess,
  secondPlatformCommand,
  suggestPorts,
  thisProcess,
} from './lib/process-registry.ts';
import { checkRedis } from './lib/redis.ts';
import { tuneV8ForServing } from './lib/v8-tuning.ts';
import { featureLines, type HostingLine, hostingLine, modelProviderLine, type StartUpLine } from './platform/start-up-report.ts';
import { createPlatform, type Platform } from './platform.ts';

/** The start-up lock of a DATA_DIR (src/lib/host-lock.ts), held while secrets may be generated into it. */
async function lockDataDir(dataDir: string) {
  mkdirSync(dataDir, { recursive: true });
  const id = createHash('sha256').update(realpathSync(dataDir)).digest('hex').slice(0, 40);
  return acquireHostLock(`agent-platform-data-${id}`, join(dataDir, 'start.lock.sock'), {
    timeoutMs: 180_000,
    onTimeout: () => new ConfigError(`another process has held the start-up lock of DATA_DIR (${dataDir}) for 3 minutes`),
  });
}

/**
 * Refuses a Node older than package.json's `engines` (the one place the minimum is written; README
 * "Run it"): production dependencies need it (the kubernetes client's undici 22.19, cookie and
 * content-disposition 22) and would fail later and less clearly. `npm start` in a checkout with its
 * development dependencies runs the repository's own Node 24 whatever the system's is.
 */
function nodeTooOld(): string | undefined {
  let range: string | undefined;
  try {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { engines?: { node?: string } };
    range = pkg.engines?.node;
  } catch {
    return undefined; // no package.json beside the code: nothing to hold it to
  }
  const min = /^>=\s*(\d+)\.(\d+)(?:\.(\d+))?$/.exec(range?.trim() ?? '');
  if (!min) return undefined;
  const want = min.slice(1).map((n) => Number(n ?? 0));
  const have = process.versions.node.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    if (have[i] === want[i]) continue;
    if (have[i]! > want[i]!) return undefined;
    return `Node ${process.versions.node} is too old: the platform needs Node ${range} (package.json "engines"). Install a current Node LTS, or start it with npm start in a checkout with its development dependencies (npm install), which runs the repository's own Node 24`;
  }
  return undefined;
}

/**
 * A start that would be a second platform on this DATA_DIR, or bind a port something else holds,
 * stops here with one line, before it opens the database or touches an agent: a second backend on
 * the data would adopt and redeploy the agents the first one runs (docs/configuration.md "Several
 * platforms on one machine"). Run under the DATA_DIR's start-up lock, so of two starts at once the
 * second sees the first's registration.
 */
async function claimDataDir(config: Config, mode: 'all' | 'web' | 'backend'): Promise<void> {
  const me = thisProcess({
    role: mode,
    host: config.HOST,
    webPort: config.WEB_PORT,
    backendPort: config.BACKEND_PORT,
    localAgents: config.HOSTING_DRIVER === 'local',
  });
  // the one that runs the agents first: it is the one a second backend would take them from
  const others = livePlatformProcesses(config.DATA_DIR).sort((a, b) => Number(b.runsAgents) - Number(a.runsAgents));
  for (const other of others) {
    const why = overlap(me, other);
    if (!why) continue;
    const ports = await suggestPorts(config.HOST, config.WEB_PORT, config.BACKEND_PORT);
    const command = secondPlatformCommand(ports, { dataDir: config.DATA_DIR, cwd: process.cwd() });
    throw new ConfigError(refusedBesideLine(config.DATA_DIR, other, why, command));
  }
  const mine: [string, number][] = [];
  if (mode !== 'backend') mine.push(['WEB_PORT', config.WEB_PORT]);
  if (mode !== 'web') mine.push(['BACKEND_PORT', config.BACKEND_PORT]);
  for (const [setting, port] of mine) {
    const probe = await portFree(config.HOST, port);
    if (probe.free) continue;
    const command = secondPlatformCommand(await suggestPorts(config.HOST, config.WEB_PORT, config.BACKEND_PORT));
    throw new ConfigError(refusedPortLine(setting, config.HOST, port, probe.code, command));
  }
  registerPlatformProcess(config.DATA_DIR, me);
}

function which(config: Config): 'all' | 'web' | 'backend' {
  const arg = process.argv[2];
  if (arg === 'web' || arg === 'backend' || arg === 'all') return arg;
  if (arg !== undefined) throw new ConfigError(`Unknown app "${arg}": use web, backend or all`);
  return config.APP;
}

async function main() {
  const tooOld = nodeTooOld();
  if (tooOld) {
    console.error(tooOld);
    process.exit(1);
  }
  tuneV8ForServing();
  let config: Config;
  let mode: 'all' | 'web' | 'backend';
  try {
    config = loadConfig();
    mode = which(config);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  // one logger for the apps, the workers and start-up, so the start-up block prints in order
  const log = createLogger(config.LOG_LEVEL, config.LOG_FORMAT);
  // the dashboard build as it is now: `npm start` switches dashboard/dist to a newer build by
  // renaming a link (scripts/build-dashboard.ts), and the web app must read one build, not two
  try {
    config = { ...config, DASHBOARD_DIR: realpathSync(config.DASHBOARD_DIR) };
  } catch {
    /* not built: the web app says so at / */
  }
  // Generated secrets are made under a lock: processes starting at once on one DATA_DIR (`npm start
  // -- web` beside `npm start -- backend`) must all use the same ones (DATA_DIR/secrets.json).
  const lock = await lockDataDir(config.DATA_DIR);
  let generatedInternalKey = false;
  const secretWarnings: string[] = [];
  let secrets: ReturnType<typeof resolveSecrets>;
  let embeddedPasswords: { superuser: string; owner: string; request: string } | undefined;
  try {
    await claimDataDir(config, mode);
    // `npm start` with no INTERNAL_API_KEY: both apps run here and the web app must still reach the
    // backend, so generate a key once into DATA_DIR (0600) and give it to both. A backend started
    // alone keeps answering 500 `Server misconfigured` (§5): nobody else could know a generated key.
    if (mode === 'all' && !config.INTERNAL_API_KEY) {
      const key = storedSecret(config.DATA_DIR, 'internalApiKey', () => randomBytes(32).toString('base64url'));
      config = { ...config, INTERNAL_API_KEY: key, configured: { ...config.configured, internalApiKey: true } };
      generatedInternalKey = true;
    }
    secrets = resolveSecrets(config, (line) => secretWarnings.push(line));
    if (!config.DATABASE_URL) {
      const generate = () => randomBytes(24).toString('base64url');
      embeddedPasswords = {
        superuser: storedSecret(config.DATA_DIR, 'embeddedDbPassword', generate),
        // the superuser only creates the owner role and hands it the database (docs/security.md)
        owner: storedSecret(config.DATA_DIR, 'embeddedDbOwnerPassword', generate),
        request: storedSecret(config.DATA_DIR, 'embeddedDbRequestPassword', generate),
      };
    }
  } finally {
    await lock.release();
  }

  // What has started so far, so a signal at any point of start-up stops exactly that. The
  // handlers are installed before anything starts: a SIGTERM during start-up must still stop the
  // embedded PostgreSQL and exit 0, not kill the process and leave the server behind.
  // The order is what makes a stop clean (docs/configuration.md "Starting and stopping"): the apps
  // stop taking requests, the workers finish, the hosting driver stops the agents this process
  // runs, the pools close, and the embedded PostgreSQL (in its own session, so a terminal's Ctrl-C
  // never reaches it) stops last, when no other platform process on this DATA_DIR still uses it.
  const running: { embedded?: Promise<EmbeddedServer>; db?: Db; platform?: Platform; apps: App[] } = { apps: [] };
  let stopping = false;
  const stopAll = async () => {
    await Promise.allSettled(running.apps.map((a) => a.close()));
    await running.platform?.close().catch(() => {});
    await running.db?.close().catch(() => {});
    const embedded = await running.embedded?.catch(() => undefined);
    await embedded?.stop().catch(() => {});
  };
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => process.exit(1), 30_000);
    force.unref();
    await stopAll();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // the terminal closing (or `script`/tmux ending) is a stop too: without this the default action
  // ends the process at once and leaves the agents and the embedded PostgreSQL running
  process.on('SIGHUP', () => void stop('SIGHUP'));
  failed = async () => {
    if (stopping) return;
    stopping = true;
    await stopAll();
  };

  let url = config.DATABASE_URL;
  let requestUrl = config.DATABASE_REQUEST_URL;
  let privileged: Awaited<ReturnType<typeof connectsAsPrivileged>> | undefined;
  let embedded: EmbeddedServer | undefined;
  if (!url) {
    const passwords = embeddedPasswords as NonNullable<typeof embeddedPasswords>; // made above when DATABASE_URL is unset
    running.embedded = startEmbeddedPostgres({ dataDir: config.DATA_DIR, password: passwords.superuser });
    embedded = await running.embedded;
    const superuserUrl = embedded.url;
    if (stopping) return;
    // a stop signal during this shuts the server down under it: that is a stop, not a failure
    const roles = await ensureOwnerRole(superuserUrl, passwords.owner, passwords.request).catch((err: unknown) => {
      if (stopping) return undefined;
      throw err;
    });
    if (!roles) return;
    url = roles.ownerUrl;
    requestUrl = roles.requestUrl;
  } else {
    privileged = await connectsAsPrivileged(url).catch(() => undefined);
  }
  if (stopping) return;
  const { applied } = await migrate(url);
  if (stopping) return;
  const db = (running.db = createDb(url, {
    poolSize: config.DATABASE_POOL_SIZE,
    ...(requestUrl ? { requestConnectionString: requestUrl } : {}),
  }));
  // the hosting driver's lines about itself (its sandbox, network, limits) while the platform is
  // built: held for the start-up block, which prints them only where agents run
  const hostingLines: HostingLine[] = [];
  let building = true;
  const hostingLog = (level: HostingLine['level'], message: string) =>
    building ? hostingLines.push({ level, message }) : log[level]({ source: 'hosting' }, message);
  const platform = (running.platform = createPlatform({ config, db, secrets, logger: log, hostingLog }));
  building = false;
  // Deployment jobs run where the backend runs (it owns the hosting driver). Started before the
  // apps listen: reconciliation marks agents that do not run yet `provisioning`, so nobody reads
  // `running` for an agent that does not answer after a restart.
  if (mode !== 'web') await platform.startWorkers();
  // agents' bots run in backend processes (docs/channels.md "Connections")
  if (mode !== 'web') await platform.startChannels({ servesWeb: mode === 'all' });
  if (stopping) return;

  const listen = async (build: () => Promise<App>, port: number, name: 'web' | 'backend') => {
    if (stopping) return;
    const app = await build();
    running.apps.push(app);
    const what = name === 'web' ? 'web app (dashboard and its API)' : 'backend (API for agents and keys)';
    await app
      // Fastify's own line is the one that says where an app listens (one per address)
      .listen({ host: config.HOST, port, listenTextResolver: (address) => `${what} listening at ${address}` })
      .catch((err: NodeJS.ErrnoException) => {
        // taken since claimDataDir() found it free: still one line, not a trace
        if (err.code === 'EADDRINUSE' || err.code === 'EACCES')
          throw new ConfigError(`${name === 'web' ? 'WEB_PORT' : 'BACKEND_PORT'} ${port} on ${config.HOST}: ${err.message}`);
        throw err;
      });
  };
  if (mode !== 'backend') await listen(platform.buildWebApp, config.WEB_PORT, 'web');
  if (mode !== 'web') await listen(platform.buildBackendApp, config.BACKEND_PORT, 'backend');
  if (stopping) return;

  // The start-up block (docs/configuration.md "What start-up prints"): the database, where agents
  // run and in what sandbox, the model provider, what is off for lack of a setting, and last
  // where to go. Each line is one fact; the JSON format carries the same records.
  const block: StartUpLine[] = [];
  if (embedded) {
    // where the data is and how to reach it, for an operator's own look (psql with the passwords
    // of DATA_DIR/secrets.json) and backups (docs/production.md "Backups")
    const port = Number(new URL(embedded.url).port);
    block.push({
      level: 'info',
      msg: `database: embedded PostgreSQL on 127.0.0.1:${port}, data in ${embedded.dataDir} (npm run backup copies it while the platform runs)`,
      fields: { database: 'embedded', host: '127.0.0.1', port, dataDir: embedded.dataDir },
    });
  } else if (config.DATABASE_URL) {
    const u = new URL(config.DATABASE_URL);
    block.push({
      level: 'info',
      msg: `database: PostgreSQL at ${u.host}${u.pathname} (DATABASE_URL)`,
      fields: { database: 'DATABASE_URL' },
    });
  }
  if (mode !== 'web') {
    // agents run where the backend runs: its hosting driver's sandbox, network and limits
    for (const line of hostingLines) block.push({ level: line.level, msg: line.message });
    const hosting = hostingLine(config);
    if (hosting) block.push(hosting);
    block.push(modelProviderLine(config, platform.services.ai.providers));
  }
  for (const line of secretWarnings) block.push({ level: 'warn', msg: line });
  if (privileged && (privileged.superuser || privileged.bypassRls)) {
    block.push({
      level: 'warn',
      msg: 'DATABASE_URL connects as a superuser or a role that bypasses row-level security: connect as a non-superuser owner role instead (docs/security.md "Database roles")',
      fields: { role: privileged.role, superuser: privileged.superuser, bypassRls: privileged.bypassRls },
    });
  }
  if (config.REDIS_URL) {
    // Checked once so an operator hears at start-up, not from a slow register: we start anyway
    // (degraded) because every Redis use has a per-process fallback and Redis may come back.
    const problem = await checkRedis(config.REDIS_URL, Math.max(config.REDIS_TIMEOUT_MS, 2_000));
    if (problem) {
      const u = new URL(config.REDIS_URL);
      block.push({
        level: 'warn',
        msg: 'REDIS_URL does not answer: starting degraded (rate limits count per process; sign-outs reach other replicas only when their 5 s session cache expires) until Redis is back',
        fields: { redis: `${u.hostname}:${u.port || 6379}`, problem },
      });
    }
  }
  if (generatedInternalKey) {
    block.push({
      level: 'info',
      msg: 'INTERNAL_API_KEY not set: using a generated key for the web app and the backend in this process',
      fields: { stored: 'DATA_DIR/secrets.json' },
    });
  }
  if (mode !== 'backend') block.push(...featureLines(config));
  for (const line of block) log[line.level](line.fields ?? {}, line.msg);
  if (mode !== 'backend') {
    platform.startWebJobs();
    // a new instance has no admin: print the one-time link that makes its opener one (docs/admin.md)
    // a stop asked for meanwhile closes the database under this read: that is a stop, not a failed start
    const link = await platform.services.admin.setupLinkIfNoAdmin().catch((err: unknown) => {
      if (stopping) return null;
      throw err;
    });
    if (stopping) return;
    if (link)
      log.warn(
        { setupLink: link },
        `No admin yet: sign in, then open this one-time link to become the admin: ${link}  (or run: npm run admin -- <email>)`,
      );
  }
  // The last line of the block says whether the platform can be used and where to go. Only the
  // all-in-one start knows both apps run; one app alone says it is ready, and which half it is.
  const app = mode === 'all' ? 'platform' : mode === 'web' ? 'web app' : 'backend';
  if (!config.INTERNAL_API_KEY) {
    // only `npm start -- web` or `-- backend` get here (the all-in-one start generates one)
    log.warn(
      `${app} started but not usable: INTERNAL_API_KEY is not set, so the backend answers its core endpoints 500 "Server misconfigured" and the web app cannot provision or reach agents; set the same key for both apps and start them again (docs/configuration.md)`,
    );
    return;
  }
  const open = mode === 'backend' ? `${config.BACKEND_URL}/docs` : `${config.PUBLIC_URL}/`;
  const where =
    mode === 'all'
      ? `open the dashboard at ${open}`
      : mode === 'web'
        ? `open the dashboard at ${open} (the backend runs apart, at ${config.BACKEND_URL})`
        : `API docs at ${open} (the dashboard is the web app's: npm start -- web)`;
  log.info({ migrationsApplied: applied.length, open }, `${app} ready: ${where}`);
}

/** Stops what start-up had started, when start-up fails (set once the stop handlers exist). */
let failed: (() => Promise<void>) | undefined;

markTreeInUse(import.meta.url);
main().catch(async (err) => {
  // an operator-facing start-up failure is one line; anything else keeps its stack for a bug report
  if (err instanceof EmbeddedPostgresError || err instanceof ConfigError) console.error(err.message);
  else console.error(err instanceof Error ? (err.stack ?? err.message) : err);
  // never leave the agents or the embedded PostgreSQL of a failed start behind
  const force = setTimeout(() => process.exit(1), 30_000);
  force.unref();
  await failed?.().catch(() => {});
  process.exit(1);
});
