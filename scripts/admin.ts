/**
 * Grants or revokes admin rights from a shell (docs/admin.md):
 *   npm run admin -- <email>            make the account with that email an admin
 *   npm run admin -- --revoke <email>   take the rights back
 * Uses DATABASE_URL when set; otherwise the embedded database in DATA_DIR: the running
 * platform's server when it is up (its port is in postmaster.pid), else a server started just
 * for this command.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig } from '../src/config/env.ts';
import { storedSecret } from '../src/config/secrets.ts';
import { createDb } from '../src/db/client.ts';
import { EmbeddedPostgresError, type EmbeddedServer, embeddedClusterDir, startEmbeddedPostgres } from '../src/db/embedded.ts';
import { migrate } from '../src/db/migrate.ts';
import { createAdminService } from '../src/domains/admin/admin.service.ts';

const USAGE = 'usage: npm run admin -- [--revoke] <email>';

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const revoke = args.includes('--revoke');
  const rest = args.filter((a) => a !== '--revoke');
  if (rest.length !== 1 || !rest[0]!.includes('@')) {
    console.error(USAGE);
    return 2;
  }
  const email = rest[0]!;
  const config = loadConfig();
  let url = config.DATABASE_URL;
  let embedded: EmbeddedServer | undefined;
  if (!url) {
    const password = storedSecret(config.DATA_DIR, 'embeddedDbPassword', () => {
      throw new ConfigError(`No platform data in ${config.DATA_DIR}: start the platform once (npm start), or set DATA_DIR/DATABASE_URL`);
    });
    const running = runningPort(embeddedClusterDir(config.DATA_DIR));
    if (running) url = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${running}/platform`;
    else {
      embedded = await startEmbeddedPostgres({ dataDir: config.DATA_DIR, password });
      url = embedded.url;
    }
  }
  try {
    await migrate(url);
    const db = createDb(url, { poolSize: 1, applicationName: 'agent-platform-admin' });
    try {
      const row = await createAdminService({ db, publicUrl: config.PUBLIC_URL }).setAdminByEmail(email, !revoke);
      if (!row) {
        console.error(`No account with the email ${email}`);
        return 1;
      }
      console.log(`${row.email} is ${row.is_admin ? 'now an admin' : 'no longer an admin'} (takes effect within 5 s on running processes)`);
      return 0;
    } finally {
      await db.close();
    }
  } finally {
    await embedded?.stop();
  }
}

/** The port of a live server on that cluster (line 4 of postmaster.pid), if one runs. */
function runningPort(clusterDir: string): number | undefined {
  try {
    const lines = readFileSync(join(clusterDir, 'postmaster.pid'), 'utf8').split('\n');
    const pid = Number(lines[0]);
    process.kill(pid, 0); // throws when no such process
    return Number(lines[3]) || undefined;
  } catch {
    return undefined;
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err instanceof ConfigError || err instanceof EmbeddedPostgresError ? err.message : err);
    process.exit(1);
  },
);
